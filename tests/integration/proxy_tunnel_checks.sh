#!/usr/bin/env bash
# What runs inside a CONNECT tunnel allowed for a name must not name another
# host: a client that stays silent past handshake_timeout does not get an
# unchecked tunnel, and plain HTTP in the tunnel must carry the CONNECT host,
# in origin-form, one request per tunnel.
# The transparent listener takes plain HTTP in origin-form only (an
# absolute-form target would be routed by the origin, not by Host).
. "$(dirname "$0")/../lib/common.sh"
need curl openssl python3 jq
need_root

mkcerts api.example.test other.example.test
upstream api --cert api.example.test
TLSP=$UP_PORT TLS_LOG=$UP_LOG
upstream plain
PLAIN=$UP_PORT PLAIN_LOG=$UP_LOG
PP=$(freeport) TP=$(freeport)
netns_make tun
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP", transparent: "[::]:$TP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
      other.example.test: [127.0.0.1]
  limits: { handshake_timeout: 1s }
audit: { path: $T/audit.jsonl }
sandboxes:
  local:
    sources: [127.0.0.0/8, $NS_NET4]
    allow:
      - { name: api, domains: [api.example.test], ports: [$TLSP, $PLAIN] }
default: deny
YAML
sg_start "$T/sg.yaml"
nft_redirect "$TP"

