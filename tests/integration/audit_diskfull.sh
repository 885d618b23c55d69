#!/usr/bin/env bash
# Disk full, on a 256 KiB tmpfs. on_failure: deny refuses new connections
# while records cannot be written and serves again once space is freed;
# on_failure: allow keeps serving. Either way every record that was queued
# reaches the file and the chain still verifies.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/tests/lib/aud_common.sh"
need curl openssl python3 jq dd
[ "$(id -u)" = 0 ] || skip "needs root (mounts a tmpfs)"

D=$T/disk
mkdir -p "$D"
mount -t tmpfs -o size=256k,mode=0700 sgt-audit "$D" || skip "cannot mount a tmpfs here"
# The gateway must be gone before the unmount; then the usual cleanup.
aud_cleanup() {
	[ -n "${SG_PID:-}" ] && kill "$SG_PID" 2>/dev/null && wait "$SG_PID" 2>/dev/null
	umount "$D" 2>/dev/null || umount -l "$D" 2>/dev/null
	cleanup
}
trap aud_cleanup EXIT

mkcerts api.example.test
upstream api --cert api.example.test
aud_key
A=$D/audit.jsonl

# fill_disk - until the audit writer fails: fill the tmpfs, then make
# denied CONNECTs (each one a record) until one is refused. Sets N403.
fill_disk() {
	local i code
	dd if=/dev/zero of="$D/filler" bs=4k count=1000 2>/dev/null
	N403=0
	for i in $(seq 1 60); do
		code=$(http_code)
		if [ "$code" = 403 ]; then
			N403=$((N403 + 1))
		elif [ "$1" = deny ] && [ "$code" = 000 ]; then
			return 0
		fi
		if [ "$1" = allow ] && grep -q "audit: write $A: No space left" "$T/gw.log"; then
			return 0
		fi
		sleep 0.05
	done
	fail "the audit writer never failed on a full disk: $(df -k "$D" | tail -1)"
}

wait_log() {
	local i
	for i in $(seq 1 100); do grep -q "$1" "$T/gw.log" && return 0; sleep 0.05; done
	fail "no '$1' in the gateway log"
}

# ---- on_failure: deny
aud_config "$T/deny.yaml" "  path: $A
  key: file:$T/audit.key
  on_failure: deny"
sg_start "$T/deny.yaml"
connect_ok
fill_disk deny
grep -q "audit: write $A: No space left on device" "$T/gw.log" || fail "no write error logged"
for i in 1 2 3; do
	[ "$(http_code)" = 000 ] || fail "a new connection was served while the audit disk is full"
done
ok "disk full with on_failure: deny: new connections refused ($N403 served before the writer failed)"

rm -f "$D/filler"
wait_log "audit: writing again"
[ "$(http_code)" = 403 ] || fail "not serving again after space was freed"
connect_ok
sg_stop
ok "space freed: serving again"
# every 403 above has its record (they were queued, not dropped)
n=$(jq -c 'select(.dst_host == "probe.example.test")' "$A" | wc -l)
[ "$n" -eq $((N403 + 1)) ] || fail "$n probe records, wanted $((N403 + 1))"
before=$n
verify_ok -c "$T/deny.yaml" "$A"
ok "the chain verifies across the outage: $VOUT"

# ---- on_failure: allow
aud_config "$T/allow.yaml" "  path: $A
  key: file:$T/audit.key
  on_failure: allow"
: >"$T/gw.log"
sg_start "$T/allow.yaml"
fill_disk allow
for i in 1 2 3; do
	[ "$(http_code)" = 403 ] || fail "on_failure: allow stopped serving"
done
rm -f "$D/filler"
wait_log "audit: writing again"
connect_ok
sg_stop
n=$(jq -c 'select(.dst_host == "probe.example.test")' "$A" | wc -l)
[ "$n" -eq $((before + N403 + 3)) ] || fail "$n probe records, wanted $((before + N403 + 3))"
verify_ok -c "$T/allow.yaml" "$A"
ok "disk full with on_failure: allow: kept serving, nothing lost, chain ok"
