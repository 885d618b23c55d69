#!/usr/bin/env bash
# The gateway's own resolver (c-ares) against a local dnsmasq:
#  - a name allowed by a domain rule that resolves to 127.0.0.1 is denied
#    internal_address (DNS rebinding guard); the query is in dnsmasq's log;
#  - the same name with a cidrs rule for 127.0.0.0/8 reaches the upstream;
#  - a name the policy can only deny is never queried (no leak);
#  - static resolver.hosts answers never go to DNS;
#  - NXDOMAIN is 502 resolve_nxdomain;
#  - a server that never answers gives 504 resolve_timeout after about
#    resolver.timeout, and the gateway serves other requests meanwhile.
# Only 127.0.0.0/8 is used: no name resolves anywhere else.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
need curl python3 jq dnsmasq

upstream plain
PLAIN=$UP_PORT PLAIN_LOG=$UP_LOG
DNSLOG=$T/dnsmasq.log
# dnsmasq binds UDP and TCP on its port: pick one free for both, and try
# another if someone takes it first.
udp_tcp_port() {
	python3 -c 'import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0)); p = u.getsockname()[1]
t = socket.socket(); t.bind(("127.0.0.1", p)); print(p)' 2>/dev/null
}
for attempt in 1 2 3 4 5; do
	DP=$(udp_tcp_port) || continue
	: >"$DNSLOG"
	bg dnsmasq dnsmasq --no-daemon --no-resolv --no-hosts --port="$DP" --listen-address=127.0.0.1 \
		--bind-interfaces --log-queries --log-facility="$DNSLOG" --cache-size=0 \
		--address=/rebind.example.test/127.0.0.1 \
		--address=/rebind2.example.test/127.0.0.1 \
		--address=/nx.example.test/ \
		--address=/v6.example.test/::1 \
		--address=/mapped.example.test/::ffff:127.0.0.1 \
		--address=/zero.example.test/0.0.0.0
	DNS_PID=$LAST_PID
	for _ in $(seq 1 100); do
		grep -q "started" "$DNSLOG" 2>/dev/null && break
		kill -0 $DNS_PID 2>/dev/null || break
		sleep 0.05
	done
	grep -q "started" "$DNSLOG" 2>/dev/null && kill -0 $DNS_PID 2>/dev/null && break
	DP=
done
[ -n "$DP" ] || fail "dnsmasq did not start: $(cat "$T/dnsmasq.err")"
# dnsmasq answers for itself (sanity: the log records a query we make)
python3 - "$DP" <<'PY' || fail "dnsmasq does not answer"
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x05probe\x07example\x04test\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(q, ("127.0.0.1", int(sys.argv[1]))); s.recvfrom(512)
PY
grep -q "query\[A\] probe.example.test" "$DNSLOG" || fail "dnsmasq log does not record queries"
queried() { grep -q "query\[[A-Z]*\] $1 " "$DNSLOG"; }

PP=$(freeport)
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 1
  resolver:
    servers: ["127.0.0.1:$DP"]
    hosts:
      static.example.test: [127.0.0.1]
    timeout: 3s
audit: { path: $T/audit.jsonl }
sandboxes:
  guarded:
    sources: [127.0.0.1/32]
    allow:
      - { name: names, domains: [rebind.example.test, nx.example.test, static.example.test, portonly.example.test,
          v6.example.test, mapped.example.test, zero.example.test], ports: [$PLAIN] }
  unlocked:
    sources: [127.0.0.2/32]
    allow:
      - { name: names2, domains: [rebind2.example.test], ports: [$PLAIN] }
      - { name: loopback, cidrs: [127.0.0.0/8] }
default: deny
YAML
sg_start "$T/sg.yaml"

# --- rebinding guard --------------------------------------------------------
r=$(pcurl rb "http://rebind.example.test:$PLAIN/rebind")
check "name allowed by a domain rule resolving to 127.0.0.1 is 403 (got $r)" test "$r" = "403 0"
check "… with X-Sandgate-Reason: internal_address (got '$(hdr rb X-Sandgate-Reason)')" \
	test "$(hdr rb X-Sandgate-Reason)" = internal_address
check "dnsmasq was asked for rebind.example.test" queried rebind.example.test
check "the upstream never saw /rebind" absent '"/rebind"' "$PLAIN_LOG"
check "audit: deny internal_address with the resolved address" \
	audit_exists '.event == "request" and .decision == "deny" and .reason == "internal_address" and .dst_host == "rebind.example.test"'

r=$(pcurl rb2 --interface 127.0.0.2 "http://rebind2.example.test:$PLAIN/rebind2")
check "the same with a cidrs: [127.0.0.0/8] allow rule reaches the upstream (got $r)" test "$r" = "200 0"
check "dnsmasq was asked for rebind2.example.test" queried rebind2.example.test
check "the upstream saw /rebind2" jqe -s '[.[].path] | index("/rebind2") != null' "$PLAIN_LOG"
check "audit: allow for rebind2.example.test at 127.0.0.1" \
	audit_exists '.event == "request" and .decision == "allow" and .dst_host == "rebind2.example.test" and .dst_ip == "127.0.0.1" and .sandbox == "unlocked"'

