#!/usr/bin/env python3
"""Tiny HTTP/1.1 origin for h2gate tests.

  POST/PUT <any path>  reads the body (Content-Length or chunked) and answers
                       200 "<sha256hex> <length>\n", with X-Sink-Framing set to
                       "chunked", "content-length" or "none". A path with a
                       "/slow/" segment makes it an origin slower than its
                       clients: it waits 1 s before reading the body, then
                       reads 16 KiB every 2 ms (at most ~8 MB/s).
  GET /chunked/N       N bytes of pattern data with Transfer-Encoding: chunked
                       (chunks of up to 64 KiB)
  GET /close/N         N bytes of pattern data with neither Content-Length nor
                       chunking: the body ends when the server closes
  GET <other path>     answers 200 with the request line and the request
                       headers exactly as received, one per line (for checking
                       what a proxy forwarded).
Pattern data: byte i is (i * 7 + i // 251) % 256.

Usage: upload_sink.py [--port N]   (0 = ephemeral). Prints
"upload_sink listening on 127.0.0.1:PORT" once bound.
"""
import argparse
import hashlib
import http.server
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; 100-continue handled by the base class

    def log_message(self, fmt, *args):
        sys.stderr.write("upload_sink: %s\n" % (fmt % args))

    def _reply(self, body, extra=()):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _read_body(self, digest):
        slow = "/slow/" in self.path
        if slow:
            time.sleep(1)
        piece = 16384 if slow else 1 << 20
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            total = 0
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionError("EOF in chunk size")
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return total, "chunked"
                left = size
                while left:
                    chunk = self.rfile.read(min(left, piece))
                    if not chunk:
                        raise ConnectionError("EOF in chunk")
                    digest.update(chunk)
                    left -= len(chunk)
                    if slow:
                        time.sleep(0.002)
                total += size
                self.rfile.readline(3)  # CRLF after the chunk
        length = self.headers.get("Content-Length")
        if length is None:
            return 0, "none"
        left = int(length)
        while left:
            chunk = self.rfile.read(min(left, piece))
            if not chunk:
                raise ConnectionError("EOF in body")
            digest.update(chunk)
            left -= len(chunk)
            if slow:
                time.sleep(0.002)
        return int(length), "content-length"

    def do_POST(self):
        digest = hashlib.sha256()
        total, framing = self._read_body(digest)
        self._reply("%s %d\n" % (digest.hexdigest(), total), [("X-Sink-Framing", framing)])

    do_PUT = do_POST

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) == 3 and parts[1] in ("chunked", "close") and parts[2].isdigit():
            return self._pattern(parts[1], int(parts[2]))
        lines = [self.requestline]
        lines += ["%s: %s" % (k, v) for k, v in self.headers.items()]
        self._reply("\n".join(lines) + "\n")

    do_HEAD = do_GET

    def _pattern(self, mode, n):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        for start in range(0, n, 65536):
            data = pattern(start, min(n, start + 65536))
            if mode == "chunked":
                self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            else:
                self.wfile.write(data)
        if mode == "chunked":
            self.wfile.write(b"0\r\n\r\n")


def pattern(start, end):
    return bytes((i * 7 + i // 251) % 256 for i in range(start, end))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    print("upload_sink listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
