#!/usr/bin/env bash
# POST /v1/sandboxes/NAME/stop (what a secret violation with block_and_kill
# does): from that moment the gateway refuses the sandbox's connections and
# DNS queries (reason sandbox_stopped, in enforce and audit mode alike),
# audits a sandbox_stop deny with the reason, and a waiter on
# GET /v1/sandboxes/NAME/wait is answered; bad requests get clear errors.
. "$(dirname "$0")/../lib/common.sh"
need curl openssl python3 jq dig

mkcerts api.example.test
upstream api --cert api.example.test
PP=$(freeport) DP=$(freeport)
SOCK=$T/admin.sock
A=$T/audit.jsonl
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP", dns: "127.0.0.1:$DP", admin: "unix:$SOCK" }
  workers: 2
  resolver: { hosts: { api.example.test: [127.0.0.1] } }
audit: { path: $A }
sandboxes:
  "agent-*":
    mode: audit
    allow:
      - { name: api, domains: [api.example.test], ports: [$UP_PORT] }
default: deny
YAML
sg_start "$T/sg.yaml"
api() { curl -sS --max-time 5 --unix-socket "$SOCK" -o "$T/api.body" -w '%{http_code}' "$@"; }
get() { curl -s --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
	"https://api.example.test:$UP_PORT/$1"; }

