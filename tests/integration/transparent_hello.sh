#!/usr/bin/env bash
# Transparent listener: what the ClientHello peek does with awkward hellos.
# No SNI -> tls_no_sni; a hello one byte per TCP segment, or re-packed into
# many TLS records -> still parsed and allowed; ECH -> tls_ech; bytes that
# are neither TLS nor HTTP -> no_hostname; a truncated hello or nothing at
# all -> closed after handshake_timeout; a hello over 16 KiB -> tls_bad_hello.
. "$(dirname "$0")/../lib/common.sh"
need_root
need curl openssl python3 jq nft ip

# The one-byte-per-segment hello (517 bytes, 1 ms apart) must fit in the
# handshake timeout with room to spare on a loaded machine: 2 s.
HT=2
mkcerts api.example.test
upstream api --cert api.example.test
TP=$(freeport)
FAKE=203.0.113.7

netns_make hello
nft_redirect "$TP"

cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
  limits: { handshake_timeout: ${HT}s }
audit: { path: $T/audit.jsonl }
sandboxes:
  sbx-hello:
    sources: [$NS_NET4]
    allow:
      - { name: api, domains: [api.example.test], ports: [$UP_PORT] }
default: deny
YAML
sg_start "$T/sg.yaml"
A=$T/audit.jsonl
CA=$T/certs/ca.pem
TC="python3 $TOP/tests/lib/tls_client.py"
nreq() { wc -l <"$UP_LOG"; }
# the audit record of the connection from local port $1
rec() { echo '((.src // "") | endswith(":'"$1"'")) and .sandbox == "sbx-hello"'; }
lport() { sed -n 's/^local port //p' "$1"; }

# get NAME ARGS... - tls_client get through the gateway, body in $T/NAME.out
get() {
	local n=$1; shift
	ip netns exec "$NS" $TC get "$FAKE" "$UP_PORT" --cafile "$CA" "$@" \
		>"$T/$n.out" 2>"$T/$n.err"
}
# raw KIND [ARGS] - tls_client raw through the gateway, sets R (its JSON)
raw() {
	R=$(ip netns exec "$NS" $TC raw "$FAKE" "$UP_PORT" "$@") || fail "tls_client raw $*"
}
jr() { jq -r "$1" <<<"$R"; }

# --- baseline: an ordinary hello with SNI
get base --sni api.example.test --path /base || fail "baseline: $(cat "$T/base.err")"
[ "$(cat "$T/base.out")" = "hello from api" ] || fail "baseline body: $(cat "$T/base.out")"
audit_has "$A" "$(rec "$(lport "$T/base.err")") and .decision == \"allow\" and .sni == \"api.example.test\""
ok "baseline hello allowed"

# --- no SNI
n0=$(nreq)
get nosni --no-sni --path /nosni && fail "hello without SNI: allowed: $(cat "$T/nosni.out")"
audit_has "$A" "$(rec "$(lport "$T/nosni.err")") and .event == \"connection\" and .decision == \"deny\"
	and .reason == \"tls_no_sni\" and .sni == null and .rule == null"
# openssl s_client, the other common way to leave SNI out
echo | ip netns exec "$NS" timeout 10 openssl s_client -noservername -CAfile "$CA" \
	-connect "$FAKE:$UP_PORT" >"$T/sclient.out" 2>&1 </dev/null
grep -q 'BEGIN CERTIFICATE' "$T/sclient.out" ||
	! grep -q 'no peer certificate available' "$T/sclient.out" &&
	fail "openssl s_client -noservername got a certificate: $(cat "$T/sclient.out")"
# (the record is written before the connection is closed)
[ "$(jq -c 'select(.reason == "tls_no_sni")' "$A" | wc -l)" -ge 2 ] ||
	fail "openssl s_client -noservername: no second tls_no_sni record: $(cat "$A")"
[ "$(nreq)" -eq "$n0" ] || fail "a hello without SNI reached the upstream: $(tail -n 1 "$UP_LOG")"
ok "hello without SNI denied (tls_no_sni)"

# --- one byte per TCP segment
get bytes --sni api.example.test --split bytes --delay 0.001 --path /bytes ||
	fail "hello one byte per segment: $(cat "$T/bytes.err")"
[ "$(cat "$T/bytes.out")" = "hello from api" ] || fail "bytewise body: $(cat "$T/bytes.out")"
jq -e 'select(.path == "/bytes" and .sni == "api.example.test")' "$UP_LOG" >/dev/null ||
	fail "bytewise hello: upstream did not see it: $(cat "$UP_LOG")"
