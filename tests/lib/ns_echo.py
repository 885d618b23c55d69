#!/usr/bin/env python3
"""Plain TCP peers for tests.

  ns_echo.py serve --bind ADDR [--port N] --log FILE
      Threaded TCP server: reads until the client half-closes (or 2 s of
      silence), appends one JSON line to FILE {peer, len, sha256, head (the
      first 64 bytes, hex)}, answers "echo:" + what it read, closes.
      Prints "ready PORT" once listening. --banner TEXT: say TEXT first
      (a server-first protocol, like SMTP or SSH).

  ns_echo.py send HOST PORT [--hex HEX | --data TEXT]
      Connects, sends, half-closes, prints what came back on stdout and its
      local port on stderr ("local port N"). Exit 0 if the peer answered
      anything, 1 if it closed or reset without a byte. --banner-first: send
      only once the server has said something.
"""
import argparse, hashlib, json, socket, socketserver, sys, threading

ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
s = sub.add_parser("serve")
s.add_argument("--bind", required=True)
s.add_argument("--port", type=int, default=0)
s.add_argument("--log", required=True)
s.add_argument("--banner", help="send this first, as a server-first protocol does")
c = sub.add_parser("send")
c.add_argument("host")
c.add_argument("port", type=int)
c.add_argument("--hex")
c.add_argument("--data", default="hi from the sandbox\n")
c.add_argument("--timeout", type=float, default=5)
c.add_argument("--banner-first", action="store_true",
               help="send nothing until the server has said something")
a = ap.parse_args()

if a.cmd == "serve":
    lock = threading.Lock()

    class H(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.settimeout(2)
            if a.banner:
                self.request.sendall(a.banner.encode())
            data = b""
            try:
                while True:
                    chunk = self.request.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            rec = {"peer": self.client_address[0], "len": len(data),
                   "sha256": hashlib.sha256(data).hexdigest(), "head": data[:64].hex()}
            with lock, open(a.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
            try:
                self.request.sendall(b"echo:" + data)
            except OSError:
                pass

    class S(socketserver.ThreadingMixIn, socketserver.TCPServer):
        daemon_threads = True
        allow_reuse_address = True
        address_family = socket.AF_INET6 if ":" in a.bind else socket.AF_INET

    srv = S((a.bind, a.port), H)
    print("ready", srv.server_address[1], flush=True)
    srv.serve_forever()
else:
    data = bytes.fromhex(a.hex) if a.hex else a.data.encode()
    sk = socket.create_connection((a.host, a.port), timeout=a.timeout)
    print("local port %d" % sk.getsockname()[1], file=sys.stderr, flush=True)
    got = b""
    try:
        if a.banner_first:
            got = sk.recv(65536)
            if not got:
                raise ConnectionError("closed before the banner")
        sk.sendall(data)
        sk.shutdown(socket.SHUT_WR)
        while True:
            chunk = sk.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError as e:
        print("error: %s" % e, file=sys.stderr)
    sys.stdout.buffer.write(got)
    sys.exit(0 if got else 1)
