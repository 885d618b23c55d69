#!/usr/bin/env python3
"""Test clients for the proxy integration tests (tests/integration/proxy_*,
reload_*, resolver_*, badinput_*). Each subcommand prints one JSON object.

  raw PORT [--data STR] [--hex HEX] [--wait S] [--src ADDR]
      connect to 127.0.0.1:PORT, send the bytes (\\r\\n escapes allowed in
      --data), read until EOF/reset/--wait; report status line, reason
      header, how the connection ended and how long it took.
  tunnel PORT HOST TPORT --cafile F --go FILE [--sni NAME]
      CONNECT HOST:TPORT, TLS to HOST, GET /one; write "ready" to stdout,
      wait until FILE exists, GET /two on the same TLS connection.
  hold PORT N [--settle S]
      open N idle connections, report how many the peer closed within
      S (0.5) seconds; keep them until stdin closes. Commands on stdin:
      "close K" / "close all" closes K of them, "count" reports how many
      the peer has closed since, "use HOST:PORT PATH" sends a CONNECT on
      the first held one and a GET PATH through the tunnel.
"""
import argparse, json, os, select, socket, ssl, sys, time


def out(obj):
    print(json.dumps(obj), flush=True)


def read_all(s, wait):
    """Read until EOF, reset or `wait` seconds of total time."""
    buf, end = b"", "timeout"
    deadline = time.monotonic() + wait
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        p = select.poll()
        p.register(s, select.POLLIN)
        if not p.poll(left * 1000):
            break
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            end = "reset"
            break
        if not d:
            end = "eof"
            break
        buf += d
    return buf, end


def parse_resp(buf):
    head = buf.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    status, reason = None, None
    if lines and lines[0].startswith("HTTP/"):
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            pass
        for l in lines[1:]:
            k, _, v = l.partition(":")
            if k.strip().lower() == "x-sandgate-reason":
                reason = v.strip()
    return status, reason


def cmd_raw(a):
    t0 = time.monotonic()
    s = socket.socket()
    if a.src:
        s.bind((a.src, 0))
    s.connect(("127.0.0.1", a.port))
    data = b""
    if a.data is not None:
        data = a.data.encode().decode("unicode_escape").encode("latin-1")
    if a.hex:
        data += bytes.fromhex(a.hex)
    if a.repeat:
        data = data.replace(b"@@", b"A" * a.repeat)
    try:
        if data:
            s.sendall(data)
        buf, end = read_all(s, a.wait)
    except (BrokenPipeError, ConnectionResetError):
        buf, end = b"", "reset"
    st, reason = parse_resp(buf)
    out({"status": st, "reason": reason, "end": end, "bytes": len(buf),
         "elapsed": round(time.monotonic() - t0, 3),
         "head": buf[:300].decode("latin-1")})


def http_get(tls, host, path):
    tls.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = tls.recv(65536)
        if not d:
            raise EOFError("closed before response head")
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    n = 0
    for l in head.split(b"\r\n")[1:]:
        k, _, v = l.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        d = tls.recv(65536)
        if not d:
            raise EOFError("closed mid-body")
        body += d
    return int(head.split()[1]), body.decode()


def cmd_tunnel(a):
    res = {}
    s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
               (a.host, a.tport, a.host, a.tport)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    res["connect_status"], _ = parse_resp(buf)
    if res["connect_status"] != 200:
        out(res)
        return
    ctx = ssl.create_default_context(cafile=a.cafile)
    try:
        tls = ctx.wrap_socket(s, server_hostname=a.sni or a.host)
    except (OSError, ssl.SSLError) as e:
        res["handshake_error"] = repr(e)
        out(res)
        return
    # The upstream answers HTTP/1.1 keep-alive; two requests on one tunnel.
    res["first"] = http_get(tls, a.host, "/one")
    out({"ready": True, "first": res["first"]})
    deadline = time.monotonic() + 20
    while not os.path.exists(a.go) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        res["second"] = http_get(tls, a.host, "/two")
    except (OSError, EOFError, ssl.SSLError) as e:
        res["second_error"] = repr(e)
    out(res)


def peer_closed(socks):
    """The sockets (of `socks`) the peer has closed or reset. poll(), not
    select(): thousands of fds."""
    p = select.poll()
    by_fd = {}
    for s in socks:
        p.register(s, select.POLLIN | select.POLLRDHUP)
        by_fd[s.fileno()] = s
    dead = []
    for fd, ev in p.poll(0):
        s = by_fd[fd]
        try:
            if ev & (select.POLLHUP | select.POLLERR) or s.recv(1, socket.MSG_PEEK) == b"":
                dead.append(s)
        except OSError:
            dead.append(s)
    return dead


def cmd_hold(a):
    socks = []
    t0 = time.monotonic()
    for i in range(a.n):
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", a.port))
        except OSError as e:
            out({"error": "connect %d: %s" % (i, e), "opened": i})
            return
        socks.append(s)
    opened_s = round(time.monotonic() - t0, 3)
    # Which of them did the peer close at once?
    time.sleep(a.settle)
    dead = set(peer_closed(socks))
    alive = [s for s in socks if s not in dead]
    for s in dead:
        s.close()
    out({"opened": a.n, "closed_by_peer": len(dead), "open": len(alive), "secs": opened_s})
    for line in sys.stdin:
        w = line.split()
        if w and w[0] == "close":
            k = len(alive) if w[1] == "all" else int(w[1])
            for s in alive[:k]:
                s.close()
            alive = alive[k:]
            out({"open": len(alive)})
        elif w and w[0] == "use":
            # "use HOST:PORT PATH": CONNECT over the first held connection,
            # then a plain GET PATH through the tunnel.
            s = alive.pop(0)
            s.settimeout(5)
            res = {}
            try:
                s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (w[1], w[1])).encode())
                buf = b""
                while b"\r\n\r\n" not in buf:
                    d = s.recv(4096)
                    if not d:
                        break
                    buf += d
                res["connect_status"], _ = parse_resp(buf)
                if res["connect_status"] == 200:
                    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (w[2], w[1])).encode())
                    body, res["end"] = read_all(s, 5)
                    res["status"], _ = parse_resp(body)
            except OSError as e:
                res["error"] = repr(e)
            s.close()
            out(res)
        elif w and w[0] == "count":
            out({"open": len(alive), "closed_by_peer": len(peer_closed(alive))})
    for s in alive:
        s.close()


ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
p = sub.add_parser("raw")
p.add_argument("port", type=int)
p.add_argument("--data")
p.add_argument("--hex")
p.add_argument("--repeat", type=int, default=0, help="replace @@ by N bytes of A")
p.add_argument("--wait", type=float, default=5)
p.add_argument("--src")
p = sub.add_parser("tunnel")
p.add_argument("port", type=int)
p.add_argument("host")
p.add_argument("tport", type=int)
p.add_argument("--cafile", required=True)
p.add_argument("--go", required=True)
p.add_argument("--sni")
p = sub.add_parser("hold")
p.add_argument("port", type=int)
p.add_argument("n", type=int)
p.add_argument("--settle", type=float, default=0.5)
a = ap.parse_args()
{"raw": cmd_raw, "tunnel": cmd_tunnel, "hold": cmd_hold}[a.cmd](a)