audit_has "$A" "$(rec "$(lport "$T/bytes.err")") and .decision == \"allow\" and .rule == \"api\"
	and .sni == \"api.example.test\" and .alpn == \"http/1.1\" and .dst_ip == \"127.0.0.1\" and .bytes_down > 0"
ok "hello sent one byte per segment allowed ($(grep -o 'sent [0-9]* hello bytes' "$T/bytes.err"))"

# --- the hello re-packed into 50-byte TLS records
get recs --sni api.example.test --split records --record-size 50 --path /records ||
	fail "hello in 50-byte records: $(cat "$T/recs.err")"
[ "$(cat "$T/recs.out")" = "hello from api" ] || fail "records body: $(cat "$T/recs.out")"
jq -e 'select(.path == "/records" and .sni == "api.example.test")' "$UP_LOG" >/dev/null ||
	fail "multi-record hello: upstream did not see it: $(cat "$UP_LOG")"
audit_has "$A" "$(rec "$(lport "$T/recs.err")") and .decision == \"allow\" and .rule == \"api\"
	and .sni == \"api.example.test\" and .alpn == \"http/1.1\""
ok "hello split over many TLS records allowed ($(grep -o 'as [0-9]* records' "$T/recs.err"))"

# --- the hand-made hello without ECH is allowed (so the ECH case below is
# denied for ECH and nothing else)
raw plain-hello --wait 1
[ "$(jr .received)" -gt 0 ] || fail "hand-made hello: the upstream did not answer: $R"
audit_has "$A" "$(rec "$(jr .local)") and .decision == \"allow\" and .sni == \"api.example.test\""
ok "hand-made hello without ECH allowed, the upstream answered"

# --- ECH
n0=$(nreq)
raw ech --wait 3
[ "$(jr .closed)" = true ] && [ "$(jr .received)" -eq 0 ] || fail "ECH hello: not closed without an answer: $R"
audit_has "$A" "$(rec "$(jr .local)") and .decision == \"deny\" and .reason == \"tls_ech\" and .rule == null"
ok "ECH hello denied (tls_ech)"

# --- neither TLS nor HTTP
raw garbage --wait 3
[ "$(jr .closed)" = true ] && [ "$(jr .received)" -eq 0 ] || fail "garbage: not closed without an answer: $R"
awk -v e="$(jr .elapsed)" -v h=$HT 'BEGIN { exit !(e < h - 0.5) }' ||
	fail "garbage: closed only after $(jr .elapsed) s, it needs no timeout"
audit_has "$A" "$(rec "$(jr .local)") and .decision == \"deny\" and .reason == \"no_hostname\" and .tls == \"none\""
ok "opaque bytes denied (no_hostname)"

# --- over 16 KiB of hello
raw oversized --wait 3
[ "$(jr .closed)" = true ] && [ "$(jr .received)" -eq 0 ] || fail "oversized hello: not closed without an answer: $R"
audit_has "$A" "$(rec "$(jr .local)") and .decision == \"deny\" and .reason == \"tls_bad_hello\""
ok "17 KiB hello denied (tls_bad_hello)"

# --- a truncated hello, then silence; and nothing at all (both at once)
ip netns exec "$NS" $TC raw "$FAKE" "$UP_PORT" truncated --wait $((HT + 3)) >"$T/trunc.json" &
p1=$!
ip netns exec "$NS" $TC raw "$FAKE" "$UP_PORT" silent --wait $((HT + 3)) >"$T/silent.json" &
p2=$!
wait $p1 || fail "tls_client raw truncated"
wait $p2 || fail "tls_client raw silent"
for k in trunc silent; do
	R=$(cat "$T/$k.json")
	[ "$(jr .closed)" = true ] && [ "$(jr .received)" -eq 0 ] || fail "$k: not closed without an answer: $R"
	awk -v e="$(jr .elapsed)" -v h=$HT 'BEGIN { exit !(e >= h - 0.2 && e < h + 1.5) }' ||
		fail "$k: closed after $(jr .elapsed) s, handshake_timeout is $HT s"
	audit_has "$A" "$(rec "$(jr .local)") and .decision == \"deny\" and .reason == \"handshake_timeout\""
done
ok "truncated hello and silent client closed after handshake_timeout"

[ "$(nreq)" -eq 3 ] || fail "upstream saw $(nreq) requests, wanted 3 (base, bytes, records): $(cat "$UP_LOG")"
sg_stop