for n in v6 mapped zero; do
	r=$(pcurl "g$n" "http://$n.example.test:$PLAIN/guard-$n")
	check "$n.example.test (::1, ::ffff:127.0.0.1, 0.0.0.0) is 403 internal_address (got $r, '$(hdr "g$n" X-Sandgate-Reason)')" \
		test "$r $(hdr "g$n" X-Sandgate-Reason)" = "403 0 internal_address"
done
check "the upstream never saw the guarded names" absent guard- "$PLAIN_LOG"

# --- no leak: names that can only be denied are never sent to DNS -----------
pcurl lk1 "http://leak-denied.example.test:$PLAIN/leak" >/dev/null
pcurl lk2 --cacert /dev/null "https://leak-connect.example.test:443/" >/dev/null
pcurl lk3 "http://portonly.example.test:9/wrong-port" >/dev/null
pcurl lk4 --interface 127.0.0.3 "http://leak-unknown-src.example.test:$PLAIN/x" >/dev/null
check "denied absolute-form name: 403 default_deny" test "$(hdr lk1 X-Sandgate-Reason)" = default_deny
check "denied CONNECT name: refused with 403" grep -q "response 403" "$T/lk2.err"
check "allowed name on a port no rule allows: 403 (got '$(hdr lk3 X-Sandgate-Reason)')" \
	test "$(hdr lk3 X-Sandgate-Reason)" = default_deny
check "unknown source: 403 unknown_source" test "$(hdr lk4 X-Sandgate-Reason)" = unknown_source
sleep 0.3
check "dnsmasq never saw leak-denied.example.test" absent leak-denied "$DNSLOG"
check "dnsmasq never saw leak-connect.example.test" absent leak-connect "$DNSLOG"
check "dnsmasq never saw leak-unknown-src.example.test" absent leak-unknown-src "$DNSLOG"
check "dnsmasq never saw portonly.example.test (allowed name, denied port)" \
	absent portonly "$DNSLOG"

# --- static answers ----------------------------------------------------------
r=$(pcurl st "http://static.example.test:$PLAIN/static")
check "static resolver.hosts name reaches the upstream (exempt from the guard) (got $r)" test "$r" = "200 0"
check "static names are never sent to DNS" absent static.example.test "$DNSLOG"

# --- NXDOMAIN ----------------------------------------------------------------
r=$(pcurl nx "http://nx.example.test:$PLAIN/nx")
check "NXDOMAIN is 502 (got $r)" test "$r" = "502 0"
check "… with X-Sandgate-Reason: resolve_nxdomain (got '$(hdr nx X-Sandgate-Reason)')" \
	test "$(hdr nx X-Sandgate-Reason)" = resolve_nxdomain
check "dnsmasq answered NXDOMAIN for nx.example.test" grep -q "nx.example.test is NXDOMAIN" "$DNSLOG"
check "audit: nx.example.test recorded with reason resolve_nxdomain" \
	audit_exists '.event == "request" and .dst_host == "nx.example.test" and .reason == "resolve_nxdomain" and .dst_ip == null and .bytes_up == 0'
sg_stop

# --- a resolver that never answers -----------------------------------------------
px_upstream hole --mode udp-blackhole
HOLE=$PXU_PORT
PP=$(freeport)
AUDIT=$T/audit2.jsonl
cat >"$T/sg2.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 1
  resolver:
    servers: ["127.0.0.1:$HOLE"]
    hosts:
      static.example.test: [127.0.0.1]
    timeout: 1s
audit: { path: $AUDIT }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: names, domains: [slow.example.test, static.example.test], ports: [$PLAIN] }
default: deny
YAML
sg_start "$T/sg2.yaml"
t0=$(date +%s%N)
( r=$(pcurl slow "http://slow.example.test:$PLAIN/slow"); echo "$r $(( ($(date +%s%N) - t0) / 1000000 ))" >"$T/slow.res" ) &
SLOW=$!
sleep 0.2
t1=$(date +%s%N)
r=$(pcurl fast "http://static.example.test:$PLAIN/meanwhile")
fast_ms=$(( ($(date +%s%N) - t1) / 1000000 ))
check "while a resolution hangs, another request is served (got $r in ${fast_ms} ms)" \
	bash -c "[ '$r' = '200 0' ] && [ $fast_ms -lt 700 ]"
check "… and it finished before the hanging one" test ! -s "$T/slow.res"
wait $SLOW
read -r code rc ms <"$T/slow.res"
check "unanswered DNS is 504 (got $code, curl rc $rc)" test "$code" = 504
check "… with X-Sandgate-Reason: resolve_timeout (got '$(hdr slow X-Sandgate-Reason)')" \
	test "$(hdr slow X-Sandgate-Reason)" = resolve_timeout
check "… after about resolver.timeout (1 s): ${ms} ms" bash -c "[ $ms -ge 700 ] && [ $ms -le 4000 ]"
check "the silent server did receive the query" test "$(lines "$T/hole.log")" -gt 0
check "audit: resolve_timeout recorded" \
	audit_exists '.event == "request" and .dst_host == "slow.example.test" and .reason == "resolve_timeout" and .dst_ip == null and .bytes_up == 0'
r=$(pcurl after "http://static.example.test:$PLAIN/after")
check "gateway serves after the timeout (got $r)" test "$r" = "200 0"
sg_stop
px_done
