#!/usr/bin/env python3
"""An HTTP/1.1 forward proxy that demands authentication, for h2gate's tests.

The credentials are verified by maintained implementations: NTLM by PyPI
pyspnego's acceptor (users from NTLM_USER_FILE, lines DOMAIN:user:password;
LM_COMPAT_LEVEL=5 here, so only NTLMv2 is accepted), Negotiate by MIT
Kerberos's GSSAPI acceptor through PyPI python-gssapi (SPNEGO included; the
service key from KRB5_KTNAME), Basic against --basic USER:PASSWORD.

  auth_proxy.py --port-file F --log F --schemes negotiate,ntlm,basic
                [--one-line] [--basic user:pw] [--mutual ok|forged|none]
                [--tls CERT KEY [--alpn h2,http/1.1]]
                [--ntlm-acceptor pyspnego|gss-ntlmssp]
                [--challenge-framing body|empty|chunked|close-first|close]
                [--hosts NAME,NAME]

--ntlm-acceptor gss-ntlmssp verifies NTLM with Debian's gss-ntlmssp (GSSAPI,
through python-gssapi; same NTLM_USER_FILE) instead of pyspnego.

--challenge-framing: how each 407 is framed (HTTP/1.1): with a body and its
Content-Length (body, the default), Content-Length: 0 (empty), a chunked body
(chunked), or with a body and Connection: close, after which the proxy
closes: only a 407 to a request that carried no Proxy-Authorization
(close-first, as proxies that want a fresh connection for the handshake do),
or every 407 (close: NTLM then cannot complete).

--schemes: what a 407 offers, in order (Proxy-Authenticate lines, or one line
with --one-line). NTLM authenticates the connection: the three messages go on
one keep-alive connection, after which requests on it need nothing more.
Negotiate and Basic authenticate each request. --mutual: what a successful
Negotiate answer carries: the acceptor's token (ok), a corrupted one (forged)
or none. With --tls the proxy speaks TLS; a client that picks h2 from --alpn
gets the same answer on every stream: 407 offering --schemes (PyPI h2), so a
proxy that wants NTLM but speaks HTTP/2 can be imitated.

CONNECT tunnels go to the target; absolute-form requests are forwarded
(http.client) and their answers re-framed with Content-Length. The names in
--hosts are 127.0.0.1 (as squid's hosts_file in tests/support/
upstream_proxies.cc), others resolve as usual. Each request
is logged as one JSON line: client (ip:port), method, target, status, scheme,
authorization (yes when the request had a Proxy-Authorization header, of any
scheme, else no), user, and nt_len (the NT response length of an NTLM authenticate message: 24
for NTLMv1, more for NTLMv2).
"""

import argparse
import base64
import http.client
import json
import os
import select
import socket
import socketserver
import ssl
import struct
import sys
import threading
import urllib.parse

os.environ["LM_COMPAT_LEVEL"] = "5"  # before spnego reads it: NTLMv2 only
import spnego  # noqa: E402

ARGS = None
LOG_LOCK = threading.Lock()


