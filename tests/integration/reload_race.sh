#!/usr/bin/env bash
# Reloads in a loop (SIGHUP and POST /v1/reload) while clients open
# connections: every request succeeds, every connection is audited, and the
# gateway exits cleanly (under SAN=1: no leak, no use-after-free).
. "$(dirname "$0")/../lib/common.sh"
need curl openssl python3 jq

mkcerts api.example.test
upstream api --cert api.example.test
PP=$(freeport)
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP", admin: "unix:$T/admin.sock" }
  workers: 2
  resolver: { hosts: { api.example.test: [127.0.0.1] } }
audit: { path: $T/audit.jsonl }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow: [ { name: api, domains: [api.example.test], ports: [$UP_PORT] } ]
YAML
sg_start "$T/sg.yaml"

N=150
(
	for i in $(seq 1 40); do
		kill -HUP "$SG_PID"
		curl -s --max-time 5 --unix-socket "$T/admin.sock" -X POST http://x/v1/reload >/dev/null
		sleep 0.02
	done
) &
reloader=$!
seq 1 $N | xargs -P 8 -I{} curl -s --max-time 10 -o /dev/null -w '%{http_code}\n' \
	-x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" "https://api.example.test:$UP_PORT/r{}" \
	>"$T/codes"
wait $reloader
ok_n=$(grep -c '^200$' "$T/codes")
[ "$ok_n" -eq $N ] || fail "$ok_n of $N requests succeeded during reloads: $(sort "$T/codes" | uniq -c)"
reloads=$(jq -c 'select(.event == "policy_reload" and .decision == "allow")' "$T/audit.jsonl" | wc -l)
[ "$reloads" -ge 70 ] || fail "only $reloads reloads recorded"
sg_stop
n=$(jq -c 'select(.event == "connection" and .decision == "allow")' "$T/audit.jsonl" | wc -l)
[ "$n" -eq $N ] || fail "$n connection records for $N requests"
ok "$N requests during $reloads reloads: all served, all audited"
