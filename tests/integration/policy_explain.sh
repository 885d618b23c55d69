#!/usr/bin/env bash
# `sandgate policy explain` with the real binary, against a dnsmasq on
# loopback (the only traffic: DNS on 127.0.0.1):
#  - an allowed name: resolved through the configured server, each address
#    judged, with country and AS number from a test GeoIP database (when
#    libmaxmind-db-writer-perl can build one); text and --json;
#  - a name the floor denies: exit 1, step floor, never sent to DNS;
#  - a name resolving to an internal address: the internal-address guard;
#  - resolver.hosts answers: never sent to DNS; --no-resolve: nothing sent;
#  - NXDOMAIN for an allowed name; an unknown sandbox; IP literals;
#    audit mode (would_deny, exit 0); usage errors (exit 2).
. "$(dirname "$0")/../lib/common.sh"
need jq dnsmasq python3

DNSLOG=$T/dnsmasq.log
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
		--address=/x.test/198.51.100.7 \
		--address=/rebind.x.test/10.0.0.5 \
		--address=/nx.x.test/
	DNS_PID=$LAST_PID
	for _ in $(seq 1 100); do
		grep -q "started" "$DNSLOG" 2>/dev/null && break
		kill -0 "$DNS_PID" 2>/dev/null || break
		sleep 0.05
	done
	grep -q "started" "$DNSLOG" 2>/dev/null && kill -0 "$DNS_PID" 2>/dev/null && break
	DP=
done
[ -n "$DP" ] || fail "dnsmasq did not start: $(cat "$T/dnsmasq.err")"
queried() { grep -q "query\[[A-Z]*\] $1 " "$DNSLOG"; }
never_sent() { ! grep -q "$1" "$DNSLOG"; }
jqt() { jq -e "$1" "$2" >/dev/null; }

GEO=
if perl "$TOP/tests/lib/mkmmdb.pl" "$T" >"$T/mkmmdb.out" 2>&1; then
	GEO="geoip: { country: $T/country.mmdb, asn: $T/asn.mmdb }"
else
	echo "note: no GeoIP database ($(tail -n 1 "$T/mkmmdb.out")): country/ASN checks skipped"
fi

cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  resolver:
    servers: ["127.0.0.1:$DP"]
    hosts:
      static.x.test: [192.0.2.10]
    timeout: 2s
$GEO
floor:
  deny:
    - { name: no-evil, domains: ["**.evil.x.test"] }
    - { name: metadata, cidrs: [169.254.0.0/16] }
sandboxes:
  "agent-*":
    allow:
      - { name: api, domains: ["**.x.test"] }
      - { name: db, cidrs: [198.51.100.0/24], ports: [5432] }
  "audit-*":
    mode: audit
    allow:
      - { name: only, domains: [only.x.test] }
YAML

SG() { "$SANDGATE" policy explain -c "$T/sg.yaml" "$@"; }
fails=0
check() {   # check DESCRIPTION COMMAND...
	local what=$1; shift
	if "$@"; then ok "$what"; else echo "FAIL: $what" >&2; fails=$((fails + 1)); fi
}

# 1. an allowed name, resolved through dnsmasq (text)
SG --sandbox agent-1 https://api.x.test/v1/models >"$T/1.out" 2>"$T/1.err"; rc=$?
cat "$T/1.out"
check "allowed name exits 0 (got $rc)" test $rc = 0
check "text names the decision" grep -q '^decision  allow$' "$T/1.out"
check "text names the rule" grep -q '^rule      api$' "$T/1.out"
check "text names the reason" grep -q '^reason    rule_allow$' "$T/1.out"
check "text names the step and list" grep -q '^step      an allow rule in sandboxes/agent-\*/allow$' "$T/1.out"
check "text shows the sandbox glob" grep -q '^sandbox   agent-1 (matches "agent-\*", mode enforce)$' "$T/1.out"
check "text: resolved from DNS" grep -q '^resolved  1 address from DNS$' "$T/1.out"
check "text lists the address with its verdict" grep -Eq '^  198\.51\.100\.7 +allow +rule_allow +api' "$T/1.out"
check "the name was sent to DNS" queried api.x.test
if [ -n "$GEO" ]; then
	check "text shows country and AS" grep -Eq '^  198\.51\.100\.7 .* country XY  AS64501$' "$T/1.out"
fi

# 2. the same as JSON
SG --sandbox agent-1 --json https://api.x.test/v1/models >"$T/2.out"; rc=$?
check "--json exits 0 (got $rc)" test $rc = 0
check "--json is one JSON object" test "$(jq -c . "$T/2.out" | wc -l)" = 1
check "--json fields" jqt '.decision == "allow" and .rule == "api" and .reason == "rule_allow"
	and .step == "allow" and .list == "sandboxes/agent-*/allow" and .host == "api.x.test"
	and .port == 443 and .sandbox_match == "agent-*" and .mode == "enforce"
	and .resolution == "dns" and .name_phase.decision == "undecided"
	and .name_phase.name_allowed
	and (.addresses | length) == 1 and .addresses[0].ip == "198.51.100.7"
	and .addresses[0].decision == "allow"' "$T/2.out"