def log(entry):
    with LOG_LOCK:
        with open(ARGS.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def challenges():
    names = {"negotiate": "Negotiate", "ntlm": "NTLM", "basic": 'Basic realm="h2gate-test"'}
    offered = [names[s] for s in ARGS.schemes.split(",") if s]
    if ARGS.one_line:
        return [("Proxy-Authenticate", ", ".join(offered))]
    return [("Proxy-Authenticate", c) for c in offered]


def ntlm_nt_len(msg):
    # MS-NLMP 2.2.1.3 AUTHENTICATE_MESSAGE: NtChallengeResponseFields at 20.
    if len(msg) < 28 or msg[:8] != b"NTLMSSP\0":
        return 0
    return struct.unpack_from("<H", msg, 20)[0]


class Conn:
    """One client connection: NTLM state lives here."""

    def __init__(self, sock, client):
        self.sock = sock
        self.client = client
        self.buf = b""
        self.ntlm = None
        self.user = None  # NTLM-authenticated user of this connection

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
        te = headers.get("transfer-encoding", "").lower()
        if "chunked" in te:
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

    def send(self, status, reason, headers=(), body=b"", framing="body"):
        """Returns False when the connection is to close after it."""
        head = "HTTP/1.1 %d %s\r\n" % (status, reason)
        for k, v in headers:
            head += "%s: %s\r\n" % (k, v)
        if framing == "empty":
            body = b""
        if framing == "chunked":
            head += "Transfer-Encoding: chunked\r\n\r\n"
            payload = (b"%x\r\n" % len(body) + body + b"\r\n" if body else b"") + b"0\r\n\r\n"
        else:
            if framing == "close":
                head += "Connection: close\r\n"
            head += "Content-Length: %d\r\n\r\n" % len(body)
            payload = body
        self.sock.sendall(head.encode("latin-1") + payload)
        return framing != "close"


def authenticate(conn, method, target, headers):
    """(ok, scheme, extra response headers, details for the log)."""
    if conn.user is not None:
        return True, "ntlm-connection", [], {"user": conn.user}
    value = headers.get("proxy-authorization", "")
    scheme, _, token = value.partition(" ")
    scheme = scheme.lower()
    token = token.strip()
    if scheme == "ntlm" and "ntlm" in ARGS.schemes:
        raw = base64.b64decode(token)
        kind = struct.unpack_from("<I", raw, 8)[0] if len(raw) >= 12 else 0
        if kind == 1:
            conn.ntlm = ntlm_acceptor()
            out = conn.ntlm.step(raw)
            return False, "ntlm-challenge", [("Proxy-Authenticate", "NTLM " + base64.b64encode(out).decode())], {}
        if kind == 3 and conn.ntlm is not None:
            detail = {"nt_len": ntlm_nt_len(raw)}
            try:
                conn.ntlm.step(raw)
            except Exception as e:  # a wrong password: pyspnego raises
                conn.ntlm = None
                detail["error"] = type(e).__name__ + ": " + str(e)[:300]
                return False, "ntlm-rejected", challenges(), detail
            # gss-ntlmssp's acceptor names the user with a trailing NUL (its display
            # name counts the terminator; so with gss-ntlmssp's own initiator too,
            # no h2gate involved): the name without it.
            name = getattr(conn.ntlm, "client_principal", None) or conn.ntlm.initiator_name
            conn.user = str(name).rstrip("\x00")
            detail["user"] = conn.user
            return True, "ntlm", [], detail
        return False, "ntlm-unexpected", challenges(), {}
    if scheme == "negotiate" and "negotiate" in ARGS.schemes:
        import gssapi  # python-gssapi: MIT Kerberos's own acceptor (SPNEGO included)

        try:
            ctx = gssapi.SecurityContext(usage="accept")
            out = ctx.step(base64.b64decode(token))
        except Exception as e:
            return False, "negotiate-rejected", challenges(), {"error": type(e).__name__ + ": " + str(e)[:200]}
        if not ctx.complete:
            return False, "negotiate-incomplete", challenges(), {}
        extra = []
        if ARGS.mutual != "none" and out:
            if ARGS.mutual == "forged":
                out = out[:-3] + bytes([out[-3] ^ 0x5A]) + out[-2:]
            extra.append(("Proxy-Authenticate", "Negotiate " + base64.b64encode(out).decode()))
        return True, "negotiate", extra, {"user": str(ctx.initiator_name), "token": token[:16]}
    if scheme == "basic" and "basic" in ARGS.schemes:
        if ARGS.basic and base64.b64decode(token).decode("utf-8", "replace") == ARGS.basic:
            return True, "basic", [], {"user": ARGS.basic.split(":")[0]}
        return False, "basic-rejected", challenges(), {}
    return False, "none", challenges(), {}


def ntlm_acceptor():
    if ARGS.ntlm_acceptor == "pyspnego":
        return spnego.server(protocol="ntlm")
    # gss-ntlmssp (NTLMSSP as a GSSAPI mechanism) through python-gssapi.
    import gssapi

    mech = gssapi.OID.from_int_seq("1.3.6.1.4.1.311.2.2.10")
    return gssapi.SecurityContext(usage="accept", creds=gssapi.Credentials(usage="accept", mechs=[mech]))


def relay(a, b):
    socks = [a, b]
    try:
        while True:
            r, _, _ = select.select(socks, [], [], 60)
            if not r:
                return
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return


def resolve(host):
    return "127.0.0.1" if host in ARGS.hosts.split(",") else host


def forward(method, target, headers, body):
    u = urllib.parse.urlsplit(target)
    # The request's own Host header goes along (http.client adds none then).
    origin = http.client.HTTPConnection(resolve(u.hostname), u.port or 80, timeout=30)
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    fwd = {k: v for k, v in headers.items()
           if k not in ("proxy-authorization", "proxy-connection", "connection", "keep-alive",
                        "transfer-encoding", "content-length")}
    origin.request(method, path, body=body if body else None, headers=fwd)
    resp = origin.getresponse()
    data = resp.read()
    out = [(k, v) for k, v in resp.getheaders()
           if k.lower() not in ("content-length", "transfer-encoding", "connection", "keep-alive")]
    origin.close()
    return resp.status, resp.reason, out, data


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        client = "%s:%d" % self.client_address[:2]
        if isinstance(sock, ssl.SSLSocket) and sock.selected_alpn_protocol() == "h2":
            return handle_h2(sock, client)
        conn = Conn(sock, client)
        while True:
            head = conn.read_until(b"\r\n\r\n")
            if head is None:
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = conn.read_body(headers) if method != "CONNECT" else b""
            if body is None:
                return
            ok, scheme, extra, detail = authenticate(conn, method, target, headers)
            entry = {"client": conn.client, "method": method, "target": target, "scheme": scheme,
                     "authorization": "yes" if "proxy-authorization" in headers else "no"}
            entry.update(detail)
            if not ok:
                entry["status"] = 407
                log(entry)
                framing = ARGS.challenge_framing
                if framing == "close-first":
                    framing = "body" if "proxy-authorization" in headers else "close"
                if not conn.send(407, "Proxy Authentication Required",
                                 [("Content-Type", "text/plain")] + extra,
                                 b"authentication required\n", framing):
                    return
                continue
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                try:
                    upstream = socket.create_connection((resolve(host.strip("[]")), int(port)), timeout=10)
                except OSError:
                    entry["status"] = 502
                    log(entry)
                    conn.send(502, "Bad Gateway", extra)
                    continue
                entry["status"] = 200
                log(entry)
                answer = "HTTP/1.1 200 Connection established\r\n"
                for k, v in extra:
                    answer += "%s: %s\r\n" % (k, v)
                sock.sendall((answer + "\r\n").encode())
                if conn.buf:
                    upstream.sendall(conn.buf)
                    conn.buf = b""
                relay(sock, upstream)
                upstream.close()
                return
            try:
                status, reason, out, data = forward(method, target, headers, body)
            except OSError as e:
                entry["status"] = 502
                entry["error"] = str(e)
                log(entry)
                conn.send(502, "Bad Gateway", extra)
                continue
            entry["status"] = status
            entry["body_len"] = len(body)
            log(entry)
            conn.send(status, reason, out + extra, data)


def handle_h2(sock, client):
    import h2.config
    import h2.connection
    import h2.events

    # CONNECT has no :path: h2 would call it malformed.
    cfg = h2.config.H2Configuration(client_side=False, validate_inbound_headers=False)
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection()
    sock.sendall(c.data_to_send())
    while True:
        data = sock.recv(65536)
        if not data:
            return
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                hdrs = {}
                for k, v in ev.headers:
                    hdrs[k.decode() if isinstance(k, bytes) else k] = v.decode() if isinstance(v, bytes) else v
                log({"client": client, "method": hdrs.get(":method"), "target": hdrs.get(":authority"),
                     "status": 407, "scheme": "h2"})
                c.send_headers(ev.stream_id, [(":status", "407")] +
                               [(k.lower(), v) for k, v in challenges()], end_stream=True)
        sock.sendall(c.data_to_send())


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self):
        sock, addr = super().get_request()
        if ARGS.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(ARGS.tls[0], ARGS.tls[1])
            ctx.set_alpn_protocols(ARGS.alpn.split(","))
            sock = ctx.wrap_socket(sock, server_side=True)
        return sock, addr


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--schemes", default="ntlm")
    p.add_argument("--one-line", action="store_true")
    p.add_argument("--basic", default="")
    p.add_argument("--mutual", default="ok", choices=["ok", "forged", "none"])
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--alpn", default="http/1.1")
    p.add_argument("--ntlm-acceptor", default="pyspnego", choices=["pyspnego", "gss-ntlmssp"])
    p.add_argument("--challenge-framing", default="body",
                   choices=["body", "empty", "chunked", "close-first", "close"])
    p.add_argument("--hosts", default="")
    ARGS = p.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