# tunnel DELAY SNI PORT MODE: CONNECT api.example.test:PORT, wait, then speak
tunnel() {
	python3 - "$PP" "$3" "$1" "$2" "$4" <<'PY'
import socket, ssl, sys, time
pp, port, delay, sni, mode = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
s = socket.create_connection(("127.0.0.1", pp), timeout=5)
s.sendall(("CONNECT api.example.test:%s HTTP/1.1\r\nHost: api.example.test:%s\r\n\r\n" % (port, port)).encode())
head = s.recv(4096)
assert head.startswith(b"HTTP/1.1 200"), head
time.sleep(delay)
try:
    if mode == "tls":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s = ctx.wrap_socket(s, server_hostname=sni)
    s.sendall(("GET /t HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sni).encode())
    data = s.recv(4096)
    # "got": the upstream answered; otherwise sandgate's refusal (its
    # status line and X-Sandgate-Reason) or "closed"
    if data.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200")):
        print("got")
    elif data:
        reason = [l for l in data.split(b"\r\n") if l.startswith(b"X-Sandgate-Reason:")]
        print(data.split(b"\r\n")[0].decode(), *(r.decode() for r in reason))
    else:
        print("closed")
except Exception as e:
    print("refused")
PY
}
n0=$(wc -l <"$TLS_LOG")
[ "$(tunnel 0 api.example.test "$TLSP" tls)" = got ] || fail "an allowed tunnel did not work"
[ "$(tunnel 1.5 other.example.test "$TLSP" tls)" != got ] || fail "a late ClientHello for another host got through"
[ "$(tunnel 1.5 api.example.test "$TLSP" tls)" != got ] || fail "a silent tunnel was relayed unchecked"
[ "$(wc -l <"$TLS_LOG")" -eq $((n0 + 1)) ] || fail "upstream saw: $(cat "$TLS_LOG")"
audit_has "$T/audit.jsonl" '.event == "connection" and .decision == "deny" and .reason == "handshake_timeout" and .dst_host == "api.example.test"'
ok "a tunnel silent past handshake_timeout is closed, not relayed unchecked"

m0=$(wc -l <"$PLAIN_LOG")
[ "$(tunnel 0 api.example.test "$PLAIN" plain)" = got ] || fail "plain HTTP with the right Host refused"
r=$(tunnel 0 other.example.test "$PLAIN" plain)
[ "$r" = "HTTP/1.1 403 Forbidden X-Sandgate-Reason: host_mismatch" ] ||
	fail "plain HTTP naming another Host: $r"
[ "$(wc -l <"$PLAIN_LOG")" -eq $((m0 + 1)) ] || fail "upstream saw: $(cat "$PLAIN_LOG")"
audit_has "$T/audit.jsonl" '.reason == "host_mismatch" and .dst_host == "api.example.test" and .event == "request" and .method == "GET"'
audit_has "$T/audit.jsonl" '.event == "request" and .decision == "allow" and .tls == "none" and .method == "GET" and .path == "/t" and .status == 200'
ok "plain HTTP in a tunnel must carry the CONNECT host"

# Plain HTTP in a tunnel is one request per tunnel, as through the transparent
# listener: a second request (pipelined, or after the first answer) could name
# another host sharing the address and would never be looked at. An
# absolute-form target is routed by its URI, not by Host: refused.
# tunnel_raw PORT PAUSE DATA...: CONNECT, then send each DATA (PAUSE s
# apart), print the status lines that came back, "sandgate" if one of them
# was sandgate's refusal, then "bytes=N" (all bytes that came back after the
# 200: 0 when the tunnel was closed unanswered)
tunnel_raw() {
	python3 - "$PP" "$@" <<'PY'
import re, socket, sys, time
pp, port, pause, parts = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4:]
s = socket.create_connection(("127.0.0.1", pp), timeout=5)
s.sendall(("CONNECT api.example.test:%s HTTP/1.1\r\nHost: api.example.test:%s\r\n\r\n" % (port, port)).encode())
head = s.recv(4096)
assert head.startswith(b"HTTP/1.1 200"), head
got = b""
for i, p in enumerate(parts):
    if i:
        time.sleep(pause)
    try:
        s.sendall(p.encode().decode("unicode_escape").encode())
    except OSError:
        break
    if pause:
        time.sleep(0.3)
        s.settimeout(2)
        try:
            got += s.recv(65536)
        except socket.timeout:
            pass
        s.settimeout(5)
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
except OSError:
    pass
for status in re.findall(rb"HTTP/1\.[01] [0-9]{3}", got):
    print(status.decode())
if b"\r\nX-Sandgate-Reason: " in got:
    print("sandgate")
print("bytes=%d" % len(got))
PY
}
# refused STATUS WHAT: $r is sandgate's refusal alone (one status line, with
# X-Sandgate-Reason), nothing from the upstream
refused() {
	[ "$(head -n 1 <<<"$r")" = "HTTP/1.1 $1" ] && [ "$(grep -c '^HTTP/' <<<"$r")" = 1 ] &&
		grep -qx sandgate <<<"$r" || fail "$2: $r"
}
m0=$(wc -l <"$PLAIN_LOG")
one='GET /one HTTP/1.1\r\nHost: api.example.test\r\n\r\n'
two='GET /two HTTP/1.1\r\nHost: other.example.test\r\n\r\n'
r=$(tunnel_raw "$PLAIN" 0 "$one$two")
[ "$(grep -c '^HTTP/1.. 200' <<<"$r")" = 1 ] || fail "pipelined requests in a tunnel: $r"
r=$(tunnel_raw "$PLAIN" 0.5 "$one" "$two")
[ "$(grep -c '^HTTP/1.. 200' <<<"$r")" = 1 ] || fail "a second request in a tunnel: $r"
r=$(tunnel_raw "$PLAIN" 0 'GET http://evil.example.org/steal HTTP/1.1\r\nHost: api.example.test\r\n\r\n')
refused 403 "absolute-form in a tunnel"
audit_has "$T/audit.jsonl" '.event == "request" and .reason == "http_bad_request" and .method == "GET" and .path == null and .dst_host == "api.example.test"'
ok "plain HTTP in a tunnel: one origin-form request per tunnel"

# What a lenient origin would still take as HTTP is judged as HTTP: empty
# lines before the request line are skipped (RFC 9112 2.2) and the request
# behind them checked; a request line this parser refuses but that names an
# HTTP version (a duplicate Host, a tab, the HTTP/2 preface) is refused with
# whatever follows it. Binary data and text without an HTTP version are
# another protocol and relayed.
r=$(tunnel_raw "$PLAIN" 0 '\r\n\r\nGET /lead HTTP/1.1\r\nHost: other.example.test\r\n\r\n')
refused 403 "leading empty lines, another Host"
audit_has "$T/audit.jsonl" '.reason == "host_mismatch" and .path == "/lead"'
r=$(tunnel_raw "$PLAIN" 0 '\r\nGET /lead-ok HTTP/1.1\r\nHost: api.example.test\r\n\r\n')
[ "$(grep -c '^HTTP/1.. 200' <<<"$r")" = 1 ] || fail "leading empty line, the right Host: $r"
r=$(tunnel_raw "$PLAIN" 0 "GET /dup HTTP/1.1\\r\\nHost: api.example.test\\r\\nHost: other.example.test\\r\\n\\r\\n$two")
refused 400 "a duplicate Host"
r=$(tunnel_raw "$PLAIN" 0 'GET\t/tab HTTP/1.1\r\nHost: other.example.test\r\n\r\n')
refused 400 "a tab after the method"
r=$(tunnel_raw "$PLAIN" 0 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')
refused 400 "the HTTP/2 preface"
r=$(tunnel_raw "$PLAIN" 0 'HELLO there\r\n\r\n')
[ "$r" != bytes=0 ] && ! grep -qx sandgate <<<"$r" ||
	fail "a text line without an HTTP version was not relayed: $r"
r=$(tunnel_raw "$PLAIN" 0 '\x00\x01\x02binary\r\n\r\n')
[ "$r" != bytes=0 ] && ! grep -qx sandgate <<<"$r" ||
	fail "binary data was not relayed: $r"
jq -r .path "$PLAIN_LOG" | tail -n +$((m0 + 1)) >"$T/paths"
[ "$(cat "$T/paths")" = "$(printf '/one\n/one\n/lead-ok')" ] || fail "upstream saw: $(tr '\n' ' ' <"$T/paths")"
n=$(jq -c 'select(.event == "request" and .reason == "http_bad_request" and .method == null and .dst_host == "api.example.test")' "$T/audit.jsonl" | wc -l)
[ "$n" -ge 3 ] || fail "refusals not audited: $(jq -c 'select(.reason == "http_bad_request")' "$T/audit.jsonl")"
ok "plain HTTP in a tunnel: what a lenient origin would take as HTTP is judged or refused"

# transparent: absolute-form and CONNECT targets are refused, origin-form works
send_raw() {
	ip netns exec "$NS" python3 - 203.0.113.7 "$PLAIN" "$1" <<'PY'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(sys.argv[3].encode().decode("unicode_escape").encode())
print((s.recv(4096).split(b"\r\n")[0] or b"closed").decode())
PY
}
m0=$(wc -l <"$PLAIN_LOG")
r=$(send_raw "GET /ok HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
[ "$r" = "HTTP/1.0 200 OK" ] || [ "$r" = "HTTP/1.1 200 OK" ] || fail "origin-form: $r"
r=$(send_raw "GET http://evil.example.org/steal HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
[ "$r" = "HTTP/1.1 403 Forbidden" ] || fail "absolute-form: $r"
r=$(send_raw "CONNECT evil.example.org:443 HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
[ "$r" = "HTTP/1.1 403 Forbidden" ] || fail "CONNECT: $r"
[ "$(wc -l <"$PLAIN_LOG")" -eq $((m0 + 1)) ] || fail "upstream saw: $(tail -n 2 "$PLAIN_LOG")"
audit_has "$T/audit.jsonl" '.event == "request" and .reason == "http_bad_request" and .method == "GET" and .path == null'
ok "transparent HTTP: origin-form only"
sg_stop
