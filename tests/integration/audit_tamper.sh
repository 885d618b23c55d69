#!/usr/bin/env bash
# The chain against a file written by the real gateway: it verifies as
# written, and every tamper case is named at its line: a changed byte, a
# removed line, two lines swapped, a forged line inserted, a tail cut
# mid-line, a wrong key, a missing file. Usage errors exit 2.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/tests/lib/aud_common.sh"
need curl openssl python3 jq

mkcerts api.example.test
upstream api --cert api.example.test
aud_key
aud_config "$T/sg.yaml" "  path: $T/audit.jsonl
  key: file:$T/audit.key"
sg_start "$T/sg.yaml"
for i in 1 2 3; do connect_ok; done
connect_denied 4
audit_wait 8 "$T/audit.jsonl"
sg_stop
A=$T/audit.jsonl
n=$(records "$A")
[ "$n" -ge 9 ] || fail "expected at least 9 records, got $n"
jq -e -s 'all(.[]; (.chain | test("^[0-9a-f]{64}$")))' "$A" >/dev/null ||
	fail "a record without a chain: $(cat "$A")"

verify_ok --key "file:$T/audit.key" "$A"
[ "$VOUT" = "$A: $n records, chain ok" ] || fail "verify output: $VOUT"
verify_ok -c "$T/sg.yaml" "$A"
case $VOUT in *"anchor ok"*) ;; *) fail "no anchor check with -c: $VOUT" ;; esac
ok "the gateway's file verifies ($n records)"

K=(--key "file:$T/audit.key")
C=$T/copy.jsonl

# a changed byte: one character of a host name on line 5
python3 - "$A" "$C" <<'PY'
import sys
lines = open(sys.argv[1], 'rb').read().split(b'\n')
l = lines[4]
i = l.index(b'"dst_host":"') + 13
lines[4] = l[:i] + (b'X' if l[i:i+1] != b'X' else b'Y') + l[i+1:]
open(sys.argv[2], 'wb').write(b'\n'.join(lines))
PY
verify_bad "$C:5: chain mismatch: the record was changed" "${K[@]}" "$C"
ok "changed byte -> line 5"

# a removed line
sed '4d' "$A" >"$C"
verify_bad "$C:4: seq 5 where 4 was expected: 1 record(s) missing" "${K[@]}" "$C"
ok "removed line -> line 4"

# two lines swapped
awk 'NR == 3 { h = $0; next } NR == 4 { print; print h; next } 1' "$A" >"$C"
verify_bad "$C:3: seq 4 where 3 was expected" "${K[@]}" "$C"
ok "swapped lines -> line 3"

# a forged line inserted: a plausible record with the next seq and a
# chain made with another key
python3 - "$A" "$C" <<'PY'
import hashlib, hmac, json, sys
lines = open(sys.argv[1]).read().splitlines()
prev = json.loads(lines[5])["chain"]
body = ('{"v":1,"seq":7,"ts":"2026-11-30T08:00:00.000000Z","event":"connection",'
        '"sandbox":"local","decision":"allow","reason":"rule_allow","rule":"api",'
        '"dst_host":"exfil.example"}')
mac = hmac.new(b"not-the-key-0123456789", (prev + body).encode(), hashlib.sha256).hexdigest()
lines.insert(6, body[:-1] + ',"chain":"%s"}' % mac)
open(sys.argv[2], 'w').write('\n'.join(lines) + '\n')
PY
verify_bad "$C:7: chain mismatch: the record was changed or forged" "${K[@]}" "$C"
ok "forged line -> line 7"

# the tail truncated mid-line
head -c $(($(stat -c %s "$A") - 30)) "$A" >"$C"
verify_bad "$C:$n: truncated record: the file ends mid-line" "${K[@]}" "$C"
ok "truncated tail -> line $n"

# a record removed from the end: only the anchor can tell
sed '$d' "$A" >"$C"
verify_ok "${K[@]}" "$C"
verify_bad "$C:$n: the chain ends at seq $((n - 1)) but the anchor" \
	--anchor "$T/audit.jsonl.head" "${K[@]}" "$C"
ok "removed last record -> detected with the anchor"

# the wrong key
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/other.key"
verify_bad "$A:1: chain mismatch: wrong key, or the first record was changed" \
	--key "file:$T/other.key" "$A"
ok "wrong key -> line 1"

# a missing file
verify_bad "$T/nope.jsonl: cannot open: No such file or directory" "${K[@]}" "$T/nope.jsonl"
ok "missing file"

# usage errors: exit 2
for args in "" "$A" "--key" "--bogus ${K[*]} $A" "-c $T/sg.yaml --key file:$T/audit.key $A"; do
	# shellcheck disable=SC2086
	"$SANDGATE" audit verify $args >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "audit verify $args: exit $rc, wanted 2"
done
"$SANDGATE" audit frobnicate >/dev/null 2>&1
[ $? -eq 2 ] || fail "audit frobnicate: wanted exit 2"
ok "usage errors exit 2"
