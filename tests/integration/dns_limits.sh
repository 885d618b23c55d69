#!/usr/bin/env bash
# Exfiltration through query names: a burst of 1,000 random subdomains of
# a wildcard the sandbox is allowed. With gateway.dns { rate: 100, burst:
# 200, max_names_per_minute: 50 }:
#  - at most 50 new names are answered (and reach the upstream), the rest
#    are REFUSED;
#  - the refusals are audited once per burst (one dns_name_burst record,
#    at most one dns_rate_limited record) whose counts add up to exactly
#    the queries refused, and /metrics counts them too;
#  - a name asked before the burst keeps working, another sandbox is not
#    affected, and the burst's last refusals do not hide a new burst later.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
. "$(dirname "$0")/../lib/dns_common.sh"
need python3 jq dnsmasq dig curl

dnsmasq_start --local-ttl=300 --address=/burst.example.test/203.0.113.20
PP=$(freeport)
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP", dns: "127.0.0.1:0", admin: "unix:$T/admin.sock" }
  workers: 2
  resolver: { servers: ["127.0.0.1:$DP"] }
  dns: { rate: 100, burst: 200, max_names_per_minute: 50 }
audit: { path: $T/audit.jsonl }
sandboxes:
  noisy:
    sources: [127.0.0.1/32]
    allow: [ { name: wild, domains: ["**.burst.example.test"] } ]
  quiet:
    sources: [127.0.0.2/32]
    allow: [ { name: wild2, domains: ["**.burst.example.test"] } ]
default: deny
YAML
sg_start "$T/sg.yaml"
DNS_PORT=$(sg_dns_port)

r=$(dq known @127.0.0.1 known.burst.example.test A)
[ "$r" = NOERROR ] || fail "the first name did not resolve: $r"

python3 "$TOP/tests/lib/dns_query.py" burst 127.0.0.1 "$DNS_PORT" burst.example.test 1000 \
	>"$T/burst.json" 2>"$T/burst.err" || fail "burst client: $(cat "$T/burst.err")"
jq -c .counts "$T/burst.json"
ok_n=$(jq '.counts.NOERROR // 0' "$T/burst.json")
ref_n=$(jq '.counts.REFUSED // 0' "$T/burst.json")
lost=$(jq '.counts.timeout // 0' "$T/burst.json")
check "every query got an answer (lost: $lost)" test "$lost" = 0
check "at most 49 new names answered (the window allows 50, one was asked before): $ok_n" \
	test "$ok_n" -le 49
check "the rest REFUSED: $ref_n" test "$((ok_n + ref_n))" = 1000
seen=$(grep -c 'query\[A\] [a-z0-9]\{20\}\.burst\.example\.test' "$DNSLOG")
check "the upstream saw at most 50 of the random names ($seen), exactly those answered" \
	test "$seen" -le 50 -a "$seen" -eq "$ok_n"

# one record per kind of refusal, written when the burst has been quiet 1 s
# (at the next 1 s sweep: within about 2 s)
sleep 1
for _ in $(seq 1 40); do
	[ "$(audit_count '.event == "dns" and .reason == "dns_name_burst"')" -ge 1 ] &&
		[ "$(audit_count '.event == "dns" and .reason == "dns_rate_limited"')" -ge 1 ] && break
	sleep 0.05
done
nb=$(audit_count '.event == "dns" and .reason == "dns_name_burst"')
nr=$(audit_count '.event == "dns" and .reason == "dns_rate_limited"')
sum=$(jq -s '[.[] | select(.event == "dns" and (.reason == "dns_name_burst" or .reason == "dns_rate_limited")) | .count] | add' "$T/audit.jsonl")
check "one dns_name_burst record ($nb), at most one dns_rate_limited ($nr)" \
	test "$nb" = 1 -a "$nr" -le 1
check "their counts add up to the refused queries ($sum = $ref_n)" test "$sum" = "$ref_n"
check "the burst record: sandbox, deny, REFUSED, a sample name, aggregate burst" audit_exists \
	'.event == "dns" and .reason == "dns_name_burst" and .sandbox == "noisy" and .decision == "deny"
	 and .rcode == "REFUSED" and .aggregate == "burst" and (.qname | endswith(".burst.example.test"))'
nrec=$(audit_count '.event == "dns" and .sandbox == "noisy" and .decision == "allow"')
check "allowed queries: one record per new name, no more ($nrec for $ok_n + 1)" test "$nrec" = "$((ok_n + 1))"
curl -s --unix-socket "$T/admin.sock" http://x/metrics >"$T/metrics.txt"
m_rate=$(sed -n 's/^sandgate_dns_rate_limited_total //p' "$T/metrics.txt")
m_names=$(sed -n 's/^sandgate_dns_name_burst_total //p' "$T/metrics.txt")
check "metrics: rate limited + name burst = refused ($m_rate + $m_names = $ref_n)" \
	test "$((m_rate + m_names))" = "$ref_n"
check "metrics: labelled by sandbox" \
	grep -q 'sandgate_dns_queries_total{sandbox="noisy",decision="deny",reason="dns_name_burst"}' "$T/metrics.txt"

# after the burst
r=$(dq known2 @127.0.0.1 known.burst.example.test A)
check "a name asked before the burst still resolves (got $r)" test "$r" = NOERROR
r=$(dq new @127.0.0.1 brand-new.burst.example.test A)
check "a new name in the same minute is refused (got $r)" test "$r" = REFUSED
r=$(dq other @127.0.0.1 -b 127.0.0.2 other-sandbox.burst.example.test A)
check "another sandbox is not affected (got $r)" test "$r" = NOERROR
# written within about 2 s: 1 s without refusals, then the next 1 s sweep
for _ in $(seq 1 60); do
	[ "$(audit_count '.event == "dns" and .reason == "dns_name_burst"')" = 2 ] && break
	sleep 0.05
done
check "the later refusal is a new burst record, before shutdown" \
	test "$(audit_count '.event == "dns" and .reason == "dns_name_burst" and .qname == "brand-new.burst.example.test" and .count == 1')" = 1
sg_stop
px_done
