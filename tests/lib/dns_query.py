#!/usr/bin/env python3
"""A small DNS client for the DNS responder's tests (stdlib only).

  dns_query.py query HOST PORT NAME TYPE [--tcp] [--src IP]
      one query; prints "RCODE flags=... an=N" and one answer per line
  dns_query.py malformed HOST PORT
      the malformed shapes over UDP and TCP; prints "case: RCODE|drop|closed"
  dns_query.py burst HOST PORT SUFFIX N
      N queries for random labels under SUFFIX, many in flight; prints JSON
      counts by rcode and the names that were answered NOERROR
"""
import json
import os
import random
import select
import socket
import string
import struct
import sys
import time

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
TYPES = {"A": 1, "NS": 2, "CNAME": 5, "TXT": 16, "AAAA": 28, "SVCB": 64, "HTTPS": 65, "ANY": 255}


def wire_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            b = label.encode("latin-1")
            out += bytes([len(b)]) + b
    return out + b"\0"


def header(qid, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack(">HHHHHH", qid, flags, qd, an, ns, ar)


def query(qid, name, qtype, edns=None):
    q = header(qid, ar=1 if edns is not None else 0) + wire_name(name) + struct.pack(">HH", qtype, 1)
    if edns is not None:
        size, version = edns
        q += b"\0" + struct.pack(">HHIH", 41, size, version << 16, 0)
    return q


def skip_name(m, o):
    while True:
        n = m[o]
        if n & 0xC0 == 0xC0:
            return o + 2
        if n == 0:
            return o + 1
        o += 1 + n


def parse_response(m):
    """(rcode name, flags, answers, ext rcode) of a response."""
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", m[:12])
    o = 12
    for _ in range(qd):
        o = skip_name(m, o) + 4
    answers = []
    ext = 0
    for i in range(an + ns + ar):
        o = skip_name(m, o)
        t, c, ttl, rdlen = struct.unpack(">HHIH", m[o:o + 10])
        o += 10
        rd = m[o:o + rdlen]
        o += rdlen
        if i < an:
            if t == 1:
                answers.append("A %s %d" % (socket.inet_ntop(socket.AF_INET, rd), ttl))
            elif t == 28:
                answers.append("AAAA %s %d" % (socket.inet_ntop(socket.AF_INET6, rd), ttl))
            else:
                answers.append("TYPE%d" % t)
        elif t == 41:
            ext = ttl >> 24
    rc = (ext << 4) | (flags & 0xF)
    name = "BADVERS" if rc == 16 else RCODES.get(rc, "RCODE%d" % rc)
    fl = []
    for bit, f in ((0x8000, "qr"), (0x0400, "aa"), (0x0200, "tc"), (0x0100, "rd"), (0x0080, "ra")):
        if flags & bit:
            fl.append(f)
    return name, fl, answers, qid


def udp_exchange(host, port, msg, timeout=1.0, src=None):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if src:
        s.bind((src, 0))
    s.settimeout(timeout)
    s.sendto(msg, (host, port))
    try:
        return s.recvfrom(65535)[0]
    except socket.timeout:
        return None
    finally:
        s.close()


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def tcp_exchange(host, port, frames, n_answers, timeout=3.0):
    """Send raw bytes, read n_answers length-prefixed answers; None each on close."""
    s = socket.create_connection((host, port), timeout=timeout)
    s.sendall(frames)
    out = []
    try:
        for _ in range(n_answers):
            h = recv_exact(s, 2)
            if h is None:
                out.append(None)
                break
            out.append(recv_exact(s, struct.unpack(">H", h)[0]))
    except (socket.timeout, ConnectionResetError):
        out.append(None)
    s.close()
    return out


def cmd_query(args):
    host, port, name, qtype = args[0], int(args[1]), args[2], TYPES.get(args[3], None)
    if qtype is None:
        qtype = int(args[3])
    tcp = "--tcp" in args
    src = args[args.index("--src") + 1] if "--src" in args else None
    msg = query(random.randrange(65536), name, qtype)
    if tcp:
        r = tcp_exchange(host, port, struct.pack(">H", len(msg)) + msg, 1)[0]
    else:
        r = udp_exchange(host, port, msg, 3.0, src)
    if r is None:
        print("none")
        return 0
    rc, fl, answers, _ = parse_response(r)
    print("%s flags=%s an=%d" % (rc, ",".join(fl), len(answers)))
    for a in answers:
        print(a)
    return 0


def malformed_cases():
    ok_q = query(1, "api.example.test", 1)
    big = bytearray(query(2, "api.example.test", 1)) + b"\0" * 5000
    c = {
        "empty": b"",
        "short5": b"\x12\x34\x01\x00\x00",
        "header_only": header(3),
        "truncated_name": header(4) + b"\x03api\x07exam",
        "pointer_loop": header(5) + b"\xc0\x0c" + struct.pack(">HH", 1, 1),
        "pointer_loop_record": header(6, an=1) + wire_name("a.test") + struct.pack(">HH", 1, 1)
        + b"\x01x\xc0\x1a" + struct.pack(">HHIH", 1, 1, 0, 0),
        "label_64": header(7) + b"\x40" + b"a" * 64 + b"\0" + struct.pack(">HH", 1, 1),
        "name_260": header(8) + (b"\x33" + b"a" * 51) * 5 + b"\0" + struct.pack(">HH", 1, 1),
        "response_qr": header(9, flags=0x8180) + ok_q[12:],
        "qdcount0": header(10, qd=0),
        "qdcount2": header(11, qd=2) + ok_q[12:] + ok_q[12:],
        "opcode_update": header(12, flags=0x2800) + ok_q[12:],
        "bad_name": header(13) + b"\x09bad name!\x07example\x04test\x00" + struct.pack(">HH", 1, 1),
        "dot_in_label": header(14) + b"\x03a.b\x04test\x00" + struct.pack(">HH", 1, 1),
        "numeric_tld": header(15) + wire_name("1.2.3.4") + struct.pack(">HH", 1, 1),
        "edns_v1": query(16, "api.example.test", 1, edns=(1232, 1)),
        "class_chaos": header(17) + wire_name("version.bind") + struct.pack(">HH", 16, 3),
        "oversized_5k": bytes(big),
        "two_opt": header(18, ar=2) + ok_q[12:] + (b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)) * 2,
    }
    return c


