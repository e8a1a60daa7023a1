#!/ usr / bin / env python3
"""An HTTP/1.1 server that answers in the response shape a request names, for
h2gate's response-shape matrix (tests/integration/response_shapes_test.cc).

It is an origin and an HTTP/1.1 proxy at once: the shape is the last path
segment of the request target, whatever its form (`GET /s/cl0`, `GET
http://any.host/s/cl0`), so with h2gate's upstream set to this server every
shape comes verbatim from "the proxy". A CONNECT's answer is chosen by the
first label of its target host (`CONNECT ok.shape.test:80` opens the tunnel,
`CONNECT 407-empty.shape.test:80` answers 407 with no body...); inside an
opened tunnel the same server answers the requests that follow.

  shape_server.py --port-file F --log F

Shapes (each answer's body is a function of the shape, method and request
body, so a client can tell it got the right bytes):
  cl        200, Content-Length, a body
  cl0       200, Content-Length: 0
  chunked   200, Transfer-Encoding: chunked, the body in three chunks
  chunked0  200, Transfer-Encoding: chunked, no data (only the last chunk)
  204       204 No Content
  304       304 Not Modified
  1xx       103 Early Hints, then 200 with a Content-Length body
  close     200, Content-Length body, Connection: close, then the server closes
  eof       200, neither length nor chunking: the body ends when the server
            closes (after a HEAD, which has no body, the connection stays open)
  407       407 with a body (Proxy-Authenticate: Basic)
  407-empty 407, Content-Length: 0
  407-chunked 407, a chunked body
  407-close 407 with a body, Connection: close, then the server closes
  502       502 with a body
  502-empty 502, Content-Length: 0
  badlength a head with "Content-Length: abc", then close (a proxy in front
            answers 502)
  dropnext  as cl, kept alive, but the next request on the connection gets no
            answer: the server closes as it arrives (a server that closes an
            idle connection just as a client sends on it)
A HEAD gets the head a GET would (with its Content-Length) and no body.
Each request is logged as one JSON line: client (ip:port), method, target,
shape, body_len (request body bytes read).
"""

import argparse
import hashlib
import json
import os
import socket
import socketserver
import sys
import threading

ARGS = None
LOG_LOCK = threading.Lock()


def log(entry):
    with LOG_LOCK:
        with open(ARGS.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def body_for(shape, method, request_body):
    digest = hashlib.sha256(request_body).hexdigest()[:16]
    line = "%s %s %d %s\n" % (shape, method, len(request_body), digest)
    return (line * 40).encode()


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def read_until(self, marker, limit=1 << 20):
        while marker not in self.buf:
            if len(self.buf) > limit:
                return None
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_exact(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_body(self, headers):
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = b""
            while True:
                line = self.read_until(b"\r\n")
                if line is None:
                    return None
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers
                        t = self.read_until(b"\r\n")
                        if t is None or t == b"\r\n":
                            return body
                chunk = self.read_exact(size + 2)
                if chunk is None:
                    return None
                body += chunk[:-2]
        n = int(headers.get("content-length", "0") or "0")
        return self.read_exact(n) if n else b""

    def read_request(self):
        head = self.read_until(b"\r\n\r\n")
        if head is None:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return method, target, headers


def head_bytes(status, reason, headers):
    out = "HTTP/1.1 %d %s\r\n" % (status, reason)
    for k, v in headers:
        out += "%s: %s\r\n" % (k, v)
    return (out + "\r\n").encode("latin-1")


def chunked(body, pieces):
    out = b""
    step = max(1, len(body) // pieces) if body else 1
    for i in range(0, len(body), step):
        part = body[i:i + step]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def answer(conn, method, shape, request_body):
    """Writes the answer for `shape`; returns False when the connection ends."""
    sock = conn.sock
    body = body_for(shape, method, request_body)
    head_only = method == "HEAD"
    status, reason = 200, "OK"
    if shape.startswith("407"):
        status, reason = 407, "Proxy Authentication Required"
    elif shape.startswith("502"):
        status, reason = 502, "Bad Gateway"
    extra = [("Content-Type", "text/plain")]
    if status == 407:
        extra.append(("Proxy-Authenticate", 'Basic realm="shapes"'))
    if shape in ("cl", "407", "502", "dropnext"):
        sock.sendall(head_bytes(status, reason, extra + [("Content-Length", len(body))]) +
                     (b"" if head_only else body))
    elif shape in ("cl0", "407-empty", "502-empty"):
        sock.sendall(head_bytes(status, reason, extra + [("Content-Length", "0")]))
    elif shape in ("chunked", "407-chunked"):
        sock.sendall(head_bytes(status, reason, extra + [("Transfer-Encoding", "chunked")]) +
                     (b"" if head_only else chunked(body, 3)))
    elif shape == "chunked0":
        sock.sendall(head_bytes(status, reason, extra + [("Transfer-Encoding", "chunked")]) +
                     (b"" if head_only else b"0\r\n\r\n"))
    elif shape == "204":
        sock.sendall(head_bytes(204, "No Content", []))
    elif shape == "304":
        sock.sendall(head_bytes(304, "Not Modified", [("ETag", '"shape"')]))
    elif shape == "1xx":
        sock.sendall(head_bytes(103, "Early Hints", [("Link", "</style.css>; rel=preload")]) +
                     head_bytes(200, "OK", extra + [("Content-Length", len(body))]) +
                     (b"" if head_only else body))
    elif shape in ("close", "407-close"):
        sock.sendall(head_bytes(status, reason, extra + [("Content-Length", len(body)),
                                                         ("Connection", "close")]) +
                     (b"" if head_only else body))
        return False
    elif shape == "eof":
#A HEAD answer has no body whatever its head says : the connection
#stays open.
        sock.sendall(head_bytes(200, "OK", extra) + (b"" if head_only else body))
        return head_only
    elif shape == "badlength":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nabc")
        return False
    else:
        sock.sendall(head_bytes(404, "Not Found", [("Content-Length", "0")]))
    return True


def serve(conn, client, tunnel=False):
    drop = False
    while True:
        req = conn.read_request()
        if req is None:
            return
        if drop:
            log({"client": client, "method": req[0], "target": req[1], "shape": "dropped",
                 "body_len": 0, "tunnel": tunnel})
            return
        method, target, headers = req
        if method == "CONNECT" and not tunnel:
            shape = target.split(".", 1)[0].lower()
            log({"client": client, "method": method, "target": target, "shape": shape,
                 "body_len": 0})
            if shape == "ok":
                conn.sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                return serve(conn, client, tunnel=True)
            if not answer(conn, method, shape, b""):
                return
            continue
        path = target.split("?", 1)[0]
        shape = path.rstrip("/").rsplit("/", 1)[-1]
        body = conn.read_body(headers) if method not in ("GET", "HEAD") else b""
        if body is None:
            return
        log({"client": client, "method": method, "target": target, "shape": shape,
             "body_len": len(body), "tunnel": tunnel})
        if not answer(conn, method, shape, body):
            return
        drop = shape == "dropnext"


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        client = "%s:%d" % self.client_address[:2]
        try:
            serve(Conn(self.request), client)
        except (OSError, ValueError):
            pass
        finally:
            try:
                self.request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    ARGS = p.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = ARGS.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, ARGS.port_file)
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
