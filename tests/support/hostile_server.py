#!/usr/bin/env python3
"""A hostile HTTP/1.1 server (or proxy) for h2gate's tests: every request it
reads (CONNECT, HEAD, GET...) gets the answer its --mode says.

  status    the status line "HTTP/1.1 <--status> <the bytes of --reason-file>",
            then Content-Length and a short body (none after HEAD), and
            Connection: close. The reason may hold ESC sequences, CR, LF...
  endless   "HTTP/1.1 200 OK" and then header lines without end (a head
            that never ends), until the client closes or --max-bytes went.
  slow      a complete head, but one byte every --interval seconds, until
            the client closes or --max-seconds passed.
  auth407   407 with "Proxy-Authenticate: <scheme>" where the scheme is a
            fresh random token of --scheme-bytes characters each time, a
            short body, Connection: close.

  hostile_server.py --mode M [--port N] [--tls CERT KEY] [--status N]
                    [--reason-file F] [--interval S] [--scheme-bytes N]

Prints "hostile_server listening on 127.0.0.1:PORT" once bound, and one line
"request N: <request line>" per request it read (requests are counted so a
test can see how many reached it).
"""
import argparse
import random
import socket
import ssl
import string
import sys
import threading
import time

ARGS = None
REASON = b""
COUNT_LOCK = threading.Lock()
COUNT = 0
TCHAR = string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~"


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > 1 << 20:
            return None
    return data


def answer(conn):
    global COUNT
    head = read_head(conn)
    if head is None:
        return
    line = head.split(b"\r\n", 1)[0]
    with COUNT_LOCK:
        COUNT += 1
        n = COUNT
    print("request %d: %s" % (n, line.decode("latin-1")), flush=True)
    is_head = line.startswith(b"HEAD ")
    if ARGS.mode == "status":
        body = b"" if is_head else b"hostile\n"
        conn.sendall(b"HTTP/1.1 %d " % ARGS.status + REASON +
                     b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % 8 + body)
    elif ARGS.mode == "auth407":
        scheme = "".join(random.choice(TCHAR) for _ in range(ARGS.scheme_bytes))
        conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                     b"Proxy-Authenticate: " + scheme.encode() + b"\r\n"
                     b"Content-Length: 8\r\nConnection: close\r\n\r\nhostile\n")
    elif ARGS.mode == "endless":
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        line = b"X-Endless: " + b"a" * 1000 + b"\r\n"
        sent = 0
        while sent < ARGS.max_bytes:
            conn.sendall(line)
            sent += len(line)
    elif ARGS.mode == "slow":
        data = (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Slow: " + b"s" * 4096 +
                b"\r\n\r\n")
        deadline = time.monotonic() + ARGS.max_seconds
        for i in range(len(data)):
            if time.monotonic() > deadline:
                break
            conn.sendall(data[i:i + 1])
            time.sleep(ARGS.interval)


def serve(conn, ctx):
    try:
        if ctx is not None:
            conn = ctx.wrap_socket(conn, server_side=True)
        answer(conn)
    except (OSError, ssl.SSLError):
        pass  # the client gave up: that is the point
    finally:
        try:
            conn.close()
        except OSError:
            pass


def main():
    global ARGS, REASON
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True, choices=["status", "endless", "slow", "auth407"])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--status", type=int, default=403)
    p.add_argument("--reason-file")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--max-seconds", type=float, default=120.0)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--scheme-bytes", type=int, default=30 * 1024)
    ARGS = p.parse_args()
    if ARGS.reason_file:
        with open(ARGS.reason_file, "rb") as f:
            REASON = f.read()
    ctx = None
    if ARGS.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.tls[0], ARGS.tls[1])
        ctx.set_alpn_protocols(["http/1.1"])
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", ARGS.port))
    srv.listen(128)
    print("hostile_server listening on 127.0.0.1:%d" % srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, ctx), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
