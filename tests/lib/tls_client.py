#!/usr/bin/env python3
"""A TLS client for tests that controls how its first flight hits the wire.

  tls_client.py get HOST PORT [--sni NAME | --no-sni] --cafile CA [--path P]
                [--split none|bytes|records] [--record-size N] [--delay S]
      Python ssl over ssl.MemoryBIO/SSLObject, so this script owns the TCP
      socket (TCP_NODELAY). The first flight (the ClientHello) is sent
      - none:    as OpenSSL wrote it;
      - bytes:   one byte per send(), --delay seconds apart (one TCP segment
                 each);
      - records: its handshake bytes re-packed into TLS records of
                 --record-size bytes (legal TLS: a handshake message may span
                 records).
      Then the handshake completes normally (certificate verified against
      CA, host name checked when there is an SNI), one HTTP/1.1 GET is sent
      and the response body is printed on stdout. Exit 0 on a 200, 1 on
      anything else (why on stderr).

  tls_client.py raw HOST PORT KIND [--sni NAME] [--wait S]
      Sends hand-made bytes, then waits (up to --wait seconds) for the peer
      to close. KIND: ech (a ClientHello with SNI and an extension 0xfe0d),
      plain-hello (the same without ECH: control case), garbage (neither TLS
      nor HTTP), truncated (the first 60 bytes of a ClientHello, then
      silence), oversized (a ClientHello whose handshake length is 17 KiB,
      sent whole over two records), silent (nothing). Prints one JSON line:
      {"kind", "closed": bool, "elapsed": seconds until EOF/RST,
       "received": bytes the peer sent, "local": the client's port}.
      get prints "local port N" on stderr (to find its audit record).

  tls_client.py hello [--sni NAME]
      Prints the hand-made ClientHello record (the one raw sends) in hex.
"""
import argparse, json, os, socket, ssl, struct, sys, time


def connect(host, port, timeout):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


# ------------------------------------------------------------------ get


def split_records(flight, size):
    """Re-pack the handshake records of a flight into records of SIZE bytes."""
    out, hs, pos, ver = [], b"", 0, b"\x03\x01"
    while pos + 5 <= len(flight):
        typ, ver_, n = flight[pos], flight[pos + 1:pos + 3], struct.unpack(">H", flight[pos + 3:pos + 5])[0]
        body = flight[pos + 5:pos + 5 + n]
        pos += 5 + n
        if typ != 22:
            out.append(bytes([typ]) + ver_ + struct.pack(">H", n) + body)
            continue
        hs += body
        ver = ver_
    if pos != len(flight):
        raise SystemExit("first flight is not whole TLS records")
    recs = [b"\x16" + ver + struct.pack(">H", len(hs[i:i + size])) + hs[i:i + size]
            for i in range(0, len(hs), size)]
    return b"".join(recs + out), len(recs)


