#!/usr/bin/env bash
# The DNS responder (gateway.listen.dns) with dig over UDP and TCP, against
# a dnsmasq upstream on loopback that logs every query it gets:
#  - an allowed name resolves (TTL capped); over TCP too;
#  - an unlisted name is NXDOMAIN and dnsmasq NEVER hears of it, even with
#    an address-only (cidrs) allow rule in the sandbox's policy;
#  - a name pointing at 127.0.0.1 (rebinding) is NXDOMAIN, reason dns_rebinding;
#    one with an internal A and a public AAAA keeps only the AAAA;
#  - CNAME chains are flattened under the asked name;
#  - TXT is REFUSED, HTTPS is NOERROR with no records (never sent upstream);
#  - 100 static addresses: TC over UDP, the TCP retry gets all of them;
#  - EDNS: the OPT is echoed, version 1 gets BADVERS; a source no sandbox
#    claims is REFUSED; repeated allowed queries are aggregated in the audit;
#  - /metrics counts it all; `audit query` reads the records.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
. "$(dirname "$0")/../lib/dns_common.sh"
need dig dnsmasq python3 jq curl

dnsmasq_start --local-ttl=300 \
	--address=/allowed.example.test/203.0.113.10 \
	--address=/rebind.example.test/127.0.0.1 \
	--host-record=target.example.test,203.0.113.11 \
	--cname=alias.example.test,target.example.test \
	--address=/v6only.example.test/2001:db8::10 \
	--address=/mixed.example.test/10.0.0.5 --address=/mixed.example.test/2001:db8::20 \
	--address=/wild.example.test/203.0.113.12

BIG=$(python3 -c 'print(", ".join("198.51.100.%d" % i for i in range(1, 101)))')
PP=$(freeport)
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP", dns: "[::]:0", admin: "unix:$T/admin.sock" }
  workers: 2
  resolver:
    servers: ["127.0.0.1:$DP"]
    hosts:
      api.example.test: [203.0.113.5]
      big.example.test: [$BIG]
      reg.example.test: [203.0.113.30]
  dns: { max_ttl: 30s }
audit: { path: $T/audit.jsonl }
sandboxes:
  local:
    sources: [127.0.0.1/32, "::1/128"]
    allow:
      - name: names
        domains: [allowed.example.test, rebind.example.test, alias.example.test,
                  v6only.example.test, mixed.example.test, api.example.test,
                  big.example.test, "**.wild.example.test"]
      - { name: lan, cidrs: [10.99.0.0/16], ports: [5432] }
    deny:
      - { name: no-secret, domains: [secret.wild.example.test] }
  "agent-*":
    allow:
      - { name: reg, domains: [reg.example.test] }
default: deny
YAML
sg_start "$T/sg.yaml"
DNS_PORT=$(sg_dns_port)
[ -n "$DNS_PORT" ] || fail "no 'listening dns' line in the log"
A=$T/audit.jsonl

# --- allowed ----------------------------------------------------------------
r=$(dq ok1 @127.0.0.1 allowed.example.test A)
check "allowed name: NOERROR (got $r)" test "$r" = NOERROR
check "… answered 203.0.113.10" grep -q "allowed.example.test.*IN.*A.*203.0.113.10" "$T/ok1.dig"
ttl=$(dig_answers ok1 | awk '{print $2}' | head -n 1)
check "… TTL capped by gateway.dns.max_ttl (30 s; upstream 300): $ttl" \
	bash -c "[ '$ttl' -ge 25 ] && [ '$ttl' -le 30 ]"
check "… dnsmasq was asked" upstream_saw allowed.example.test
check "audit: allow rule_allow for allowed.example.test" audit_exists \
	'.event == "dns" and .sandbox == "local" and .decision == "allow" and .reason == "rule_allow"
	 and .rule == "names" and .qname == "allowed.example.test" and .qtype == "A"
	 and .rcode == "NOERROR" and .answers == 1 and .proto == "udp" and (.src | startswith("127.0.0.1:"))
	 and .dst_host == "allowed.example.test" and .count == 1'
