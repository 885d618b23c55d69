#!/usr/bin/env bash
# Hostile and broken peers on the proxy listener:
#  - a request head longer than max_header_bytes (4096) is 400
#    http_header_too_large; garbage is 400; a client that sends nothing (or
#    half a request line) gets 400 handshake_timeout after handshake_timeout
#    (1 s); the gateway keeps serving through all of it;
#  - an upstream that resets mid-response: the client's connection is
#    reset/closed, the connection is audited, the gateway lives;
#  - max_connections: with 50 allowed and 50 idle clients, the 51st
#    connection is closed at once; after 10 idle ones go, requests work;
#  - 5,000 idle connections (max_connections 100000): a request is still
#    served promptly, and once they close the gateway's fd count returns to
#    its baseline.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
need curl python3 jq
PXC="python3 $TOP/tests/lib/px_client.py"

upstream plain
PLAIN=$UP_PORT PLAIN_LOG=$UP_LOG
px_upstream rst --mode reset
RST=$PXU_PORT

# cfg FILE LIMITS - a config with these gateway.limits (flow mapping body)
cfg() {
	cat >"$1" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 2
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
  limits: { $2 }
audit: { path: $T/audit.jsonl }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: api, domains: [api.example.test], ports: [$PLAIN, $RST] }
default: deny
YAML
}
# served NAME - a normal request through the proxy answers 200 within 2 s
served() {
	local r
	r=$(curl -sS --max-time 2 -x "http://127.0.0.1:$PP" -o "$T/$1.body" -w '%{http_code}' \
		"http://api.example.test:$PLAIN/$1" 2>"$T/$1.err")
	[ "$r" = 200 ]
}
# raw NAME ARGS... - px_client raw to the proxy, JSON in $T/NAME.json
raw() { local n=$1; shift; $PXC raw "$PP" "$@" >"$T/$n.json"; cat "$T/$n.json"; }

PP=$(freeport)
cfg "$T/sg.yaml" "max_header_bytes: 4096, handshake_timeout: 1s"
sg_start "$T/sg.yaml"

# --- oversized heads ---------------------------------------------------------
out=$(raw big1 --data 'CONNECT @@.example.test:443 HTTP/1.1\r\n\r\n' --repeat 5000)
check "CONNECT line of 5000+ bytes: 400 http_header_too_large, closed ($out)" \
	jqe '.status == 400 and .reason == "http_header_too_large" and .end == "eof"' <<<"$out"
out=$(raw big2 --data 'CONNECT api.example.test:443 HTTP/1.1\r\nX-Long: @@\r\n\r\n' --repeat 5000)
check "header field pushing the head past 4096: 400 http_header_too_large ($out)" \
	jqe '.status == 400 and .reason == "http_header_too_large"' <<<"$out"
out=$(raw big3 --data 'GET http://api.example.test:'"$PLAIN"'/@@' --repeat 8000 --wait 4)
check "unterminated 8000-byte request line: 400 http_header_too_large at once ($out)" \
	jqe '.status == 400 and .reason == "http_header_too_large" and .elapsed < 0.9' <<<"$out"
check "head just under the limit is still served" \
	test "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$PP" -H "X-Pad: $(head -c 3500 /dev/zero | tr '\0' a)" "http://api.example.test:$PLAIN/under")" = 200
check "gateway serves after oversized heads" served after-big
check "audit: http_header_too_large recorded" audit_exists '.decision == "deny" and .reason == "http_header_too_large"'

