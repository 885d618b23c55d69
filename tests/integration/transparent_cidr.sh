#!/usr/bin/env bash
# Transparent listener, no name to judge: opaque bytes (and a TLS hello
# without SNI) can only be allowed by a cidrs rule matching the original
# destination, and then go to exactly that destination. The destination is
# the host side of the veth, a real local address, so nothing leaves the host.
. "$(dirname "$0")/../lib/common.sh"
need_root
need python3 jq nft ip xxd

TP=$(freeport)
netns_make cidr
nft_redirect "$TP"

# echo_peer NAME ADDR [--banner TEXT] - a recording TCP peer on ADDR; sets EP (port) and EL (log)
echo_peer() {
	EL=$T/$1.log
	: >"$EL"
	bg "$1" python3 "$TOP/tests/lib/ns_echo.py" serve --bind "$2" --log "$EL" "${@:3}"
	local i
	for i in $(seq 1 100); do
		EP=$(awk '/^ready/ {print $2}' "$T/$1.out" 2>/dev/null)
		[ -n "$EP" ] && return 0
		sleep 0.05
	done
	fail "echo peer $1 did not start: $(cat "$T/$1.err")"
}
echo_peer ok4 "$HOST_V4"; P_OK=$EP L_OK=$EL
echo_peer no4 "$HOST_V4"; P_NO=$EP L_NO=$EL
echo_peer any6 "$HOST_V6"; P_V6=$EP L_V6=$EL
echo_peer smtp "$HOST_V4" --banner "220 sandgate test"; P_SF=$EP L_SF=$EL

cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { transparent: "[::]:$TP" }
  workers: 1
  limits: { handshake_timeout: 1s }
audit: { path: $T/audit.jsonl }
sandboxes:
  sbx-cidr:
    sources: [$NS_NET4, $NS_NET6]
    allow:
      - { name: echo4, cidrs: [$HOST_V4/32], ports: [$P_OK] }
      - { name: smtp, cidrs: [$HOST_V4/32], ports: [$P_SF] }
      - { name: echo6, cidrs: ["$HOST_V6/128"] }
default: deny
YAML
sg_start "$T/sg.yaml"
A=$T/audit.jsonl
SEND="python3 $TOP/tests/lib/ns_echo.py send"
lport() { sed -n 's/^local port //p' "$1"; }