r=$(dq ok2 @127.0.0.1 +tcp allowed.example.test A)
check "allowed name over TCP: NOERROR with 203.0.113.10 (got $r)" \
	bash -c "[ '$r' = NOERROR ] && grep -q 203.0.113.10 '$T/ok2.dig'"
r=$(dq ok6 @::1 v6only.example.test AAAA)
check "AAAA over IPv6: 2001:db8::10 (got $r)" \
	bash -c "[ '$r' = NOERROR ] && grep -q '2001:db8::10' '$T/ok6.dig'"
r=$(dq nodata @127.0.0.1 v6only.example.test A)
check "A of an IPv6-only name: NOERROR, no records (got $r, $(dig_answers nodata | wc -l) answers)" \
	bash -c "[ '$r' = NOERROR ] && [ \$(awk '/^;; ANSWER SECTION/' '$T/nodata.dig' | wc -l) = 0 ]"
r=$(dq wild @127.0.0.1 deep.down.wild.example.test A)
check "**. wildcard: deep.down.wild.example.test resolves (got $r)" \
	bash -c "[ '$r' = NOERROR ] && grep -q 203.0.113.12 '$T/wild.dig'"
r=$(dq st @127.0.0.1 API.Example.TEST A)
check "static resolver.hosts answer (mixed case asked) (got $r)" \
	bash -c "[ '$r' = NOERROR ] && grep -qi 'api.example.test.*203.0.113.5' '$T/st.dig'"
check "… never sent upstream" upstream_never api.example.test

# --- CNAME flattened -------------------------------------------------------
r=$(dq cn @127.0.0.1 alias.example.test A)
check "CNAME: alias.example.test answered with the target's address (got $r)" \
	bash -c "[ '$r' = NOERROR ] && dig_answers() { awk '/^;; ANSWER SECTION:/ {on=1; next} /^\$/ {on=0} on' \"\$1\"; };
		 dig_answers '$T/cn.dig' | grep -q '^alias.example.test.*A.*203.0.113.11' &&
		 ! dig_answers '$T/cn.dig' | grep -q CNAME"

# --- denied: never upstream ----------------------------------------------------
r=$(dq nx @127.0.0.1 unlisted-leak.example.test A)
check "unlisted name: NXDOMAIN (got $r)" test "$r" = NXDOMAIN
r=$(dq nx2 @127.0.0.1 +tcp unlisted-leak2.example.test AAAA)
check "unlisted name over TCP: NXDOMAIN (got $r)" test "$r" = NXDOMAIN
r=$(dq nx3 @127.0.0.1 secret.wild.example.test A)
check "name denied by a deny rule: NXDOMAIN (got $r)" test "$r" = NXDOMAIN
check "audit: deny default_deny for unlisted-leak.example.test" audit_exists \
	'.event == "dns" and .decision == "deny" and .reason == "default_deny" and .rule == null
	 and .qname == "unlisted-leak.example.test" and .rcode == "NXDOMAIN" and .answers == 0'
check "audit: deny rule_deny no-secret" audit_exists \
	'.event == "dns" and .reason == "rule_deny" and .rule == "no-secret" and .qname == "secret.wild.example.test"'

# --- rebinding -------------------------------------------------------------------
r=$(dq rb @127.0.0.1 rebind.example.test A)
check "rebinding (127.0.0.1 for an allowed name): NXDOMAIN (got $r)" test "$r" = NXDOMAIN
check "… the name was resolved (that is how we know)" upstream_saw rebind.example.test
check "audit: deny dns_rebinding" audit_exists \
	'.event == "dns" and .decision == "deny" and .reason == "dns_rebinding" and .qname == "rebind.example.test" and .rcode == "NXDOMAIN"'
r=$(dq mx4 @127.0.0.1 mixed.example.test A)
check "internal A removed, public AAAA kept: A is NOERROR with no records (got $r)" \
	bash -c "[ '$r' = NOERROR ] && ! grep -q '10.0.0.5' '$T/mx4.dig'"
r=$(dq mx6 @127.0.0.1 mixed.example.test AAAA)
check "… AAAA is 2001:db8::20 (got $r)" bash -c "[ '$r' = NOERROR ] && grep -q '2001:db8::20' '$T/mx6.dig'"

