#!/usr/bin/env bash
# Regex and GeoIP rules in the running gateway (two workers, so each runs
# its own PCRE2 match data), through the explicit proxy to a loopback
# upstream: what arrives upstream and what the audit records say.
#  - a regex allow (full match, caseless) lets a request through; a name
#    it only partly matches, or one an earlier deny regex matches, is 403;
#  - with a test GeoIP database (tests/lib/mkmmdb.pl maps 127.0.0.0/8 to
#    XL and 127.0.0.2 to XQ): a domain+country allow passes for an address
#    in XL; the floor's countries deny refuses a name resolving to XQ.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
need curl python3 jq

upstream plain
PLAIN=$UP_PORT PLAIN_LOG=$UP_LOG
PP=$(freeport)

GEO= GEORULES=
if perl "$TOP/tests/lib/mkmmdb.pl" "$T" >"$T/mkmmdb.out" 2>&1; then
	GEO="geoip: { country: $T/country.mmdb, asn: $T/asn.mmdb }"
	GEORULES="
floor:
  deny:
    - { name: no-xq, countries: [XQ] }"
	GEOALLOW="      - { name: by-country, domains: [geo.test, geo2.test], countries: [XL], asns: [64510, 64511], ports: [$PLAIN] }"
else
	echo "note: no GeoIP database ($(tail -n 1 "$T/mkmmdb.out")): GeoIP checks skipped"
	GEOALLOW=
fi

cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 2
  resolver:
    hosts:
      api-17.rx.test: [127.0.0.1]
      api-18.rx.test: [127.0.0.1]
      api-x.rx.test: [127.0.0.1]
      x.api-1.rx.test: [127.0.0.1]
      bad-api-1.rx.test: [127.0.0.1]
      geo.test: [127.0.0.1]
      geo2.test: [127.0.0.2]
audit: { path: $T/audit.jsonl }
$GEO
$GEORULES
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: by-regex, regex: '^[a-z]+-[0-9]+\.rx\.test$', ports: [$PLAIN] }
$GEOALLOW
    deny:
      - { name: no-bad, regex: ['^bad-.*', 'evil\.rx\.test'], ports: [$PLAIN] }
default: deny
YAML
"$SANDGATE" policy check "$T/sg.yaml" >"$T/check.out" 2>&1 || fail "policy check: $(cat "$T/check.out")"
sg_start "$T/sg.yaml"

# a regex allow: full match
r=$(pcurl ok http://api-17.rx.test:$PLAIN/one)
check "regex allow: 200 ($r)" test "${r% *}" = 200
check "regex allow: the upstream got it" grep -q '"/one"' "$PLAIN_LOG"
check "regex allow: audited with the rule" audit_exists '.dst_host == "api-17.rx.test" and .decision == "allow" and .rule == "by-regex"'
# the Host in upper case: names are compared lower-case
r=$(pcurl upper http://API-18.RX.TEST:$PLAIN/two)
check "an upper-case Host is allowed (names compare lower-case): 200 ($r)" test "${r% *}" = 200
# partial matches do not count
r=$(pcurl nomatch http://api-x.rx.test:$PLAIN/three)
check "regex not matching: 403 ($r)" test "${r% *}" = 403
r=$(pcurl prefix http://x.api-1.rx.test:$PLAIN/four)
check "regex is anchored at the start: 403 ($r)" test "${r% *}" = 403
check "denied by the default" audit_exists '.dst_host == "x.api-1.rx.test" and .reason == "default_deny"'
# an earlier deny regex wins over the allow regex
r=$(pcurl bad http://bad-api-1.rx.test:$PLAIN/five)
check "deny regex first: 403 ($r)" test "${r% *}" = 403
check "deny regex audited" audit_exists '.dst_host == "bad-api-1.rx.test" and .reason == "rule_deny" and .rule == "no-bad"'
check "nothing denied reached the upstream" bash -c "! grep -qE '\"/(three|four|five)\"' '$PLAIN_LOG'"

if [ -n "$GEO" ]; then
	r=$(pcurl geo http://geo.test:$PLAIN/six)
	check "country and AS allow: 200 ($r)" test "${r% *}" = 200
	check "country allow audited" audit_exists '.dst_host == "geo.test" and .decision == "allow" and .rule == "by-country"'
	r=$(pcurl geo2 http://geo2.test:$PLAIN/seven)
	check "floor country deny: 403 ($r)" test "${r% *}" = 403
	check "floor country deny audited" audit_exists '.dst_host == "geo2.test" and .reason == "floor_deny" and .rule == "no-xq"'
	check "the floor-denied request did not reach the upstream" bash -c "! grep -q '\"/seven\"' '$PLAIN_LOG'"
fi
sg_stop
px_done
