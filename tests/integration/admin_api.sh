#!/usr/bin/env bash
# The control API: sandboxes registered at run time get their policy by
# name, /metrics counts decisions, /v1/reload reloads or refuses with the
# loader's error, /healthz; a unix socket is 0600, TCP needs the token.
. "$(dirname "$0")/../lib/common.sh"
need curl openssl python3 jq

mkcerts api.example.test
upstream api --cert api.example.test
PP=$(freeport)
SOCK=$T/admin.sock
write_cfg() {   # $1: extra allow rule (or nothing)
	cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP", admin: "unix:$SOCK" }
  workers: 2
  resolver: { hosts: { api.example.test: [127.0.0.1] } }
audit: { path: $T/audit.jsonl }
sandboxes:
  "agent-*":
    allow:
      - { name: api, domains: [api.example.test], ports: [$UP_PORT] }
$1
default: deny
YAML
}
write_cfg ""
sg_start "$T/sg.yaml"
api() { curl -sS --max-time 5 --unix-socket "$SOCK" -o "$T/api.body" -w '%{http_code}' "$@"; }
get() { curl -s --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
	"https://api.example.test:$UP_PORT/$1"; }

[ "$(stat -c %a "$SOCK")" = 600 ] || fail "admin socket mode $(stat -c %a "$SOCK")"
[ "$(api http://x/healthz)" = 200 ] || fail "healthz: $(cat "$T/api.body")"
ok "unix socket 0600, healthz"

# Not registered yet: 127.0.0.1 is nobody's source.
get before && fail "an unregistered source was allowed"
audit_has "$T/audit.jsonl" '.event == "connection" and .reason == "unknown_source" and .sandbox == null'

