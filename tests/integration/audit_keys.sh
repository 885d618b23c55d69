#!/usr/bin/env bash
# The audit key: never in any file the gateway writes (records, rotated
# files, the anchor, the syslog copy, its log), nor in an error message,
# whatever went wrong. Without a key: a startup warning, records without
# any chain field, and verify says they are not tamper-evident.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/tests/lib/aud_common.sh"
need curl openssl python3 jq

mkcerts api.example.test
upstream api --cert api.example.test
KEYVAL="sgt-known-audit-key-$$-$RANDOM-0123456789abcdef"
export SGT_AUDIT_KEY=$KEYVAL
A=$T/out/audit.jsonl
mkdir -p "$T/out"
# a UDP sink for the syslog copy: whatever arrives is kept in a file
SINK=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
bg sink python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
with open(sys.argv[2], "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536) + b"\n")
' "$SINK" "$T/out/syslog.copy"

aud_config "$T/sg.yaml" "  path: $A
  key: env:SGT_AUDIT_KEY
  rotate: { size: 8k, keep: 2 }
  syslog: udp://127.0.0.1:$SINK"
"$SANDGATE" serve -c "$T/sg.yaml" --check >/dev/null || fail "--check with an env key"
sg_start "$T/sg.yaml" 2>/dev/null
connect_ok
connect_denied 40
kill -HUP "$SG_PID"                     # a reload: its record and log lines too
kill -USR1 "$SG_PID"
connect_ok
sg_stop
[ -f "$A.1" ] && [ -f "$A.head" ] || fail "expected rotated files and an anchor: $(ls "$T/out")"
[ -s "$T/out/syslog.copy" ] || fail "no syslog copy arrived"
verify_ok -c "$T/sg.yaml"

# error paths that handle the key, each with its message kept
printf 'short\n' >"$T/short.key"
sed "s|key: env:SGT_AUDIT_KEY|key: file:$T/short.key|" "$T/sg.yaml" >"$T/short.yaml"
"$SANDGATE" serve -c "$T/short.yaml" >"$T/out/err.short" 2>&1 && fail "a 5-byte key was accepted"
grep -q "too short" "$T/out/err.short" || fail "short key: $(cat "$T/out/err.short")"
"$SANDGATE" serve -c "$T/short.yaml" --check >"$T/out/err.check" 2>&1 && fail "--check took a short key"
SGT_AUDIT_KEY=tiny "$SANDGATE" serve -c "$T/sg.yaml" >"$T/out/err.env" 2>&1 &&
	fail "a 4-byte env key was accepted"
sed "s|key: env:SGT_AUDIT_KEY|key: \"$KEYVAL\"|" "$T/sg.yaml" >"$T/pasted.yaml"
"$SANDGATE" policy check "$T/pasted.yaml" >"$T/out/err.pasted" 2>&1 && fail "a pasted key was accepted"
grep -q "audit.key: expected file:PATH or env:NAME" "$T/out/err.pasted" ||
	fail "pasted key: $(cat "$T/out/err.pasted")"
sed "s|key: env:SGT_AUDIT_KEY|key: vault:audit|" "$T/sg.yaml" >"$T/vault.yaml"
"$SANDGATE" policy check "$T/vault.yaml" >"$T/out/err.vault" 2>&1 && fail "vault: was accepted"
grep -q "vault keys arrive with the vault" "$T/out/err.vault" || fail "vault: $(cat "$T/out/err.vault")"
printf '%s\n' "$KEYVAL-but-not-quite" >"$T/wrong.key"
"$SANDGATE" audit verify --key "file:$T/wrong.key" "$A" >"$T/out/err.verify" 2>&1 &&
	fail "verify with a wrong key passed"
ok "errors about the key say what is wrong"

cp "$T/gw.log" "$T/out/gw.log"
# $T/out holds every file the gateway and the commands wrote (records,
# rotated files, anchor, syslog copy, logs and error output); a prefix of
# the key is enough to count as a leak
hits=$(grep -rlF -- "${KEYVAL:0:24}" "$T/out" 2>/dev/null || true)
[ -z "$hits" ] || fail "part of the key value appears in: $hits"
ok "the key appears in none of $(find "$T/out" -type f | wc -l) files the gateway wrote"

# ---- without a key
aud_config "$T/nokey.yaml" "  path: $T/nokey.jsonl"
sg_start "$T/nokey.yaml"
connect_ok
sg_stop
grep -q "audit.key is not set: records are written without a hash chain and are NOT tamper-evident" \
	"$T/gw.log" || fail "no warning without a key"
jq -e -s 'length == 3 and all(.[]; has("chain") | not)' "$T/nokey.jsonl" >/dev/null ||
	fail "records without a key: $(cat "$T/nokey.jsonl")"
[ ! -e "$T/nokey.jsonl.head" ] || fail "an anchor without a key"
verify_bad "$T/nokey.jsonl:1: no chain field: this record was written without audit.key" \
	--key env:SGT_AUDIT_KEY "$T/nokey.jsonl"
ok "without a key: warned, no chain field, verify says not tamper-evident"
