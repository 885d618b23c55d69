#!/usr/bin/env bash
# Transparent listener, bulk data: 100 MiB down and 100 MiB up through the
# relay (TLS passthrough) arrive unchanged, and the audit record counts them.
. "$(dirname "$0")/../lib/common.sh"
need_root
need curl openssl python3 jq nft ip sha256sum

MIB=100
SIZE=$((MIB * 1024 * 1024))
mkcerts api.example.test
upstream bulk --cert api.example.test
TP=$(freeport)
FAKE=203.0.113.7

netns_make bulk
nft_redirect "$TP"

cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
  limits: { handshake_timeout: 1s }
audit: { path: $T/audit.jsonl }
sandboxes:
  sbx-bulk:
    sources: [$NS_NET4]
    allow:
      - { name: bulk, domains: [api.example.test], ports: [$UP_PORT] }
default: deny
YAML
sg_start "$T/sg.yaml"
A=$T/audit.jsonl
CA=$T/certs/ca.pem
CURL=(ip netns exec "$NS" curl -sS --max-time 25 --cacert "$CA"
	--resolve "api.example.test:$UP_PORT:$FAKE")

head -c "$SIZE" /dev/urandom >"$T/big.bin"
want=$(sha256sum "$T/big.bin" | cut -d' ' -f1)

# --- download
t0=$SECONDS
"${CURL[@]}" -o "$T/down.bin" -w '%{local_port}\n' "https://api.example.test:$UP_PORT/file/big.bin" \
	>"$T/down.port" 2>"$T/down.err" || fail "download: curl failed: $(cat "$T/down.err")"
got=$(sha256sum "$T/down.bin" | cut -d' ' -f1)
[ "$(stat -c %s "$T/down.bin")" -eq "$SIZE" ] || fail "download: $(stat -c %s "$T/down.bin") bytes, wanted $SIZE"
[ "$got" = "$want" ] || fail "download: SHA-256 $got, wanted $want"
audit_has "$A" '.event == "connection" and .decision == "allow" and .rule == "bulk"
	and ((.src // "") | endswith(":'"$(cat "$T/down.port")"'")) and .bytes_down >= '"$SIZE"
ok "$MIB MiB download arrived intact ($((SECONDS - t0)) s)"
rm -f "$T/down.bin"

# --- upload
t0=$SECONDS
"${CURL[@]}" -X POST -H 'Expect:' -T "$T/big.bin" -o "$T/up.out" -w '%{local_port}\n' \
	"https://api.example.test:$UP_PORT/upload" >"$T/up.port" 2>"$T/up.err" ||
	fail "upload: curl failed: $(cat "$T/up.err")"
[ "$(cat "$T/up.out")" = "hello from bulk" ] || fail "upload: response '$(cat "$T/up.out")'"
jq -e --arg h "$want" --argjson n "$SIZE" \
	'select(.method == "POST" and .path == "/upload" and .body_len == $n and .body_sha256 == $h)' \
	"$UP_LOG" >/dev/null || fail "upload: upstream got $(jq -c 'select(.path == "/upload") | [.body_len, .body_sha256]' "$UP_LOG"), wanted [$SIZE, $want]"
audit_has "$A" '.event == "connection" and .decision == "allow" and .rule == "bulk"
	and ((.src // "") | endswith(":'"$(cat "$T/up.port")"'")) and .bytes_up >= '"$SIZE"
ok "$MIB MiB upload arrived intact ($((SECONDS - t0)) s)"

sg_stop
