#!/usr/bin/env bash
# sandgate run --gateway unix:PATH: attach to a running `sandgate serve`
# (its admin socket) instead of starting a gateway. The sandbox is
# registered there under its name while it runs and judged by that
# gateway's policy (an allowed request reaches the upstream, a denied one
# does not, both audited under the name), unregistered afterwards, and the
# gateway keeps running. A name that a live sandbox holds is refused; a
# stopped gateway makes the run fail with 125 and a clear message.
. "$(dirname "$0")/../lib/run_common.sh"
run_setup        # the suite's certificates, upstream, config (CFG) and WS
SOCK=$T/admin.sock
TP=$(freeport) DNSP=$(freeport)
# The suite's policy, served by a gateway of its own: listeners added.
if [ "$DNS" = 1 ]; then
	listen="transparent: \"[::]:$TP\", dns: \"[::]:$DNSP\", admin: \"unix:$SOCK\""
else
	listen="transparent: \"[::]:$TP\", admin: \"unix:$SOCK\""
fi
sed -i "s|^  workers: 1\$|&\n  listen: { $listen }|" "$CFG"
grep -q "^  listen: " "$CFG" || fail "config edit"
sg_start "$CFG"
api() { curl -sS --max-time 5 --unix-socket "$SOCK" -o "$T/api.body" -w '%{http_code}' "$@"; }
NAME=sgt-at$$

cat >"$WS/agent.sh" <<SH
#!/bin/sh
P=$API_PORT
curl -sS --max-time 10 --cacert /workspace/ca.pem --resolve api.example.test:\$P:203.0.113.7 \
	https://api.example.test:\$P/attached-allowed >/workspace/allowed 2>&1
if curl -sS --max-time 10 --cacert /workspace/ca.pem --resolve other.example.test:\$P:203.0.113.9 \
	https://other.example.test:\$P/attached-denied >/dev/null 2>&1; then echo reached; else echo refused; fi >/workspace/denied
touch /workspace/done
i=0; while [ ! -f /workspace/go ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i+1)); done
exit 3
SH
chmod +x "$WS/agent.sh"

"$SANDGATE" run -v -c "$CFG" --gateway "unix:$SOCK" --backend container --sandbox "$NAME" \
	--workspace "$WS" -- /workspace/agent.sh >"$T/run.out" 2>"$T/run.err" &
RUN=$!; RUN_PIDS+=($RUN)
for _ in $(seq 1 400); do [ -f "$WS/done" ] && break; kill -0 $RUN 2>/dev/null || break; sleep 0.05; done
[ -f "$WS/done" ] || fail "the sandbox did not run: $(cat "$T/run.err")"
ID=$(run_id "$T/run.err"); RUN_IDS+=("$ID")
# While it runs: registered with the running gateway, as a sandgate run.
[ "$(api http://x/v1/sandboxes)" = 200 ] || fail "GET /v1/sandboxes: $(cat "$T/api.body")"
jq -e --arg n "$NAME" '.sandboxes[] | select(.name == $n and .labels.runner == "sandgate-run"
	and .labels.backend == "container" and (.addresses | length) == 2)' "$T/api.body" >/dev/null ||
	fail "$NAME is not registered while it runs: $(cat "$T/api.body")"