def cmd_get(a):
    ctx = ssl.create_default_context(cafile=a.cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if a.no_sni:
        ctx.check_hostname = False      # still verifies the chain
    ctx.set_alpn_protocols(["http/1.1"])
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, outg, server_side=False,
                       server_hostname=None if a.no_sni else a.sni)
    s = connect(a.host, a.port, a.timeout)
    print("local port %d" % s.getsockname()[1], file=sys.stderr, flush=True)

    def flush():
        data = outg.read()
        if data:
            s.sendall(data)

    def fill():
        data = s.recv(65536)
        if not data:
            inc.write_eof()
            raise ConnectionError("peer closed during the handshake")
        inc.write(data)

    # First flight.
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    flight = outg.read()
    if a.split == "bytes":
        for i in range(len(flight)):
            s.send(flight[i:i + 1])
            time.sleep(a.delay)
        print("sent %d hello bytes one per segment" % len(flight), file=sys.stderr)
    elif a.split == "records":
        packed, n = split_records(flight, a.record_size)
        s.sendall(packed)
        print("sent %d hello bytes as %d records" % (len(flight), n), file=sys.stderr)
    else:
        s.sendall(flight)
    # The rest of the handshake, normally.
    while True:
        try:
            tls.do_handshake()
            flush()
            break
        except ssl.SSLWantReadError:
            flush()
            fill()
    host = a.host_header or "%s:%d" % (a.sni or a.host, a.port)
    req = "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (a.path, host)
    tls.write(req.encode())
    flush()
    resp = b""
    while True:
        try:
            chunk = tls.read(65536)
            if not chunk:
                break
            resp += chunk
        except ssl.SSLWantReadError:
            flush()
            data = s.recv(65536)
            if not data:
                break           # unclean EOF: fine once the body is in
            inc.write(data)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
    s.close()
    head, _, body = resp.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    sys.stdout.write(body.decode(errors="replace"))
    if " 200 " not in status + " ":
        print("status: %r" % status, file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------ raw


def ext(typ, data):
    return struct.pack(">HH", typ, len(data)) + data


def client_hello(sni=None, extra=(), pad_to=None):
    """A TLS 1.3 ClientHello handshake message (without record header)."""
    exts = b""
    if sni:
        name = sni.encode()
        entry = b"\x00" + struct.pack(">H", len(name)) + name
        exts += ext(0, struct.pack(">H", len(entry)) + entry)
    exts += ext(10, struct.pack(">H", 4) + b"\x00\x1d\x00\x17")            # groups
    exts += ext(13, struct.pack(">H", 6) + b"\x04\x03\x08\x04\x04\x01")    # sig algs
    exts += ext(43, b"\x02\x03\x04")                                      # versions
    exts += ext(51, struct.pack(">HHH", 36, 0x1d, 32) + os.urandom(32))   # key share
    alpn = b"\x08http/1.1"
    exts += ext(16, struct.pack(">H", len(alpn)) + alpn)
    for t, d in extra:
        exts += ext(t, d)
    body = (b"\x03\x03" + os.urandom(32) + b"\x20" + os.urandom(32) +
            b"\x00\x06\x13\x01\x13\x02\x13\x03" + b"\x01\x00")
    if pad_to:
        # padding extension (21) so that the whole message is pad_to bytes
        fixed = 4 + len(body) + 2 + len(exts) + 4
        exts += ext(21, b"\x00" * (pad_to - fixed))
    body += struct.pack(">H", len(exts)) + exts
    return b"\x01" + struct.pack(">I", len(body))[1:] + body


def records(hs, size=16384):
    return b"".join(b"\x16\x03\x01" + struct.pack(">H", len(hs[i:i + size])) + hs[i:i + size]
                    for i in range(0, len(hs), size))


def cmd_raw(a):
    sni = a.sni or "api.example.test"
    if a.kind == "ech":
        # ECH outer extension: type outer(0), HPKE suite, config id, enc, payload
        ech = (b"\x00" + b"\x00\x01\x00\x01" + b"\x2a" + struct.pack(">H", 32) + os.urandom(32) +
               struct.pack(">H", 128) + os.urandom(128))
        data = records(client_hello(sni, extra=[(0xfe0d, ech)]))
    elif a.kind == "plain-hello":
        data = records(client_hello(sni))
    elif a.kind == "garbage":
        data = b"\x00\x9c\xfe\x07 not tls, not http \xff\xee\r\n\r\n" + os.urandom(64)
    elif a.kind == "truncated":
        data = records(client_hello(sni))[:60]
    elif a.kind == "oversized":
        data = records(client_hello(sni, pad_to=17 * 1024))
    elif a.kind == "silent":
        data = b""
    else:
        raise SystemExit("unknown kind " + a.kind)
    s = connect(a.host, a.port, a.wait)
    local = s.getsockname()[1]
    t0 = time.monotonic()
    sent = 0
    try:
        if data:
            s.sendall(data)
        sent = len(data)
    except OSError:
        pass
    received, closed = 0, False
    s.settimeout(0.05)
    while time.monotonic() - t0 < a.wait:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        received += len(chunk)
    elapsed = time.monotonic() - t0
    s.close()
    print(json.dumps({"kind": a.kind, "local": local, "sent": sent, "closed": closed,
                      "elapsed": round(elapsed, 3), "received": received}))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("get")
    g.add_argument("host")
    g.add_argument("port", type=int)
    g.add_argument("--sni")
    g.add_argument("--no-sni", action="store_true")
    g.add_argument("--cafile", required=True)
    g.add_argument("--path", default="/")
    g.add_argument("--host-header")
    g.add_argument("--split", choices=["none", "bytes", "records"], default="none")
    g.add_argument("--record-size", type=int, default=50)
    g.add_argument("--delay", type=float, default=0.002)
    g.add_argument("--timeout", type=float, default=10)
    r = sub.add_parser("raw")
    r.add_argument("host")
    r.add_argument("port", type=int)
    r.add_argument("kind")
    r.add_argument("--sni")
    r.add_argument("--wait", type=float, default=5)
    h = sub.add_parser("hello")
    h.add_argument("--sni")
    a = ap.parse_args()
    if a.cmd == "hello":
        print(records(client_hello(a.sni)).hex())
        return 0
    if a.cmd == "get" and not a.no_sni and not a.sni:
        ap.error("get: --sni NAME or --no-sni")
    try:
        return cmd_get(a) if a.cmd == "get" else cmd_raw(a)
    except (OSError, ssl.SSLError, ConnectionError) as e:
        print("error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
