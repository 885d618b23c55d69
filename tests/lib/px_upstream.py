#!/usr/bin/env python3
"""Raw TCP upstreams for the proxy tests. Prints "ready PORT" once listening.

  --mode sink   per connection: read until 0.7 s of silence or EOF, append
                {"len": N, "data": "<bytes as latin-1>"} to --log, answer a
                small HTTP/1.1 200 with Connection: close, close.
  --mode udp-blackhole  a UDP socket that reads and never answers (a DNS
                server that does not respond); logs {"udp": N} per datagram.
  --mode reset  per connection: read the request head, send a 200 head
                promising 1 MB and 1000 bytes of it, then close with
                SO_LINGER 0 (an RST mid-stream); logs {"len": N, "reset": true}.
"""
import argparse, json, socket, struct, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--bind", default="127.0.0.1")
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--mode", choices=["sink", "reset", "udp-blackhole"], default="sink")
ap.add_argument("--log", required=True)
a = ap.parse_args()
lock = threading.Lock()


def log(rec):
    with lock, open(a.log, "a") as f:
        f.write(json.dumps(rec) + "\n")


def serve(c):
    c.settimeout(0.7)
    buf = b""
    try:
        while True:
            if a.mode == "reset" and b"\r\n\r\n" in buf:
                break
            d = c.recv(65536)
            if not d:
                break
            buf += d
    except socket.timeout:
        pass
    except OSError:
        pass
    try:
        if a.mode == "sink":
            log({"len": len(buf), "data": buf.decode("latin-1")})
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
            c.close()
        else:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + b"x" * 1000)
            time.sleep(0.2)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()
            log({"len": len(buf), "reset": True, "data": buf[:200].decode("latin-1")})
    except OSError as e:
        log({"len": len(buf), "error": str(e)})


if a.mode == "udp-blackhole":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((a.bind, a.port))
    print("ready", u.getsockname()[1], flush=True)
    while True:
        d, _ = u.recvfrom(65536)
        log({"udp": len(d)})

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((a.bind, a.port))
s.listen(128)
print("ready", s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