touch "$WS/go"
wait $RUN; rc=$?
[ $rc = 3 ] || fail "exit status $rc, want CMD's 3: $(cat "$T/run.err")"
grep -q "gateway pid" "$T/run.err" && fail "the run started a gateway of its own"
[ "$(cat "$WS/allowed")" = "hello from api" ] || fail "allowed request: $(cat "$WS/allowed")"
grep -q '"path": "/attached-allowed"' "$API_LOG" || fail "the allowed request did not reach the upstream"
ok "attached: an allowed request reaches the upstream"
[ "$(cat "$WS/denied")" = refused ] || fail "the denied request was answered"
grep -q '"path": "/attached-denied"' "$API_LOG" && fail "the denied request reached the upstream"
ok "attached: a denied request never reaches the upstream"
audit_has "$A" '.event == "connection" and .sandbox == "'"$NAME"'" and .decision == "allow" and .dst_host == "api.example.test"'
audit_has "$A" '.event == "connection" and .sandbox == "'"$NAME"'" and .decision == "deny" and .dst_host == "other.example.test"'
ok "the serve's audit log has the run's records under its sandbox name"
[ "$(api http://x/v1/sandboxes)" = 200 ] || fail "GET /v1/sandboxes after the run"
jq -e --arg n "$NAME" '[.sandboxes[] | select(.name == $n)] | length == 0' "$T/api.body" >/dev/null ||
	fail "$NAME is still registered after the run: $(cat "$T/api.body")"
kill -0 $SG_PID 2>/dev/null || fail "the attached gateway stopped with the run"
[ "$(api http://x/healthz)" = 200 ] || fail "the gateway does not answer after the run"
assert_gone "$ID"
ok "after the run: unregistered, the gateway still serves, nothing of the run remains"

# A name a live sandbox holds is not taken over (and later deleted) by a run.
[ "$(api -X POST -H 'Content-Type: application/json' \
	-d '{"name":"sgt-held'$$'","addresses":["10.99.0.2"],"labels":{"team":"x"}}' \
	http://x/v1/sandboxes)" = 201 ] || fail "registering sgt-held: $(cat "$T/api.body")"
"$SANDGATE" run -c "$CFG" --gateway "unix:$SOCK" --sandbox "sgt-held$$" -- true 2>"$T/held.err"
rc=$?
[ $rc = 125 ] || fail "a run under a registered name exited $rc: $(cat "$T/held.err")"
grep -q "already registered" "$T/held.err" || fail "no clear message: $(cat "$T/held.err")"
api http://x/v1/sandboxes >/dev/null
jq -e '.sandboxes[] | select(.name == "sgt-held'$$'" and .labels.team == "x")' "$T/api.body" >/dev/null ||
	fail "the other sandbox's registration was replaced or removed: $(cat "$T/api.body")"
ok "a name registered by someone else is refused (125), their entry untouched"

# An entry a crashed run left (its PID gone) is replaced, then removed.
sh -c 'exit 0' & dead=$!; wait $dead
[ "$(api -X POST -H 'Content-Type: application/json' \
	-d '{"name":"sgt-stale'$$'","addresses":["10.99.0.3"],"labels":{"runner":"sandgate-run","pid":"'$dead'"}}' \
	http://x/v1/sandboxes)" = 201 ] || fail "registering sgt-stale: $(cat "$T/api.body")"
"$SANDGATE" run -c "$CFG" --gateway "unix:$SOCK" --sandbox "sgt-stale$$" -- true 2>"$T/stale.err" ||
	fail "a run under a crashed run's name failed: $(cat "$T/stale.err")"
api http://x/v1/sandboxes >/dev/null
jq -e '[.sandboxes[] | select(.name == "sgt-stale'$$'")] | length == 0' "$T/api.body" >/dev/null ||
	fail "the stale entry remains: $(cat "$T/api.body")"
ok "an entry left by a crashed run (PID gone) is replaced and removed"

# The gateway is gone: nothing to attach to.
sg_stop
"$SANDGATE" run -c "$CFG" --gateway "unix:$SOCK" --sandbox "$NAME" -- true 2>"$T/down.err"
rc=$?
[ $rc = 125 ] || fail "with no gateway: exit $rc, want 125: $(cat "$T/down.err")"
grep -q "$SOCK" "$T/down.err" && grep -qi "not answering\|no gateway\|cannot reach" "$T/down.err" ||
	fail "no clear message when the gateway is down: $(cat "$T/down.err")"
ok "no gateway running: exit 125, \"$(head -1 "$T/down.err")\""