code=$(api -X POST -d '{"name":"agent-1","addresses":["127.0.0.1"]}' http://x/v1/sandboxes)
[ "$code" = 201 ] || fail "register: $code $(cat "$T/api.body")"
jq -e '.stopped == null' "$T/api.body" >/dev/null || fail "a new entry is stopped: $(cat "$T/api.body")"
[ "$(get before)" = "hello from api" ] || fail "registered sandbox not allowed"
dig +short +time=2 +tries=1 -p "$DP" @127.0.0.1 api.example.test A >"$T/dig1" 2>&1
grep -qx 127.0.0.1 "$T/dig1" || fail "DNS before the stop: $(cat "$T/dig1")"
ok "registered, allowed, resolving"

# A control: a CONNECT tunnel carries two requests while nothing is stopped.
python3 "$(dirname "$0")/../lib/px_client.py" tunnel "$PP" api.example.test "$UP_PORT" \
	--cafile "$T/certs/ca.pem" --go "$T/go0" >"$T/tun0.out" 2>&1 &
TUN0=$!; PIDS+=($TUN0)
for _ in $(seq 1 100); do grep -q ready "$T/tun0.out" && break; sleep 0.05; done
touch "$T/go0"; wait $TUN0
tail -1 "$T/tun0.out" | jq -e '.second[0] == 200' >/dev/null || fail "control tunnel: $(cat "$T/tun0.out")"
# The tunnel that will be open when the sandbox is stopped.
python3 "$(dirname "$0")/../lib/px_client.py" tunnel "$PP" api.example.test "$UP_PORT" \
	--cafile "$T/certs/ca.pem" --go "$T/go1" >"$T/tun1.out" 2>&1 &
TUN1=$!; PIDS+=($TUN1)
for _ in $(seq 1 100); do grep -q ready "$T/tun1.out" && break; sleep 0.05; done
grep -q ready "$T/tun1.out" || fail "tunnel did not open: $(cat "$T/tun1.out")"
ok "an open tunnel carries requests (control)"

# A waiter, held open until the stop.
curl -sS --max-time 20 --unix-socket "$SOCK" -o "$T/wait.body" -w '%{http_code}' \
	http://x/v1/sandboxes/agent-1/wait >"$T/wait.code" 2>&1 &
WAITER=$!; PIDS+=($WAITER)
sleep 0.5
kill -0 $WAITER 2>/dev/null || fail "the waiter was answered before any stop: $(cat "$T/wait.code") $(cat "$T/wait.body")"
ok "a waiter is held while the sandbox runs"

for bad in '{"reason":"Has Spaces"}' '{"reason":1}' '{"why":"x"}' '[]' '{"reason":"'"$(printf 'a%.0s' $(seq 1 80))"'"}'; do
	code=$(api -X POST -d "$bad" http://x/v1/sandboxes/agent-1/stop)
	[ "$code" = 400 ] || fail "stop with $bad: $code $(cat "$T/api.body")"
done
[ "$(api -X POST http://x/v1/sandboxes/nobody/stop)" = 404 ] || fail "stop of an unknown sandbox: $(cat "$T/api.body")"
[ "$(api http://x/v1/sandboxes/agent-1/stop)" = 405 ] || fail "GET .../stop"
[ "$(api http://x/v1/sandboxes/agent-1/nonsense)" = 404 ] || fail "unknown sub-resource"
[ "$(api http://x/v1/sandboxes/nobody/wait)" = 404 ] || fail "wait for an unknown sandbox"
kill -0 $WAITER 2>/dev/null || fail "a bad stop request answered the waiter"
ok "bad stop requests refused with 400/404/405, nothing stopped"

code=$(api -X POST -d '{"reason":"secret_violation"}' http://x/v1/sandboxes/agent-1/stop)
[ "$code" = 200 ] || fail "stop: $code $(cat "$T/api.body")"
jq -e '.name == "agent-1" and .stopped == "secret_violation" and .stopped_at > 0' "$T/api.body" >/dev/null ||
	fail "stop answer: $(cat "$T/api.body")"
wait $WAITER
[ "$(cat "$T/wait.code")" = 200 ] && jq -e '.stopped == "secret_violation"' "$T/wait.body" >/dev/null ||
	fail "the waiter: $(cat "$T/wait.code") $(cat "$T/wait.body")"
ok "stop answers with the entry; the waiter is told within its tick"
audit_has "$A" '.event == "sandbox_stop" and .sandbox == "agent-1" and .decision == "deny" and .reason == "secret_violation"'
ok "sandbox_stop audited as a deny with the reason"

# The tunnel opened before the stop is closed by it.
touch "$T/go1"; wait $TUN1
tail -1 "$T/tun1.out" | jq -e 'has("second_error") and (has("second") | not)' >/dev/null ||
	fail "a tunnel opened before the stop still carried a request: $(cat "$T/tun1.out")"
audit_has "$A" '.event == "connection" and .sandbox == "agent-1" and .decision == "allow" and .closed_by == "sandbox_stopped" and .bytes_down > 0'
ok "connections open at the stop are closed (recorded as allowed, closed_by sandbox_stopped)"

# Registering the stopped name again would undo the stop: refused.
code=$(api -X POST -d '{"name":"agent-1","addresses":["127.0.0.1"]}' http://x/v1/sandboxes)
[ "$code" = 409 ] && grep -q "stopped by the gateway" "$T/api.body" ||
	fail "re-registering a stopped sandbox: $code $(cat "$T/api.body")"
ok "a stopped name cannot be registered again until it is deleted"

# Audit mode would only log a would_deny: a stopped sandbox is refused anyway.
get after >"$T/after.out" && fail "a stopped sandbox was allowed: $(cat "$T/after.out")"
grep -q '"path": "/after"' "$UP_LOG" && fail "a request of a stopped sandbox reached the upstream"
audit_has "$A" '.event == "connection" and .sandbox == "agent-1" and .decision == "deny" and .reason == "sandbox_stopped"'
dig +time=2 +tries=1 -p "$DP" @127.0.0.1 api.example.test A >"$T/dig2" 2>&1
grep -q "status: REFUSED" "$T/dig2" || fail "DNS of a stopped sandbox: $(cat "$T/dig2")"
audit_has "$A" '.event == "dns" and .sandbox == "agent-1" and .reason == "sandbox_stopped"'
ok "its connections and DNS queries are refused (sandbox_stopped), even in audit mode"

code=$(api -X POST -d '{"reason":"operator_stop"}' http://x/v1/sandboxes/agent-1/stop)
[ "$code" = 200 ] && jq -e '.stopped == "secret_violation"' "$T/api.body" >/dev/null ||
	fail "a second stop changed the reason: $(cat "$T/api.body")"
[ "$(api http://x/v1/sandboxes/agent-1)" = 200 ] && jq -e '.stopped == "secret_violation"' "$T/api.body" >/dev/null ||
	fail "GET one sandbox: $(cat "$T/api.body")"
[ "$(api http://x/v1/sandboxes/agent-1/wait)" = 200 ] || fail "wait on a stopped sandbox is not answered at once"
[ "$(jq -c 'select(.event == "sandbox_stop")' "$A" | wc -l)" = 1 ] || fail "a second stop was audited again"
ok "stop is idempotent (first reason kept); GET and wait show it"

# Unregistered: a waiter hears 410.
curl -sS --max-time 20 --unix-socket "$SOCK" -o "$T/w2.body" -w '%{http_code}' \
	-X POST -d '{"name":"agent-2","addresses":["127.0.0.2"]}' http://x/v1/sandboxes >/dev/null
curl -sS --max-time 20 --unix-socket "$SOCK" -o "$T/w2.body" -w '%{http_code}' \
	http://x/v1/sandboxes/agent-2/wait >"$T/w2.code" 2>&1 &
W2=$!; PIDS+=($W2)
sleep 0.3
[ "$(api -X DELETE http://x/v1/sandboxes/agent-2)" = 204 ] || fail "unregister agent-2"
wait $W2
[ "$(cat "$T/w2.code")" = 410 ] || fail "waiter on an unregistered sandbox: $(cat "$T/w2.code") $(cat "$T/w2.body")"
ok "a waiter on a sandbox that is unregistered gets 410"
sg_stop