if [ -n "$GEO" ]; then
	check "--json country and asn" jqt '.addresses[0].country == "XY" and .addresses[0].asn == 64501' "$T/2.out"
else
	check "--json null country and asn without a database" jqt '.addresses[0].country == null and .addresses[0].asn == null' "$T/2.out"
fi

# 3. the floor denies the name: never resolved
SG --sandbox agent-1 --json a.evil.x.test >"$T/3.out"; rc=$?
check "floor-denied name exits 1 (got $rc)" test $rc = 1
check "floor step" jqt '.decision == "deny" and .reason == "floor_deny" and .rule == "no-evil"
	and .step == "floor" and .list == "floor/deny" and .resolution == "skipped"
	and (.addresses | length) == 0' "$T/3.out"
check "a denied name is not sent to DNS" never_sent evil.x.test

# 4. a name that resolves to a private address
SG --sandbox agent-1 rebind.x.test >"$T/4.out"; rc=$?
check "internal address exits 1 (got $rc)" test $rc = 1
check "internal-address guard step" grep -q '^step      the internal-address guard' "$T/4.out"
check "internal_address reason" grep -q '^reason    internal_address$' "$T/4.out"
check "the address is listed as denied" grep -Eq '^  10\.0\.0\.5 +deny +internal_address +api' "$T/4.out"

# 5. resolver.hosts: static, no DNS
SG --sandbox agent-1 --json static.x.test:443 >"$T/5.out"; rc=$?
check "static answer exits 0 (got $rc)" test $rc = 0
check "static resolution" jqt '.resolution == "static" and .addresses[0].ip == "192.0.2.10"' "$T/5.out"
check "a static name is not sent to DNS" never_sent static.x.test

# 6. --no-resolve: nothing sent
SG --sandbox agent-1 --no-resolve --json norez.x.test >"$T/6.out"; rc=$?
check "--no-resolve: undecided exits 1 (got $rc)" test $rc = 1
check "--no-resolve fields" jqt '.resolution == "skipped" and .decision == "undecided"
	and .reason == "need_addr" and (.note | test("no-resolve"))' "$T/6.out"
check "--no-resolve sends no query" never_sent norez.x.test

# 7. NXDOMAIN for a name the policy allows
SG --sandbox agent-1 --json a.nx.x.test >"$T/7.out"; rc=$?
check "NXDOMAIN exits 1 (got $rc)" test $rc = 1
check "NXDOMAIN fields" jqt '.resolution == "nxdomain" and .reason == "resolve_nxdomain"
	and .decision == "deny" and .step == "resolver"' "$T/7.out"
check "the NXDOMAIN name was asked" queried a.nx.x.test

# 8. an unknown sandbox name
SG --sandbox nobody api.x.test >"$T/8.out"; rc=$?
check "unknown sandbox exits 1 (got $rc)" test $rc = 1
check "unknown sandbox is said" grep -q '^sandbox   nobody: no sandbox matches this name; judged as an unknown source$' "$T/8.out"
check "unknown_source reason" grep -q '^reason    unknown_source$' "$T/8.out"

# 9. IP literals: address rules and the default only
SG --sandbox agent-7 --json 198.51.100.9:5432 >"$T/9.out"; rc=$?
check "IP on a cidr rule exits 0 (got $rc)" test $rc = 0
check "IP literal fields" jqt '.is_ip and .rule == "db" and .resolution == "none"
	and .name_phase == null and .addresses[0].ip == "198.51.100.9"' "$T/9.out"
SG --sandbox agent-7 '[2001:db8::1]:443' >"$T/9b.out"; rc=$?
check "bracketed IPv6 exits 1 (got $rc)" test $rc = 1
check "IPv6 literal judged by the default" grep -q '^reason    default_deny$' "$T/9b.out"
SG --sandbox agent-7 --json 169.254.169.254:80 >"$T/9c.out"; rc=$?
check "metadata address denied by the floor (got $rc)" jqt '.rule == "metadata" and .step == "floor"' "$T/9c.out"

# 10. audit mode: would_deny, traffic flows
SG --sandbox audit-1 --json http://other.x.test:8080/ >"$T/10.out"; rc=$?
check "would_deny exits 0 (got $rc)" test $rc = 0
check "would_deny fields" jqt '.decision == "would_deny" and .would_deny and .port == 8080
	and .mode == "audit" and .reason == "default_deny"' "$T/10.out"

# 11. usage
SG api.x.test >"$T/11.out" 2>&1; rc=$?
check "missing --sandbox exits 2 (got $rc)" test $rc = 2
SG --sandbox a ftp://api.x.test >"$T/11b.out" 2>&1; rc=$?
check "unknown scheme exits 2 (got $rc)" test $rc = 2
check "unknown scheme is said" grep -q 'unknown scheme' "$T/11b.out"
SG --sandbox a 'bad host!' >"$T/11c.out" 2>&1; rc=$?
check "a target that is no host exits 2 (got $rc)" test $rc = 2
"$SANDGATE" policy explain -c "$T/missing.yaml" --sandbox a x.test >"$T/11d.out" 2>&1; rc=$?
check "a missing config exits 1 (got $rc)" test $rc = 1

[ $fails -eq 0 ] || fail "$fails check(s) failed"
echo "all policy explain checks passed"