def cmd_malformed(args):
    host, port = args[0], int(args[1])
    for name, msg in malformed_cases().items():
        r = udp_exchange(host, port, msg, 0.5)
        print("udp %s: %s" % (name, "drop" if r is None else parse_response(r)[0]))
    rnd = random.Random(5)
    answered = 0
    for i in range(300):
        n = rnd.randrange(0, 80)
        m = bytearray(rnd.getrandbits(8) for _ in range(n))
        if n > 2:
            m[2] &= 0x7F            # a query, mostly
        if n > 5 and rnd.random() < 0.7:
            m[4:6] = b"\0\1"
        r = udp_exchange(host, port, bytes(m), 0.05)
        answered += r is not None
    print("udp random: %d answered" % answered)
    ok_q = query(20, "api.example.test", 1)
    frame = struct.pack(">H", len(ok_q)) + ok_q
    tests = {
        "zero_length": (b"\0\0", 1),
        "over_qmax": (struct.pack(">H", 10000) + b"x" * 100, 1),
        "pipelined3": (frame + struct.pack(">H", len(ok_q)) + ok_q[:1] + b"\x15" + ok_q[2:] + frame, 3),
        "loop_framed": (struct.pack(">H", 18) + malformed_cases()["pointer_loop"], 1),
        "half_frame": (frame[:10], 1),
    }
    for name, (raw, n) in tests.items():
        res = tcp_exchange(host, port, raw, n, 1.5)
        shown = ["closed" if r is None else "%s#%d" % (parse_response(r)[0], parse_response(r)[3])
                 for r in res]
        print("tcp %s: %s" % (name, " ".join(shown)))
    return 0


def cmd_burst(args):
    host, port, suffix, n = args[0], int(args[1]), args[2], int(args[3])
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks = [socket.socket(fam, socket.SOCK_DGRAM) for _ in range(8)]
    for s in socks:
        s.setblocking(False)
    rnd = random.Random(os.getpid())
    names = {}
    pending = {}
    counts = {}
    ok_names = []
    sent = 0
    deadline = time.time() + 20
    while (sent < n or pending) and time.time() < deadline:
        while sent < n and len(pending) < 64:
            qid = sent
            label = "".join(rnd.choice(string.ascii_lowercase + string.digits) for _ in range(20))
            name = "%s.%s" % (label, suffix)
            s = socks[sent % len(socks)]
            s.sendto(query(qid, name, 1), (host, port))
            pending[qid] = time.time()
            names[qid] = name
            sent += 1
        r, _, _ = select.select(socks, [], [], 0.2)
        for s in r:
            while True:
                try:
                    m = s.recv(4096)
                except BlockingIOError:
                    break
                rc, _, _, qid = parse_response(m)
                if qid in pending:
                    del pending[qid]
                    counts[rc] = counts.get(rc, 0) + 1
                    if rc == "NOERROR":
                        ok_names.append(names[qid])
        now = time.time()
        for qid in [q for q, t in pending.items() if now - t > 3]:
            del pending[qid]
            counts["timeout"] = counts.get("timeout", 0) + 1
    print(json.dumps({"counts": counts, "ok_names": ok_names, "sent": sent}))
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    return {"query": cmd_query, "malformed": cmd_malformed, "burst": cmd_burst}[cmd](args)


if __name__ == "__main__":
    sys.exit(main())