# --- garbage -------------------------------------------------------------
out=$(raw g1 --hex "$(head -c 300 /dev/urandom | od -An -tx1 | tr -d ' \n')")
check "300 random bytes: 400 ($out)" jqe '.status == 400 and .end == "eof"' <<<"$out"
out=$(raw g2 --hex "16030100c8010000c40303")
check "a TLS ClientHello sent to the proxy port: 400 ($out)" jqe '.status == 400' <<<"$out"
out=$(raw g3 --data 'GET\r\n\r\n')
check "a request line without target/version: 400 ($out)" jqe '.status == 400' <<<"$out"
out=$(raw g4 --data 'CONNECT api.example.test HTTP/1.1\r\n\r\n')
check "CONNECT without a port: 400 ($out)" jqe '.status == 400' <<<"$out"
out=$(raw g5 --data 'GET http://api.example.test:'"$PLAIN"'/ HTTP/1.1\r\nHost: api.example.test:'"$PLAIN"'\r\nBad Header\r\n\r\n')
check "a header line without a colon: 400 ($out)" jqe '.status == 400' <<<"$out"
out=$(raw g6 --data 'GET http://api.example.test:'"$PLAIN"'/ HTTP/1.1\r\nHost: api.example.test:'"$PLAIN"'\r\nContent-Length: -1\r\n\r\n')
check "Content-Length: -1: 400 ($out)" jqe '.status == 400' <<<"$out"
check "nothing malformed reached the upstream" test "$(jq -s '[.[] | select(.path != "/under" and .path != "/after-big")] | length' "$PLAIN_LOG")" = 0
check "gateway serves after garbage" served after-garbage

# --- silent and stalled clients --------------------------------------------
out=$(raw s1 --wait 5)
check "silent client: 400 handshake_timeout after ~1 s, then closed ($out)" \
	jqe '.status == 400 and .reason == "handshake_timeout" and .end == "eof" and .elapsed >= 0.9 and .elapsed < 3' <<<"$out"
out=$(raw s2 --data 'CONNECT api.example.te' --wait 5)
check "half a request line then silence: 400 handshake_timeout after ~1 s ($out)" \
	jqe '.status == 400 and .reason == "handshake_timeout" and .elapsed >= 0.9 and .elapsed < 3' <<<"$out"
check "audit: handshake_timeout recorded" audit_exists '.decision == "deny" and .reason == "handshake_timeout"'
check "gateway serves after stalled clients" served after-silent

# --- upstream resets mid-response --------------------------------------------
n0=$(audit_count '.dst_port == '"$RST")
out=$(raw r1 --data "GET http://api.example.test:$RST/reset1 HTTP/1.1\\r\\nHost: api.example.test:$RST\\r\\n\\r\\n")
check "absolute-form, upstream RST mid-body: client sees 200 + partial body, then reset/close ($out)" \
	jqe '.status == 200 and (.end == "reset" or .end == "eof") and .bytes < 1048576' <<<"$out"
out=$(raw r2 --data "CONNECT api.example.test:$RST HTTP/1.1\\r\\n\\r\\nGET /reset2 HTTP/1.1\\r\\nHost: api.example.test:$RST\\r\\n\\r\\n")
check "CONNECT tunnel, upstream RST mid-body: client connection reset/closed ($out)" \
	jqe '.status == 200 and (.end == "reset" or .end == "eof") and .bytes < 1048576' <<<"$out"
curl -sS --max-time 5 -o /dev/null -x "http://127.0.0.1:$PP" "http://api.example.test:$RST/reset3" 2>"$T/r3.err"; rc=$?
check "curl through the proxy fails on the upstream reset (rc $rc: $(cat "$T/r3.err"))" \
	bash -c "[ $rc -eq 18 ] || [ $rc -eq 56 ] || [ $rc -eq 52 ]"
check "the resetting upstream got all three requests" test "$(lines "$T/rst.log")" = 3
check "audit: the reset request is recorded with the bytes that did flow" \
	audit_exists '.event == "request" and .path == "/reset1" and .decision == "allow" and .bytes_down > 0 and .bytes_down < 1048576'
check "audit: the reset tunnel's request is recorded" \
	audit_exists '.event == "request" and .path == "/reset2" and .dst_port == '"$RST"' and .decision == "allow" and .bytes_up > 0 and .bytes_down > 0'
check "audit: one record per reset connection ($(audit_count '.dst_port == '"$RST") - $n0)" \
	test "$(( $(audit_count '.dst_port == '"$RST") - n0 ))" = 3
check "gateway alive after upstream resets" sg_alive
check "gateway serves after upstream resets" served after-reset
sg_stop

