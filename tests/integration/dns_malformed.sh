#!/usr/bin/env bash
# Malformed DNS messages at the responder, over UDP and TCP: truncated
# messages, compression pointer loops, labels over 63 bytes, names over
# 255, responses sent as queries, wrong counts, other opcodes, names that
# are not host names, 300 random datagrams. Each gets FORMERR (or the
# specific code) or is dropped; nothing crashes (run it under ASan:
# SANDGATE=build/san/sandgate), a valid query is answered afterwards, and
# no malformed name reaches the upstream resolver.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
. "$(dirname "$0")/../lib/dns_common.sh"
need python3 jq dnsmasq

dnsmasq_start --address=/example.test/203.0.113.10
PP=$(freeport)
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP", dns: "127.0.0.1:0" }
  workers: 1
  resolver:
    servers: ["127.0.0.1:$DP"]
    hosts: { api.example.test: [203.0.113.5] }
  dns: { rate: 100000, burst: 100000, tcp_idle_timeout: 1s }
audit: { path: $T/audit.jsonl }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: any, domains: ["**.example.test", "api.example.test"] }
default: deny
YAML
sg_start "$T/sg.yaml"
DNS_PORT=$(sg_dns_port)
python3 "$TOP/tests/lib/dns_query.py" malformed 127.0.0.1 "$DNS_PORT" >"$T/mal.out" 2>"$T/mal.err" ||
	fail "dns_query.py malformed: $(cat "$T/mal.err")"
cat "$T/mal.out"
res() { sed -n "s/^$1: //p" "$T/mal.out"; }

check "empty datagram: dropped" test "$(res 'udp empty')" = drop
check "5-byte datagram: dropped" test "$(res 'udp short5')" = drop
check "a response (QR set): never answered" test "$(res 'udp response_qr')" = drop
for c in header_only truncated_name pointer_loop pointer_loop_record label_64 name_260 \
	qdcount0 qdcount2 bad_name dot_in_label numeric_tld oversized_5k two_opt; do
	check "$c: FORMERR (got $(res "udp $c"))" test "$(res "udp $c")" = FORMERR
done
check "opcode UPDATE: NOTIMP (got $(res 'udp opcode_update'))" test "$(res 'udp opcode_update')" = NOTIMP
check "EDNS version 1: BADVERS (got $(res 'udp edns_v1'))" test "$(res 'udp edns_v1')" = BADVERS
check "class CHAOS: REFUSED (got $(res 'udp class_chaos'))" test "$(res 'udp class_chaos')" = REFUSED
check "300 random datagrams did not stop it ($(res 'udp random'))" sg_alive

check "TCP zero-length frame: connection closed (got $(res 'tcp zero_length'))" \
	test "$(res 'tcp zero_length')" = closed
check "TCP frame longer than any query: closed (got $(res 'tcp over_qmax'))" \
	test "$(res 'tcp over_qmax')" = closed
check "TCP: 3 pipelined queries answered in order (got $(res 'tcp pipelined3'))" \
	test "$(res 'tcp pipelined3')" = "NOERROR#20 NOERROR#21 NOERROR#20"
check "TCP: a pointer loop: FORMERR (got $(res 'tcp loop_framed'))" \
	test "$(res 'tcp loop_framed')" = "FORMERR#5"
check "TCP: half a frame, then the client goes: no answer (got $(res 'tcp half_frame'))" \
	test "$(res 'tcp half_frame')" = closed

r=$(python3 "$TOP/tests/lib/dns_query.py" query 127.0.0.1 "$DNS_PORT" api.example.test A | head -n 1)
check "a valid query afterwards is answered (got $r)" bash -c "echo '$r' | grep -q '^NOERROR .*an=1'"
r=$(python3 "$TOP/tests/lib/dns_query.py" query 127.0.0.1 "$DNS_PORT" api.example.test A --tcp | head -n 1)
check "… over TCP too (got $r)" bash -c "echo '$r' | grep -q '^NOERROR .*an=1'"
check "audit: malformed messages recorded as dns_malformed" audit_exists \
	'.event == "dns" and .decision == "deny" and .reason == "dns_malformed" and .rcode == "FORMERR"'
check "audit: a name that is not a host name is dns_bad_name, shown escaped" audit_exists \
	'.event == "dns" and .reason == "dns_bad_name" and .qname == "a\\.b.test" and .dst_host == null'
check "every audit line is one JSON object" bash -c "jq -c . '$T/audit.jsonl' >/dev/null"
check "the upstream resolver saw none of it" bash -c "! grep -q 'query\[' '$DNSLOG'"
sg_stop
px_done