# --- types -------------------------------------------------------------------------
r=$(dq txt @127.0.0.1 allowed.example.test TXT)
check "TXT: REFUSED (got $r)" test "$r" = REFUSED
r=$(dq any @127.0.0.1 allowed.example.test ANY)
check "ANY: REFUSED (got $r)" test "$r" = REFUSED
r=$(dq ptr @127.0.0.1 -x 203.0.113.10)
check "PTR: REFUSED (got $r)" test "$r" = REFUSED
r=$(dq https @127.0.0.1 allowed.example.test TYPE65)
check "HTTPS: NOERROR, no records (got $r)" \
	bash -c "[ '$r' = NOERROR ] && grep -q 'ANSWER: 0' '$T/https.dig'"
r=$(dq svcb @127.0.0.1 allowed.example.test TYPE64)
check "SVCB: NOERROR, no records (got $r)" \
	bash -c "[ '$r' = NOERROR ] && grep -q 'ANSWER: 0' '$T/svcb.dig'"
r=$(dq httpsnx @127.0.0.1 unlisted-https.example.test TYPE65)
check "HTTPS of an unlisted name: NXDOMAIN (got $r)" test "$r" = NXDOMAIN
check "dnsmasq never got a TXT, ANY, HTTPS or SVCB query" \
	bash -c "! grep -Eq 'query\[(TXT|ANY|HTTPS|SVCB|type=6[45])\]' '$DNSLOG'"
check "audit: TXT refused dns_type_refused" audit_exists \
	'.event == "dns" and .reason == "dns_type_refused" and .qtype == "TXT" and .rcode == "REFUSED"'

# --- truncation and the TCP retry ---------------------------------------------------
r=$(dq big1 @127.0.0.1 +ignore +bufsize=1232 big.example.test A)
check "100 A records over UDP (EDNS 1232): TC set (flags '$(dig_flags big1)')" \
	bash -c "[ '$r' = NOERROR ] && dig_flags() { sed -n 's/^;; flags: \([a-z ]*\);.*/\1/p' \"\$1\" | tail -n 1; };
		 dig_flags '$T/big1.dig' | grep -qw tc"
r=$(dq big2 @127.0.0.1 +ignore +noedns big.example.test A)
check "… and without EDNS (512 bytes) (flags '$(dig_flags big2)')" \
	bash -c "sed -n 's/^;; flags: \([a-z ]*\);.*/\1/p' '$T/big2.dig' | grep -qw tc"
r=$(dq big3 @127.0.0.1 big.example.test A)
n=$(dig_answers big3 | grep -c "198.51.100.")
check "dig retries over TCP and gets all 100 (got $r, $n records)" \
	bash -c "[ '$r' = NOERROR ] && [ $n = 100 ] && grep -q 'Truncated, retrying in TCP mode' '$T/big3.dig'"

# --- EDNS -----------------------------------------------------------------------------
r=$(dq edns @127.0.0.1 +bufsize=4096 allowed.example.test A)
check "EDNS: OPT echoed, advertising 1232 (got $r)" grep -q "EDNS: version: 0, flags:; udp: 1232" "$T/edns.dig"
r=$(dq badvers @127.0.0.1 +edns=1 +noednsneg allowed.example.test A)
check "EDNS version 1: BADVERS (got $r)" test "$r" = BADVERS

# --- identity ------------------------------------------------------------------------
r=$(dq unk @127.0.0.1 -b 127.0.0.2 allowed.example.test A)
check "a source no sandbox claims (127.0.0.2): REFUSED (got $r)" test "$r" = REFUSED
check "audit: deny unknown_source with a null sandbox" audit_exists \
	'.event == "dns" and .decision == "deny" and .reason == "unknown_source" and .sandbox == null and (.src | startswith("127.0.0.2:"))'

# --- malformed names ----------------------------------------------------------------
r=$(python3 "$TOP/tests/lib/dns_query.py" query 127.0.0.1 "$DNS_PORT" 'bad_-.example.test' A)
check "a name ending a label in '-': FORMERR (got $r)" bash -c "echo '$r' | grep -q ^FORMERR"
check "audit: dns_bad_name" audit_exists '.event == "dns" and .reason == "dns_bad_name" and .rcode == "FORMERR"'

