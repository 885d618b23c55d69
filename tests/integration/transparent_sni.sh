#!/usr/bin/env bash
# Transparent listener, IPv4: a sandbox whose TCP is redirected dials a
# made-up address (203.0.113.7, never leaves the host). An allowed SNI is
# connected to the address sandgate resolved itself (127.0.0.1), not to the
# one the sandbox dialled; a denied SNI is closed and never reaches the
# upstream; plain HTTP is judged on Host and gets one request per connection.
. "$(dirname "$0")/../lib/common.sh"
need_root
need curl openssl python3 jq nft ip

mkcerts api.example.test other.example.test
upstream api --cert api.example.test
API_PORT=$UP_PORT API_LOG=$UP_LOG
upstream plain
HTTP_PORT=$UP_PORT HTTP_LOG=$UP_LOG
TP=$(freeport)
FAKE=203.0.113.7

netns_make sni
nft_redirect "$TP"

cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
      other.example.test: [127.0.0.1]
      plain.example.test: [127.0.0.1]
  limits: { handshake_timeout: 1s }
audit: { path: $T/audit.jsonl }
sandboxes:
  sbx-sni:
    sources: [$NS_NET4, $NS_NET6]
    allow:
      - { name: api, domains: [api.example.test], ports: [$API_PORT] }
      - { name: plain, domains: [plain.example.test], ports: [$HTTP_PORT] }
default: deny
YAML
sg_start "$T/sg.yaml"
A=$T/audit.jsonl
CA=$T/certs/ca.pem

# --- allowed SNI
out=$(ip netns exec "$NS" curl -sS --max-time 10 --cacert "$CA" \
	--resolve "api.example.test:$API_PORT:$FAKE" \
	"https://api.example.test:$API_PORT/x" 2>"$T/curl1.err") ||
	fail "allowed SNI: curl failed: $(cat "$T/curl1.err")"
[ "$out" = "hello from api" ] || fail "allowed SNI: got body '$out'"
jq -e 'select(.method == "GET" and .path == "/x" and .sni == "api.example.test")' "$API_LOG" >/dev/null ||
	fail "upstream did not record the request with its SNI: $(cat "$API_LOG")"
audit_has "$A" '.event == "connection" and .sandbox == "sbx-sni" and .decision == "allow"
	and .rule == "api" and .dst_host == "api.example.test" and .dst_ip == "127.0.0.1"
	and .dst_port == '"$API_PORT"' and .sni == "api.example.test" and .tls == "passthrough"
	and .bytes_down > 0 and .bytes_up > 0 and ((.src // "") | startswith("'"$NS_V4"':"))'
# sandgate connected to what it resolved, never to the made-up destination
[ "$(jq -c "select(.decision == \"allow\" and .dst_ip == \"$FAKE\")" "$A" | wc -l)" -eq 0 ] ||
	fail "an audit record names the spoofed destination $FAKE"
ok "allowed SNI reached the upstream at the address sandgate resolved"

# --- denied SNI (a valid certificate exists for it; policy says no)
nreq=$(wc -l <"$API_LOG")
if ip netns exec "$NS" curl -sS --max-time 10 --cacert "$CA" \
	--resolve "other.example.test:$API_PORT:$FAKE" \
	"https://other.example.test:$API_PORT/secret" >"$T/curl2.out" 2>"$T/curl2.err"; then
	fail "denied SNI: curl succeeded: $(cat "$T/curl2.out")"
fi
audit_has "$A" '.event == "connection" and .decision == "deny" and .reason == "default_deny"
	and .rule == null and .dst_host == "other.example.test" and .sni == "other.example.test"
	and .dst_port == '"$API_PORT"
[ "$(wc -l <"$API_LOG")" -eq "$nreq" ] || fail "denied SNI reached the upstream: $(tail -n 1 "$API_LOG")"
ok "denied SNI closed, never reached the upstream"

# --- a name allowed on one port is not allowed on another
if ip netns exec "$NS" curl -sS --max-time 10 --cacert "$CA" \
	--resolve "api.example.test:$HTTP_PORT:$FAKE" \
	"https://api.example.test:$HTTP_PORT/" >/dev/null 2>&1; then
	fail "allowed name on a port no rule allows: curl succeeded"
fi
audit_has "$A" '.decision == "deny" and .dst_host == "api.example.test" and .dst_port == '"$HTTP_PORT"
[ "$(wc -l <"$HTTP_LOG")" -eq 0 ] || fail "wrong-port TLS reached the plain upstream"
ok "allowed name on another port denied"

# --- plain HTTP, judged on Host
out=$(ip netns exec "$NS" curl -sS --max-time 10 \
	--resolve "plain.example.test:$HTTP_PORT:$FAKE" \
	"http://plain.example.test:$HTTP_PORT/p/q?token=abc" 2>"$T/curl3.err") ||
	fail "plain HTTP: curl failed: $(cat "$T/curl3.err")"
[ "$out" = "hello from plain" ] || fail "plain HTTP: got body '$out'"
jq -e 'select(.method == "GET" and .path == "/p/q?token=abc" and .sni == null
	and ([.headers[] | select((.[0] | ascii_downcase) == "connection") | .[1] | ascii_downcase] == ["close"])
	and ([.headers[] | select((.[0] | ascii_downcase) == "host") | .[1]] == ["plain.example.test:'"$HTTP_PORT"'"]))' \
	"$HTTP_LOG" >/dev/null || fail "plain upstream: request or Connection: close missing: $(cat "$HTTP_LOG")"
audit_has "$A" '.event == "request" and .decision == "allow" and .rule == "plain"
	and .method == "GET" and .path == "/p/q" and .dst_host == "plain.example.test"
	and .dst_ip == "127.0.0.1" and .tls == "none" and .bytes_down > 0'
ok "plain HTTP reached the upstream with Connection: close, audited as a request"

# --- plain HTTP to a name no rule allows
code=$(ip netns exec "$NS" curl -s -o "$T/curl4.out" -w '%{http_code}' --max-time 10 \
	--resolve "other.example.test:$HTTP_PORT:$FAKE" \
	"http://other.example.test:$HTTP_PORT/nope")
# closed without an answer (000) today; a 403 would be as good
[ "$code" = 000 ] || [ "$code" = 403 ] || fail "plain HTTP to a denied host: status $code"
audit_has "$A" '.event == "request" and .decision == "deny" and .reason == "default_deny"
	and .dst_host == "other.example.test" and .path == "/nope"'
[ "$(wc -l <"$HTTP_LOG")" -eq 1 ] || fail "denied plain HTTP reached the upstream: $(cat "$HTTP_LOG")"
ok "plain HTTP to a denied host refused"

sg_stop