code=$(api -X POST -d '{"name":"agent-7","addresses":["127.0.0.1","::1"],"labels":{"team":"ml"}}' http://x/v1/sandboxes)
[ "$code" = 201 ] || fail "register: $code $(cat "$T/api.body")"
jq -e '.name == "agent-7" and .policy == "agent-*" and .labels.team == "ml"' "$T/api.body" >/dev/null ||
	fail "register answer: $(cat "$T/api.body")"
[ "$(get after)" = "hello from api" ] || fail "registered sandbox not allowed"
audit_has "$T/audit.jsonl" '.event == "sandbox_start" and .sandbox == "agent-7" and .addresses == ["127.0.0.1","::1"] and .labels == ["team=ml"]'
"$SANDGATE" audit query --json --event sandbox_start "$T/audit.jsonl" >"$T/q.out" 2>"$T/q.err" ||
	fail "audit query cannot read sandbox_start: $(cat "$T/q.err")"
[ "$(wc -l <"$T/q.out")" -eq 1 ] || fail "audit query sandbox_start: $(cat "$T/q.out")"
audit_has "$T/audit.jsonl" '.event == "connection" and .decision == "allow" and .sandbox == "agent-7" and .rule == "api"'
ok "a registered sandbox gets the policy its name matches"

[ "$(api http://x/v1/sandboxes)" = 200 ] || fail "list"
jq -e '.sandboxes | length == 1 and .[0].name == "agent-7" and .[0].addresses == ["127.0.0.1","::1"]' "$T/api.body" >/dev/null ||
	fail "list: $(cat "$T/api.body")"
for bad in '{"name":"x"' '[]' '{"name":"a b","addresses":["127.0.0.2"]}' \
	   '{"name":"agent-8","addresses":["not-an-ip"]}' '{"name":"agent-8"}' \
	   '{"name":"agent-8","addresses":["127.0.0.9"],"extra":1}' \
	   '{"name":"agent-8","addresses":["127.0.0.9"],"labels":{"a":1}}' \
	   "{\"name\":\"agent-8\",\"addresses\":[$(seq -s, -f '"127.0.1.%g"' 1 16)],\"addresses\":[$(seq -s, -f '"127.0.2.%g"' 1 16)]}"; do
	code=$(api -X POST -d "$bad" http://x/v1/sandboxes)
	[ "$code" = 400 ] || fail "bad body $bad: $code"
	jq -e '.error | length > 0' "$T/api.body" >/dev/null || fail "no reason for $bad"
done
jq -e '.error == "unknown field \"extra\""' <(api -X POST -d '{"name":"agent-8","addresses":["127.0.0.9"],"extra":1}' http://x/v1/sandboxes >/dev/null; cat "$T/api.body") >/dev/null ||
	fail "unknown field reason: $(cat "$T/api.body")"
jq -e '.error == "field \"addresses\" given twice"' <(api -X POST -d "{\"name\":\"a\",\"addresses\":[\"127.0.3.1\"],\"addresses\":[\"127.0.3.2\"]}" http://x/v1/sandboxes >/dev/null; cat "$T/api.body") >/dev/null ||
	fail "duplicate field reason: $(cat "$T/api.body")"
code=$(api -X POST -d '{"name":"agent-9","addresses":["127.0.0.1"]}' http://x/v1/sandboxes)
[ "$code" = 409 ] || fail "address conflict: $code"
[ "$(api -X PUT http://x/v1/reload)" = 405 ] || fail "wrong method"
[ "$(api http://x/nope)" = 404 ] || fail "unknown path"
ok "bad bodies get 400 with a reason; conflicts 409"

[ "$(api http://x/metrics)" = 200 ] || fail "metrics"
grep -qx 'sandgate_decisions_total{sandbox="agent-\*",decision="allow",reason="rule_allow"} 1' "$T/api.body" ||
	fail "metrics allow line: $(grep decisions "$T/api.body")"
grep -qx 'sandgate_decisions_total{sandbox="",decision="deny",reason="unknown_source"} 1' "$T/api.body" ||
	fail "metrics deny line: $(grep decisions "$T/api.body")"
grep -qx 'sandgate_registered_sandboxes 1' "$T/api.body" || fail "registered gauge"
grep -q '^sandgate_open_connections ' "$T/api.body" || fail "open connections gauge"
ok "metrics count decisions by sandbox, decision and reason"

# Reload through the API: an invalid file is refused with its error.
cp "$T/sg.yaml" "$T/good.yaml"
printf 'version: 1\nsandboxes: { x: { alow: [] } }\n' >"$T/sg.yaml"
[ "$(api -X POST http://x/v1/reload)" = 400 ] || fail "invalid reload accepted"
jq -e '.error | test("sg.yaml:2:[0-9]+: .*alow")' "$T/api.body" >/dev/null || fail "reload error: $(cat "$T/api.body")"
[ "$(get still)" = "hello from api" ] || fail "old policy lost after a refused reload"
audit_has "$T/audit.jsonl" '.event == "policy_reload" and .decision == "deny" and (.error | test("alow"))'
write_cfg "    deny: [ { name: block-api, domains: [api.example.test], ports: [$UP_PORT] } ]"
[ "$(api -X POST http://x/v1/reload)" = 200 ] || fail "reload: $(cat "$T/api.body")"
jq -e '.reloaded == true and .generation == 2' "$T/api.body" >/dev/null || fail "reload answer $(cat "$T/api.body")"
get denied && fail "reloaded deny rule not applied"
audit_has "$T/audit.jsonl" '.event == "connection" and .decision == "deny" and .rule == "block-api" and .sandbox == "agent-7"'
ok "POST /v1/reload applies a valid file and refuses an invalid one with its error"

[ "$(api -X DELETE http://x/v1/sandboxes/agent-7)" = 204 ] || fail "delete"
[ "$(api -X DELETE http://x/v1/sandboxes/agent-7)" = 404 ] || fail "delete twice"
audit_has "$T/audit.jsonl" '.event == "sandbox_stop" and .sandbox == "agent-7"'
get gone && fail "unregistered sandbox still allowed"
ok "unregistered: back to unknown_source"
sg_stop
[ ! -e "$SOCK" ] || fail "admin socket left behind"

# TCP admin: the bearer token is required.
AP=$(freeport)
head -c 24 /dev/urandom | base64 >"$T/token"
sed -i "s|admin: \"unix:$SOCK\"|admin: \"127.0.0.1:$AP\"|; s|^  workers: 2|  workers: 2\n  admin_token: file:$T/token|" "$T/sg.yaml"
sg_start "$T/sg.yaml"
tcp() { curl -sS --max-time 5 -o "$T/api.body" -w '%{http_code}' "$@"; }
[ "$(tcp http://127.0.0.1:$AP/healthz)" = 401 ] || fail "no token accepted"
[ "$(tcp -H 'Authorization: Bearer wrong' http://127.0.0.1:$AP/healthz)" = 401 ] || fail "wrong token accepted"
[ "$(tcp -H "Authorization: Bearer $(cat "$T/token")" http://127.0.0.1:$AP/healthz)" = 200 ] || fail "right token refused"
grep -rqF "$(cat "$T/token")" "$T/gw.log" "$T/audit.jsonl" && fail "the token reached a log"
ok "TCP admin requires the bearer token"
sg_stop
