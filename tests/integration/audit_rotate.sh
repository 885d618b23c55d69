#!/usr/bin/env bash
# Rotation: by size (audit.rotate) and on SIGUSR1 after an external rename
# (logrotate). Each new file opens with an audit_rotate record that links
# the chain; the set verifies across files, the newest alone, and with
# `-c` (anchor). A dropped middle file, a dropped last file and removed
# tail records are each reported.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/tests/lib/aud_common.sh"
need curl openssl python3 jq

mkcerts api.example.test
upstream api --cert api.example.test
aud_key
A=$T/audit.jsonl
aud_config "$T/sg.yaml" "  path: $A
  key: file:$T/audit.key
  rotate: { size: 8k, keep: 3 }"
sg_start "$T/sg.yaml"
connect_ok
connect_denied 90
connect_ok
for i in $(seq 1 100); do [ -f "$A.3" ] && break; sleep 0.05; done
[ -f "$A.3" ] || fail "no rotation: $(ls "$T")"
[ ! -e "$A.4" ] || fail "keep: 3 kept a fourth file"
for f in "$A.3" "$A.2" "$A.1"; do
	[ "$(stat -c %s "$f")" -le 8192 ] || fail "$f is over 8k"
done
jq -e -s '.[0] | .event == "audit_rotate" and .reason == "size" and
	.prev_file == "audit.jsonl.1" and (.prev_seq | type) == "number" and
	(.prev_chain | test("^[0-9a-f]{64}$"))' "$A" >/dev/null ||
	fail "the new file does not open with audit_rotate: $(head -1 "$A")"
# the link is the previous file's last record
last1=$(tail -1 "$A.1")
jq -e -s --argjson p "$last1" '.[0].prev_seq == $p.seq and .[0].prev_chain == $p.chain' "$A" \
	>/dev/null || fail "audit_rotate does not link to the end of audit.jsonl.1"
ok "size rotation: 3 files kept, each linked"

# SIGUSR1 after an external rename (what logrotate does)
mv "$A" "$T/archived.jsonl"
kill -USR1 "$SG_PID"
for i in $(seq 1 100); do [ -s "$A" ] && break; sleep 0.02; done
jq -e -s '.[0] | .event == "audit_rotate" and .reason == "reopen" and
	.prev_file == "archived.jsonl"' "$A" >/dev/null ||
	fail "after SIGUSR1: $(head -1 "$A" 2>/dev/null)"
connect_ok
sg_stop
ok "SIGUSR1 starts a new file linked to the renamed one"

K=(--key "file:$T/audit.key")
ALL=("$A.3" "$A.2" "$A.1" "$T/archived.jsonl" "$A")
verify_ok "${K[@]}" "${ALL[@]}"
verify_ok -c "$T/sg.yaml" "${ALL[@]}"
case $VOUT in *"anchor ok"*) ;; *) fail "no anchor ok: $VOUT" ;; esac
verify_ok "${K[@]}" "$A"                  # the newest alone
verify_ok "${K[@]}" "$A.2"                # any rotated file alone
ok "the set verifies across files, and each file alone"

verify_bad "$A.1:1: does not follow $A.3" "${K[@]}" "$A.3" "$A.1" "$T/archived.jsonl" "$A"
ok "a dropped middle file is named"
verify_bad "$A.3:1: does not follow $A.2" "${K[@]}" "$A.2" "$A.3" "$A.1" "$T/archived.jsonl" "$A"
ok "files out of order are named"

# The last file dropped: invisible to the chain alone, caught by the anchor.
verify_ok "${K[@]}" "$A.3" "$A.2" "$A.1" "$T/archived.jsonl"
verify_bad "the newest file or its last" -c "$T/sg.yaml" "$A.3" "$A.2" "$A.1" "$T/archived.jsonl"
ok "a dropped last file is caught by the anchor (-c)"

# Tail records removed from the newest file: the same.
cp "$A" "$T/keep.jsonl"
sed -i '$d' "$A"
verify_ok "${K[@]}" "${ALL[@]}"
verify_bad "the chain ends at seq" -c "$T/sg.yaml" "${ALL[@]}"
cp "$T/keep.jsonl" "$A"
ok "removed tail records are caught by the anchor"

# -c without FILEs finds PATH.N ... PATH.1 PATH itself (archived.jsonl is
# outside that naming, so its absence breaks the link from audit.jsonl).
verify_bad "$A:1: does not follow $A.1" -c "$T/sg.yaml"
# renumber as if the gateway had rotated the archived file itself
mv "$A.3" "$A.4"; mv "$A.2" "$A.3"; mv "$A.1" "$A.2"; mv "$T/archived.jsonl" "$A.1"
verify_ok -c "$T/sg.yaml"
case $VOUT in "$A.4 $A.3 $A.2 $A.1 $A: "*"anchor ok"*) ;; *) fail "-c found: $VOUT" ;; esac
rm "$A.2"
verify_bad "$A.2: cannot open" -c "$T/sg.yaml"
ok "-c alone verifies PATH.N..PATH and names a missing number"