# --- opaque bytes to the CIDR-allowed address and port
# (binary, so that nobody could take them for HTTP)
msg=$(printf '\x00\x01opaque %s bytes\n' "$RANDOM" | xxd -p | tr -d '\n')
len=$((${#msg} / 2))
ip netns exec "$NS" $SEND "$HOST_V4" "$P_OK" --hex "$msg" >"$T/s1.out" 2>"$T/s1.err" ||
	fail "opaque to an allowed CIDR: no answer: $(cat "$T/s1.err")"
[ "$(xxd -p "$T/s1.out" | tr -d '\n')" = "$(printf echo: | xxd -p)$msg" ] ||
	fail "opaque to an allowed CIDR: got '$(cat -v "$T/s1.out")'"
jq -e --arg h "$msg" 'select(.head == $h and .peer == "'"$HOST_V4"'")' "$L_OK" >/dev/null ||
	fail "the echo peer did not record the bytes: $(cat "$L_OK")"
audit_has "$A" '.event == "connection" and .sandbox == "sbx-cidr" and .decision == "allow"
	and .rule == "echo4" and .dst_ip == "'"$HOST_V4"'" and .dst_port == '"$P_OK"'
	and .dst_host == null and .sni == null and .tls == "none"
	and ((.src // "") | endswith(":'"$(lport "$T/s1.err")"'")) and .bytes_up == '"$len"'
	and .bytes_down == '"$((len + 5))"
ok "opaque bytes allowed by the cidrs rule reached the original destination"

# --- a TLS hello without SNI: also only a CIDR rule can allow it
hello=$(python3 "$TOP/tests/lib/tls_client.py" hello)
ip netns exec "$NS" $SEND "$HOST_V4" "$P_OK" --hex "$hello" >"$T/s2.out" 2>"$T/s2.err" ||
	fail "SNI-less hello to an allowed CIDR: no answer: $(cat "$T/s2.err")"
jq -e --arg h "${hello:0:128}" 'select(.head == $h)' "$L_OK" >/dev/null ||
	fail "the echo peer did not receive the hello: $(cat "$L_OK")"
audit_has "$A" '.decision == "allow" and .rule == "echo4" and .sni == null
	and ((.src // "") | endswith(":'"$(lport "$T/s2.err")"'"))'
ok "TLS without SNI allowed by the cidrs rule"

# --- the same address on a port the rule does not list
ip netns exec "$NS" $SEND "$HOST_V4" "$P_NO" --hex "$msg" >"$T/s3.out" 2>"$T/s3.err" &&
	fail "opaque to a port no rule allows: answered '$(cat "$T/s3.out")'"
audit_has "$A" '.event == "connection" and .decision == "deny" and .reason == "no_hostname"
	and .rule == null and .dst_ip == "'"$HOST_V4"'" and .dst_port == '"$P_NO"'
	and ((.src // "") | endswith(":'"$(lport "$T/s3.err")"'"))'
ip netns exec "$NS" $SEND "$HOST_V4" "$P_NO" --hex "$hello" >"$T/s4.out" 2>"$T/s4.err" &&
	fail "SNI-less hello to a port no rule allows: answered"
audit_has "$A" '.decision == "deny" and .reason == "tls_no_sni" and .dst_port == '"$P_NO"'
	and ((.src // "") | endswith(":'"$(lport "$T/s4.err")"'"))'
sleep 0.2
[ "$(wc -l <"$L_NO")" -eq 0 ] || fail "denied connections reached the peer: $(cat "$L_NO")"
ok "a port outside the cidrs rule denied (no_hostname, tls_no_sni), nothing arrived"

# --- IPv6, a cidrs rule without ports allows any port
ip netns exec "$NS" $SEND "$HOST_V6" "$P_V6" --hex "$msg" >"$T/s5.out" 2>"$T/s5.err" ||
	fail "opaque over v6 to an allowed CIDR: no answer: $(cat "$T/s5.err")"
[ "$(xxd -p "$T/s5.out" | tr -d '\n')" = "$(printf echo: | xxd -p)$msg" ] ||
	fail "opaque over v6: got '$(cat -v "$T/s5.out")'"
[ "$(wc -l <"$L_V6")" -eq 1 ] || fail "the v6 peer: $(cat "$L_V6")"
audit_has "$A" '.decision == "allow" and .rule == "echo6" and .dst_ip == "'"$HOST_V6"'"
	and .dst_port == '"$P_V6"' and ((.src // "") | startswith("['"$NS_V6"']:"))'
ok "opaque bytes over IPv6 allowed by a port-less cidrs rule"

# --- a server-first protocol (SMTP, SSH, MySQL): the client says nothing
# until the server has; after handshake_timeout the cidrs rule decides
t0=$(date +%s%N)
out=$(ip netns exec "$NS" $SEND "$HOST_V4" "$P_SF" --banner-first --data "QUIT" 2>"$T/s7.err") ||
	fail "server-first protocol to an allowed CIDR: $(cat "$T/s7.err")"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$out" = "220 sandgate testecho:QUIT" ] || fail "server-first protocol: got '$out'"
audit_has "$A" '.decision == "allow" and .rule == "smtp" and .bytes_down > 0
	and ((.src // "") | endswith(":'"$(lport "$T/s7.err")"'"))'
[ "$ms" -ge 900 ] || fail "server-first: connected after $ms ms, before handshake_timeout"
ok "server-first protocol: a silent client connected after handshake_timeout ($ms ms)"

# --- client-first text protocols are not HTTP either: a cidrs rule allows
# them like any bytes. Each case below is checked; failures are listed at the end.
BUGS=()
# textcase NAME HEX-OR-TEXT: send (then half-close) to the CIDR-allowed port
textcase() {
	local name=$1 data=$2 n0 out
	n0=$(wc -l <"$L_OK")
	# (the x keeps $(...) from eating the reply's trailing newline)
	out=$(ip netns exec "$NS" $SEND "$HOST_V4" "$P_OK" --data "$data" 2>"$T/tc.err"; echo x)
	out=${out%x}
	if [ "$out" != "echo:$data" ] || [ "$(wc -l <"$L_OK")" -ne $((n0 + 1)) ]; then
		BUGS+=("$name: $(printf '%q' "$data") to a CIDR-allowed destination not relayed; audit: $(jq -c 'select((.src // "") | endswith(":'"$(lport "$T/tc.err")"'")) | {decision, reason, duration_ms}' "$A")")
	else
		ok "$name relayed"
	fi
}
textcase "memcached text command" $'get key-1\r\n'
textcase "SMTP-style client line" $'EHLO sandbox.test\r\n'
textcase "short text, no line end, then EOF" "ping-$RANDOM"
[ ${#BUGS[@]} -eq 0 ] || fail "$(printf '\n  %s' "${BUGS[@]}")"

sg_stop
