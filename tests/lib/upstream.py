#!/usr/bin/env python3
"""A test upstream: HTTP or HTTPS, threaded, that records what arrived.

Every request is appended to --log as one JSON line: method, path, headers
(in order, as received), body length and SHA-256, the server name the TLS
client asked for. GET /file/NAME serves DOCROOT/NAME; anything else gets
"hello from NAME". Prints "ready PORT" on stdout once listening.
"""
import argparse, hashlib, http.server, json, os, socket, socketserver, ssl, sys, threading

ap = argparse.ArgumentParser()
ap.add_argument("--bind", default="127.0.0.1")
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--cert")
ap.add_argument("--key")
ap.add_argument("--name", default="upstream")
ap.add_argument("--docroot", default=".")
ap.add_argument("--log", required=True)
args = ap.parse_args()
lock = threading.Lock()
sni_seen = threading.local()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def record(self, body):
        rec = {
            "method": self.command, "path": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": len(body), "body_sha256": hashlib.sha256(body).hexdigest(),
            "sni": getattr(self.connection, "sg_sni", None),
            "peer": self.client_address[0],
        }
        with lock, open(args.log, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower().endswith("chunked"):
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_any(self):
        body = self.read_body()
        self.record(body)
        if self.command == "GET" and self.path.startswith("/file/"):
            fn = os.path.join(args.docroot, os.path.basename(self.path[6:]))
            try:
                size = os.path.getsize(fn)
            except OSError:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            with open(fn, "rb") as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
            return
        msg = ("hello from %s\n" % args.name).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    address_family = socket.AF_INET6 if ":" in args.bind else socket.AF_INET


srv = Server((args.bind, args.port), Handler)
if args.cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)

    def sni_cb(sslsock, name, _ctx):
        sslsock.sg_sni = name
    ctx.sni_callback = sni_cb
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("ready", srv.server_address[1], flush=True)
srv.serve_forever()