# --- aggregation ----------------------------------------------------------------------
for i in 1 2 3 4 5 6; do dq agg$i @127.0.0.1 agg.wild.example.test A >/dev/null; done
sleep 0.2
n=$(audit_count '.event == "dns" and .qname == "agg.wild.example.test"')
check "6 queries of an allowed name: the first is recorded, the rest not yet (records: $n)" test "$n" = 1

# --- metrics ------------------------------------------------------------------------
curl -s --unix-socket "$T/admin.sock" http://x/metrics >"$T/metrics.txt"
check "metrics: sandgate_dns_queries_total for default_deny" \
	grep -q 'sandgate_dns_queries_total{sandbox="local",decision="deny",reason="default_deny"} [1-9]' "$T/metrics.txt"
check "metrics: NXDOMAIN responses counted" grep -q 'sandgate_dns_responses_total{rcode="NXDOMAIN"} [1-9]' "$T/metrics.txt"
check "metrics: truncated answers counted" grep -q 'sandgate_dns_truncated_total [1-9]' "$T/metrics.txt"
check "metrics: TCP queries counted" grep -q 'sandgate_dns_received_total{proto="tcp"} [1-9]' "$T/metrics.txt"
check "metrics: learned entries" grep -q 'sandgate_dns_learned_entries [1-9]' "$T/metrics.txt"

# --- a sandbox registered at run time is identified like its connections ---------------
code=$(curl -s -o "$T/reg.out" -w '%{http_code}' --unix-socket "$T/admin.sock" \
	-d '{"name":"agent-7","addresses":["127.0.0.3"]}' http://x/v1/sandboxes)
check "registered agent-7 at 127.0.0.3 ($code)" test "$code" = 201
r=$(dq reg @127.0.0.1 -b 127.0.0.3 reg.example.test A)
check "its query is judged by the agent-* policy (got $r)" \
	bash -c "[ '$r' = NOERROR ] && grep -q 203.0.113.30 '$T/reg.dig'"
check "audit: sandbox is the registered name" audit_exists \
	'.event == "dns" and .sandbox == "agent-7" and .qname == "reg.example.test" and .rule == "reg" and (.src | startswith("127.0.0.3:"))'
r=$(dq reg2 @127.0.0.1 -b 127.0.0.3 allowed.example.test A)
check "… and not by the local sandbox's rules (got $r)" test "$r" = NXDOMAIN

# --- a reload applies to the next answer (the answer cache follows the policy) ------
sed -i 's/domains: \[allowed.example.test, /domains: [/' "$T/sg.yaml"
kill -HUP "$SG_PID"
for _ in $(seq 1 100); do grep -q "reloaded" "$T/gw.log" && break; sleep 0.02; done
r=$(dq rl @127.0.0.1 allowed.example.test A)
check "after a reload without allowed.example.test: NXDOMAIN (got $r)" test "$r" = NXDOMAIN
r=$(dq rl2 @127.0.0.1 v6only.example.test AAAA)
check "… other names still answered (got $r)" test "$r" = NOERROR

sg_stop
check "at shutdown: one aggregate record with the other 5" audit_exists \
	'.event == "dns" and .qname == "agg.wild.example.test" and .qtype == "A" and .aggregate == "window"
	 and .count == 5 and .decision == "allow" and .rule == "names" and .answers == 1'
check "… and no other record of it" test "$(audit_count '.qname == "agg.wild.example.test"')" = 2
check "a truncated answer records 0 answers sent" audit_exists \
	'.event == "dns" and .qname == "big.example.test" and .proto == "udp" and .answers == 0 and .rcode == "NOERROR"'
check "the gateway_stop record comes after the aggregates" \
	bash -c "tail -n 1 '$A' | jq -e '.event == \"gateway_stop\"'"
check "dnsmasq never heard of any unlisted name" \
	bash -c "! grep -Eq 'unlisted|secret' '$DNSLOG'"
check "sandgate audit query --host finds dns records by name (dst_host)" \
	bash -c "'$SANDGATE' audit query --event dns --host 'unlisted-leak.*' '$A' | grep -q 'dns .*unlisted-leak.example.test'"
px_done
