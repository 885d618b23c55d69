#!/usr/bin/env bash
# make demo: an "agent" runs in a sandbox network namespace whose only way
# out is sandgate (nftables redirects every TCP connection to the
# transparent listener). It reaches an allowed API, is refused elsewhere,
# and then we read the audit trail. Everything stays on this machine:
# the "internet" is two local HTTPS servers with made-up names.
set -u
. "$(dirname "$0")/../tests/lib/common.sh"
need curl openssl python3 jq nft ip
[ "$(id -u)" = 0 ] || { echo "make demo needs root (it creates a network namespace)"; exit 1; }
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

bold "1. Two upstream HTTPS servers on loopback: api.example.test (allowed) and paste.example.test (not)"
mkcerts api.example.test paste.example.test
upstream api --cert api.example.test;   API_PORT=$UP_PORT API_LOG=$UP_LOG
upstream paste --cert paste.example.test; PASTE_PORT=$UP_PORT
echo "api.example.test   -> 127.0.0.1:$API_PORT"
echo "paste.example.test -> 127.0.0.1:$PASTE_PORT"

TP=$(freeport)
cat >"$T/sandgate.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP" }
  workers: 1
  resolver:
    hosts:                         # the operator's own answers for the demo names
      api.example.test: [127.0.0.1]
      paste.example.test: [127.0.0.1]
  limits: { handshake_timeout: 2s }
audit: { path: $T/audit.jsonl, fsync: batch }
floor:
  deny:
    - { name: no-metadata, cidrs: [169.254.0.0/16] }
sandboxes:
  "agent-*":
    sources: [10.231.0.0/16]
    allow:
      - { name: api, domains: [api.example.test], ports: [$API_PORT] }
    deny:
      - { name: no-paste, domains: ["**.example.test"] }
default: deny
YAML
bold "2. The policy"
sed 's/^/    /' "$T/sandgate.yaml"
"$SANDGATE" policy check "$T/sandgate.yaml" || exit 1

bold "3. sandgate serve, and a sandbox namespace redirected to it"
sg_start "$T/sandgate.yaml"
netns_make d 10.231.0 fd42:231:0
nft_redirect "$TP"
echo "sandbox $NS: $NS_V4 / $NS_V6, every TCP connection -> sandgate :$TP, all else dropped"

bold "4. The agent's script runs inside the sandbox"
cat >"$T/agent.sh" <<SH
set -x
curl -sS --max-time 5 --cacert $T/certs/ca.pem \
  --resolve api.example.test:$API_PORT:203.0.113.10 https://api.example.test:$API_PORT/v1/chat?token=secret
curl -sS --max-time 5 --cacert $T/certs/ca.pem \
  --resolve paste.example.test:$PASTE_PORT:203.0.113.11 https://paste.example.test:$PASTE_PORT/upload || echo "   -> refused"
curl -sS --max-time 5 -k https://203.0.113.12:$API_PORT/ || echo "   -> refused (no name, no CIDR rule)"
SH
ip netns exec "$NS" bash "$T/agent.sh" 2>&1 | sed 's/^/    /'
echo "    (the agent dialled made-up addresses; sandgate connected to what IT resolved)"
echo "    upstream api saw: $(jq -c '{method, path, sni}' "$API_LOG")"

bold "5. The audit trail (one JSON line per decision)"
sg_stop
jq -r '[.seq, .event, (.sandbox // "-"), .decision, .reason, (.rule // "-"), (.dst_host // .dst_ip // "-")] | @tsv' \
	"$T/audit.jsonl" | column -t | sed 's/^/    /'
echo
echo "    a full record:"
jq -c 'select(.decision == "allow" and .event == "connection")' "$T/audit.jsonl" | head -1 | sed 's/^/    /'
bold "done: allowed, denied and audited; namespace and nft table removed"
