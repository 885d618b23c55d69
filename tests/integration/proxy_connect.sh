#!/usr/bin/env bash
# Explicit proxy: CONNECT to an allowed name reaches the upstream sandgate
# resolved; a denied name gets 403 and never reaches anyone; both audited.
. "$(dirname "$0")/../lib/common.sh"
need curl openssl python3 jq

mkcerts api.example.test other.example.test
upstream api --cert api.example.test
PP=$(freeport)
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
      other.example.test: [127.0.0.1]
audit: { path: $T/audit.jsonl }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: api, domains: [api.example.test], ports: [$UP_PORT] }
default: deny
YAML
sg_start "$T/sg.yaml"

out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
	"https://api.example.test:$UP_PORT/v1/models?key=abc")
[ "$out" = "hello from api" ] || fail "allowed CONNECT: got '$out'"
jq -e 'select(.path == "/v1/models?key=abc" and .sni == "api.example.test")' "$UP_LOG" >/dev/null ||
	fail "upstream did not record the request: $(cat "$UP_LOG")"
ok "allowed CONNECT reached the upstream"

code=$(curl -s -o "$T/denied.body" -w '%{http_connect}' --max-time 10 -x "http://127.0.0.1:$PP" \
	--cacert "$T/certs/ca.pem" "https://other.example.test:$UP_PORT/")
[ "$code" = 403 ] || fail "denied CONNECT: proxy answered $code, wanted 403"
[ "$(wc -l <"$UP_LOG")" -eq 1 ] || fail "denied CONNECT reached the upstream"
ok "denied CONNECT refused with 403"

audit_has "$T/audit.jsonl" '.event == "connection" and .decision == "allow" and .dst_host == "api.example.test" and .rule == "api" and .sni == "api.example.test" and .bytes_down > 0 and .tls == "passthrough"'
audit_has "$T/audit.jsonl" '.event == "connection" and .decision == "deny" and .dst_host == "other.example.test" and .reason == "default_deny" and .rule == null'
sg_stop
audit_has "$T/audit.jsonl" '.event == "gateway_stop"'
# seq strictly increasing, v == 1 everywhere
jq -s -e '[.[].seq] as $s | ($s | length) > 2 and ([range(1; $s|length)] | all($s[.] > $s[. - 1])) and all(.[]; .v == 1)' "$T/audit.jsonl" >/dev/null ||
	fail "seq not strictly increasing: $(cat "$T/audit.jsonl")"
ok "audit records written"
