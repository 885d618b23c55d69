#!/usr/bin/env bash
# Transparent listener over IPv6: the sandbox dials a made-up [2001:db8::7]
# (redirected at prerouting, never leaves the host); the original destination
# comes from IP6T_SO_ORIGINAL_DST. An allowed SNI goes to the address sandgate
# resolved ([::1]), a denied one is closed before reaching anyone.
. "$(dirname "$0")/../lib/common.sh"
need_root
need curl openssl python3 jq nft ip

mkcerts api.example.test other.example.test
upstream api6 --cert api.example.test --bind ::1
TP=$(freeport)
FAKE=2001:db8::7

netns_make v6
nft_redirect "$TP"

cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: ["::1"]
      other.example.test: ["::1"]
  limits: { handshake_timeout: 1s }
audit: { path: $T/audit.jsonl }
sandboxes:
  sbx-v6:
    sources: [$NS_NET6]
    allow:
      - { name: api6, domains: [api.example.test], ports: [$UP_PORT] }
default: deny
YAML
sg_start "$T/sg.yaml"
A=$T/audit.jsonl
CA=$T/certs/ca.pem

# --- allowed SNI over v6
out=$(ip netns exec "$NS" curl -6 -sS --max-time 10 --cacert "$CA" \
	--resolve "api.example.test:$UP_PORT:[$FAKE]" \
	"https://api.example.test:$UP_PORT/v6" 2>"$T/curl1.err") ||
	fail "allowed SNI over v6: curl failed: $(cat "$T/curl1.err")"
[ "$out" = "hello from api6" ] || fail "allowed SNI over v6: got body '$out'"
jq -e 'select(.path == "/v6" and .sni == "api.example.test" and .peer == "::1")' "$UP_LOG" >/dev/null ||
	fail "upstream did not record the v6 request: $(cat "$UP_LOG")"
audit_has "$A" '.event == "connection" and .sandbox == "sbx-v6" and .decision == "allow"
	and .rule == "api6" and .dst_host == "api.example.test" and .dst_ip == "::1"
	and .dst_port == '"$UP_PORT"' and .sni == "api.example.test" and .tls == "passthrough"
	and .bytes_down > 0 and ((.src // "") | test("^\\['"$NS_V6"'\\]:[0-9]+$"))'
ok "allowed SNI over IPv6 reached [::1], src in brackets"

# --- denied SNI over v6
n0=$(wc -l <"$UP_LOG")
if ip netns exec "$NS" curl -6 -sS --max-time 10 --cacert "$CA" \
	--resolve "other.example.test:$UP_PORT:[$FAKE]" \
	"https://other.example.test:$UP_PORT/" >"$T/curl2.out" 2>"$T/curl2.err"; then
	fail "denied SNI over v6: curl succeeded: $(cat "$T/curl2.out")"
fi
audit_has "$A" '.event == "connection" and .decision == "deny" and .reason == "default_deny"
	and .rule == null and .dst_host == "other.example.test" and .sni == "other.example.test"
	and .dst_port == '"$UP_PORT"' and ((.src // "") | startswith("['"$NS_V6"']:"))'
[ "$(wc -l <"$UP_LOG")" -eq "$n0" ] || fail "denied SNI over v6 reached the upstream: $(tail -n 1 "$UP_LOG")"
ok "denied SNI over IPv6 closed, never reached the upstream"

# --- the sandbox's IPv4 address is not in the sandbox's sources: no sandbox,
# default deny, even for the allowed name
if ip netns exec "$NS" curl -4 -sS --max-time 10 --cacert "$CA" \
	--resolve "api.example.test:$UP_PORT:203.0.113.7" \
	"https://api.example.test:$UP_PORT/v4" >/dev/null 2>&1; then
	fail "v4 from an address outside the sandbox's sources was allowed"
fi
audit_has "$A" '.decision == "deny" and ((.src // "") | startswith("'"$NS_V4"':"))
	and .sandbox != "sbx-v6"'
jq -e 'select(.path == "/v4")' "$UP_LOG" >/dev/null && fail "v4 request reached the upstream"
ok "the same name from a source outside the sandbox denied"

sg_stop
