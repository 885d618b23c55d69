#!/usr/bin/env bash
# Concurrent writers: two workers, many parallel CONNECTs (allowed and
# denied); every decision is recorded exactly once and the records of all
# workers form one valid chain with seq 1..N and no gap.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/tests/lib/aud_common.sh"
need curl openssl python3 jq xargs

mkcerts api.example.test
upstream api --cert api.example.test
aud_key
A=$T/audit.jsonl
WORKERS=2 aud_config "$T/sg.yaml" "  path: $A
  key: file:$T/audit.key
  fsync: batch"
sg_start "$T/sg.yaml"
grep -q "serving with 2 workers" "$T/gw.log" || fail "not 2 workers: $(cat "$T/gw.log")"

# 120 allowed and 120 denied CONNECTs, 16 at a time (8 + 8)
N=120
seq 1 $N | xargs -P 8 -I{} curl -s -o /dev/null --max-time 20 -x "http://127.0.0.1:$PP" \
	--cacert "$T/certs/ca.pem" "https://api.example.test:$UP_PORT/{}" &
xp=$!
seq 1 $N | xargs -P 8 -I{} curl -s -o /dev/null --max-time 20 -x "http://127.0.0.1:$PP" \
	"https://denied{}.example.test/" &
xd=$!
wait $xp $xd            # not a bare wait: the upstream and gateway run in the background too
sg_stop

[ "$(jq -c 'select(.event == "connection" and .decision == "allow")' "$A" | wc -l)" -eq $N ] ||
	fail "allowed records: $(jq -c 'select(.decision == "allow")' "$A" | wc -l), wanted $N"
[ "$(jq -c 'select(.event == "connection" and .decision == "deny")' "$A" | wc -l)" -eq $N ] ||
	fail "denied records: $(jq -c 'select(.decision == "deny")' "$A" | wc -l), wanted $N"
total=$(records "$A")
[ "$total" -eq $((2 * N + 2)) ] || fail "$total records, wanted $((2 * N + 2))"
jq -e -s '[.[].seq] == [range(1; length + 1)]' "$A" >/dev/null || fail "seq is not 1..N"
verify_ok -c "$T/sg.yaml" "$A"
[ "$VOUT" = "$A: $total records, chain ok, anchor ok" ] || fail "verify: $VOUT"
ok "$total records from 2 workers: one chain, seq 1..$total"