# --- max_connections ---------------------------------------------------------
# hold_start N [SETTLE] - python holding N idle connections, driven through
# a fifo on fd 7; its JSON lines go to $T/hold.out
hold_start() {
	rm -f "$T/hold.in"; mkfifo "$T/hold.in"
	$PXC hold "$PP" "$1" --settle "${2:-0.5}" <"$T/hold.in" >"$T/hold.out" 2>"$T/hold.err" &
	HOLD_PID=$!
	PIDS+=($HOLD_PID)
	exec 7>"$T/hold.in"
}
# hold_line N - wait (30 s) for line N of the holder's output, print it
hold_line() {
	local i
	for i in $(seq 1 600); do
		[ "$(lines "$T/hold.out")" -ge "$1" ] && { sed -n "${1}p" "$T/hold.out"; return 0; }
		kill -0 $HOLD_PID 2>/dev/null || break
		sleep 0.05
	done
	echo "{\"error\": \"holder: $(tr -d '"\n' <"$T/hold.err" | tail -c 300)\"}"
}
hold_stop() { exec 7>&-; wait $HOLD_PID 2>/dev/null; }

PP=$(freeport)
cfg "$T/sg2.yaml" "max_connections: 50, handshake_timeout: 30s"
sg_start "$T/sg2.yaml"
hold_start 50
out=$(hold_line 1)
check "50 idle connections under max_connections 50 all stay open ($out)" \
	jqe '.opened == 50 and .closed_by_peer == 0' <<<"$out"
out=$(raw lim1 --wait 2)
check "the 51st connection is closed at once, without an answer ($out)" \
	jqe '(.end == "eof" or .end == "reset") and .bytes == 0 and .elapsed < 0.5' <<<"$out"
check "a real request at the limit is refused (curl fails)" not served at-limit
echo "count" >&7
out=$(hold_line 2)
check "the 50 held connections were not disturbed ($out)" jqe '.open == 50 and .closed_by_peer == 0' <<<"$out"
echo "use api.example.test:$PLAIN /held-tunnel" >&7
out=$(hold_line 3)
check "one of the 50 held connections, at the limit, can still CONNECT and fetch ($out)" \
	jqe '.connect_status == 200 and .status == 200' <<<"$out"
echo "close 10" >&7
out=$(hold_line 4)
sleep 0.3
check "after 10 idle connections close, a request is served" served below-limit
check "… and a CONNECT too" test "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -p -x "http://127.0.0.1:$PP" "http://api.example.test:$PLAIN/via-connect")" = 200
hold_stop
check "upstream saw below-limit, via-connect and held-tunnel but not at-limit" \
	jqe -s '[.[].path] | (index("/below-limit") != null and index("/via-connect") != null and index("/held-tunnel") != null and index("/at-limit") == null)' "$PLAIN_LOG"
sg_stop

# --- 5,000 idle connections ------------------------------------------------------
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge 12000 ] || skip "needs an open-file limit of 12000 (have $(ulimit -n))"
PP=$(freeport)
cfg "$T/sg3.yaml" "max_connections: 100000, handshake_timeout: 60s"
sg_start "$T/sg3.yaml"
served warm || soft_fail "request before the scale test"
sleep 0.2
base=$(ls /proc/$SG_PID/fd | wc -l)
hold_start 5000 1
out=$(hold_line 1)
check "5000 idle connections opened and held ($out)" jqe '.opened == 5000 and .closed_by_peer == 0' <<<"$out"
during=$(ls /proc/$SG_PID/fd | wc -l)
check "the gateway holds them (fds: baseline $base, now $during)" bash -c "[ $during -ge $((base + 5000)) ]"
t0=$(date +%s%N)
served during-5k; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "a request with 5000 idle connections open is served promptly (${ms} ms)" \
	bash -c "[ $rc -eq 0 ] && [ $ms -lt 1000 ]"
echo "close all" >&7
out=$(hold_line 2)
hold_stop
after=
for _ in $(seq 1 100); do
	after=$(ls /proc/$SG_PID/fd | wc -l)
	[ "$after" -le $((base + 4)) ] && break
	sleep 0.05
done
check "after closing them the gateway's fds return to baseline (baseline $base, after $after)" \
	bash -c "[ $after -le $((base + 4)) ]"
check "still serving after the scale test" served after-5k
check "gateway alive" sg_alive
sg_stop
px_done
