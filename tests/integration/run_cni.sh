#!/usr/bin/env bash
# sandgate-cni by hand, as a runtime would call it after ptp: a namespace
# + veth made here stand in for what ptp made, a hand-written prevResult
# names its addresses, a gateway runs. After ADD: the prevResult comes back
# unchanged, the container's TCP is redirected and judged under the
# registered name (allowed reaches the upstream, denied does not), DNS goes
# to the gateway, CHECK passes. After DEL: no table, no registration, no
# egress; a second DEL succeeds; CHECK fails with CNI error JSON; ADD
# without prevResult is refused; VERSION answers.
. "$(dirname "$0")/../lib/common.sh"
need_root
need curl openssl python3 jq nft ip dig
CNI=$(dirname "$SANDGATE")/sandgate-cni
[ -x "$CNI" ] || fail "no $CNI (the Makefile links it next to the binary)"

mkcerts api.example.test other.example.test
upstream api --cert api.example.test
TP=$(freeport) DNSP=$(freeport)
A=$T/audit.jsonl
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP", dns: "[::]:$DNSP", admin: "unix:$T/admin.sock" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
      other.example.test: [127.0.0.1]
audit: { path: $A }
sandboxes:
  "cni-*":
    allow:
      - { name: api, domains: [api.example.test], ports: [$UP_PORT] }
default: deny
YAML
DNS=1
"$SANDGATE" serve -c "$T/sg.yaml" --check >/dev/null 2>&1 || {
	DNS=0; sed -i "s/, dns: \"\[::\]:$DNSP\"//" "$T/sg.yaml"
}
sg_start "$T/sg.yaml"

# What ptp would have made: the container's namespace, a veth, addresses.
netns_make cni
CID=sgt$$c0ffee1234567890
NAME=cni-${CID:0:12}
PREV=$(jq -cn --arg h "$HOST_IF" --arg ns "/var/run/netns/$NS" --arg a4 "$NS_V4/30" \
	--arg a6 "$NS_V6/64" --arg g4 "$HOST_V4" --arg g6 "$HOST_V6" '{
	cniVersion: "1.0.0",
	interfaces: [{name: $h, mac: "02:00:00:00:00:01"}, {name: "eth0", sandbox: $ns}],
	ips: [{address: $a4, gateway: $g4, interface: 1}, {address: $a6, gateway: $g6, interface: 1}],
	routes: [{dst: "0.0.0.0/0"}], dns: {}}')
conf() {        # conf [PREVRESULT]
	jq -cn --arg gw "unix:$T/admin.sock" --argjson tp "$TP" --argjson dns "$([ $DNS = 1 ] && echo $DNSP || echo 0)" \
		--argjson prev "${1:-null}" '{cniVersion: "1.0.0", name: "sgt", type: "sandgate-cni",
		gateway: $gw, transparent_port: $tp, dns_port: $dns, sandbox: "cni-{id}"}
		+ (if $prev == null then {} else {prevResult: $prev} end)'
}
cni() {         # cni COMMAND [PREVRESULT] -> stdout in $OUT, status in $RC
	OUT=$(conf "${2:-}" | CNI_COMMAND=$1 CNI_CONTAINERID=$CID CNI_NETNS=/var/run/netns/$NS \
		CNI_IFNAME=eth0 CNI_PATH=/opt/cni/bin "$CNI" 2>"$T/cni.err")
	RC=$?
}
registered() { curl -s --unix-socket "$T/admin.sock" http://x/v1/sandboxes | jq -e --arg n "$NAME" '[.. | objects | select(.name? == $n)] | length > 0' >/dev/null; }
in_ns() { ip netns exec "$NS" "$@"; }
get() {         # get HOST PATH -> body or error
	in_ns curl -sS --max-time 5 --cacert "$T/certs/ca.pem" --resolve "$1:$UP_PORT:203.0.113.7" \
		"https://$1:$UP_PORT$2" 2>&1
}

OUT=$(CNI_COMMAND=VERSION "$CNI" </dev/null)
echo "$OUT" | jq -e '.supportedVersions | index("1.0.0")' >/dev/null || fail "VERSION: $OUT"
ok "VERSION lists 1.0.0"

cni ADD
[ $RC = 1 ] && echo "$OUT" | jq -e '.code == 7 and (.msg | length > 0)' >/dev/null ||
	fail "ADD without prevResult: rc $RC, $OUT"
ok "ADD without prevResult: CNI error JSON, exit 1"

before=$(nft list tables | sort)
cni ADD "$PREV"
[ $RC = 0 ] || fail "ADD: rc $RC: $OUT $(cat "$T/cni.err")"
TABLE=$(comm -13 <(echo "$before") <(nft list tables | sort) | awk '{print $3}')
NFT_TABLES+=($TABLE)
[ -n "$TABLE" ] || fail "ADD made no nft table"
[ "$(echo "$OUT" | jq -cS .)" = "$(echo "$PREV" | jq -cS .)" ] || fail "ADD did not pass prevResult through: $OUT"
ok "ADD passes prevResult through; table $TABLE"
registered || fail "ADD did not register $NAME: $(curl -s --unix-socket "$T/admin.sock" http://x/v1/sandboxes)"
ok "ADD registered $NAME with the gateway"

[ "$(get api.example.test /cni)" = "hello from api" ] || fail "allowed HTTPS from the container: $(get api.example.test /cni)"
audit_has "$A" '.event == "connection" and .sandbox == "'"$NAME"'" and .decision == "allow" and .dst_host == "api.example.test"'
ok "the container's HTTPS is redirected and allowed under $NAME"
out=$(get other.example.test /deny)
[ "$out" = "hello from api" ] && fail "denied name reached"
audit_has "$A" '.decision == "deny" and .sandbox == "'"$NAME"'" and .dst_host == "other.example.test"'
grep -q '"path": "/deny"' "$UP_LOG" && fail "denied request reached the upstream"
ok "a denied name is refused under $NAME and never reaches the upstream"
if [ $DNS = 1 ]; then
	a=$(in_ns dig +short +time=2 +tries=1 @"$HOST_V4" api.example.test A)
	[ "$a" = 127.0.0.1 ] || fail "DNS for a listed name: '$a'"
	a=$(in_ns dig +short +time=2 +tries=1 @"$HOST_V4" unlisted.example.test A)
	[ -z "$a" ] || fail "an unlisted name resolved: $a"
	a=$(in_ns dig +short +time=2 +tries=1 @192.0.2.53 api.example.test A)
	[ "$a" = 127.0.0.1 ] || fail "DNS to any address is the gateway's: '$a'"
	ok "DNS from the container (to any address) is answered by the gateway"
fi

cni CHECK "$PREV"
[ $RC = 0 ] || fail "CHECK after ADD: rc $RC $OUT"
ok "CHECK passes after ADD"

cni DEL "$PREV"
[ $RC = 0 ] || fail "DEL: rc $RC $OUT"
nft list table inet "$TABLE" >/dev/null 2>&1 && fail "DEL left the table"
registered && fail "DEL left the registration"
out=$(get api.example.test /after-del)
[ "$out" = "hello from api" ] && fail "egress after DEL"
grep -q '"path": "/after-del"' "$UP_LOG" && fail "a request after DEL reached the upstream"
ok "DEL removes the table and the registration; no egress left"
cni DEL
[ $RC = 0 ] || fail "second DEL (unknown container): rc $RC $OUT"
ok "DEL of an unknown container succeeds"
cni CHECK "$PREV"
[ $RC = 1 ] && echo "$OUT" | jq -e '.code and .msg' >/dev/null || fail "CHECK after DEL: rc $RC $OUT"
ok "CHECK after DEL fails with CNI error JSON"
sg_stop
