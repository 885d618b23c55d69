#!/usr/bin/env bash
# The RFC 5424 copy against a real rsyslog (Debian rsyslog, run in the
# foreground with its own config, ports and work directory under $T):
# over UDP and TCP (octet counting) every record arrives as the JSON
# message, facility authpriv, app sandgate, procid the gateway's pid.
# Killing rsyslog never stops the local file; the TCP copy reconnects
# once rsyslog is back.
. "$(dirname "$0")/../lib/common.sh"
. "$TOP/tests/lib/aud_common.sh"
need curl openssl python3 jq rsyslogd

mkcerts api.example.test
upstream api --cert api.example.test
aud_key
A=$T/audit.jsonl
R=$T/rsyslog
mkdir -p "$R/work"
UP=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TP=$(freeport)
# Only what this test needs: no imuxsock/imklog, nothing outside $R.
cat >"$R/rsyslog.conf" <<CONF
global(workDirectory="$R/work" maxMessageSize="64k")
module(load="imudp")
module(load="imtcp")
input(type="imudp" address="127.0.0.1" port="$UP")
input(type="imtcp" address="127.0.0.1" port="$TP")
template(name="sgt" type="string"
         string="%syslogfacility-text%.%syslogseverity-text% %app-name% %procid% %msg%\n")
action(type="omfile" file="$R/out.log" template="sgt")
CONF

rsyslog_start() {
	bg rsyslogd rsyslogd -n -f "$R/rsyslog.conf" -i "$R/rsyslogd.pid"
	RS_PID=$LAST_PID
	wait_port "$TP"
}

# arrived N - until out.log holds N messages (10 s)
arrived() {
	local i
	for i in $(seq 1 200); do
		[ -f "$R/out.log" ] && [ "$(records "$R/out.log")" -ge "$1" ] && return 0
		sleep 0.05
	done
	fail "rsyslog got $(records "$R/out.log" 2>/dev/null || echo 0) messages, wanted $1: $(cat "$R/rsyslogd.err")"
}

# the message part of each line that rsyslog wrote, for records of pid $1
messages() { awk -v p="$1" '$3 == p { sub(/^[^ ]+ [^ ]+ [^ ]+ /, ""); print }' "$R/out.log"; }

rsyslog_start

# ---- UDP
aud_config "$T/udp.yaml" "  path: $A
  key: file:$T/audit.key
  syslog: udp://127.0.0.1:$UP"
sg_start "$T/udp.yaml"
connect_ok
connect_denied 3
connect_ok
sg_stop
n=$(records "$A")
arrived "$n"
diff <(messages "$SG_PID") "$A" >"$T/diff" || fail "UDP copy differs from the file: $(cat "$T/diff")"
grep -q "^authpriv.notice sandgate $SG_PID {\"v\":1,\"seq\":[0-9]*,\"ts\":\"[^\"]*\",\"event\":\"connection\",.*\"decision\":\"deny\"" \
	"$R/out.log" || fail "no authpriv.notice deny: $(cat "$R/out.log")"
grep -q "^authpriv.info sandgate $SG_PID .*\"event\":\"gateway_start\"" "$R/out.log" ||
	fail "no authpriv.info gateway_start"
ok "UDP: all $n records arrived as RFC 5424 messages, byte for byte"

# ---- TCP, then rsyslog dies
aud_config "$T/tcp.yaml" "  path: $A
  key: file:$T/audit.key
  syslog: tcp://127.0.0.1:$TP"
sg_start "$T/tcp.yaml"
connect_ok
connect_denied 2
arrived $((n + 4))
diff <(messages "$SG_PID") <(tail -n 4 "$A") >"$T/diff" ||
	fail "TCP copy differs: $(cat "$T/diff")"
ok "TCP: records arrive with octet-counting framing"

kill -9 "$RS_PID"
wait "$RS_PID" 2>/dev/null
before=$(records "$A")
connect_ok
connect_denied 5
connect_ok
audit_wait $((before + 7)) "$A"
kill -0 "$SG_PID" || fail "the gateway died with rsyslog"
ok "rsyslog killed: the local file keeps every record ($((before + 7)) lines)"

# rsyslog back on the same port: the sender reconnects (backoff) and the
# queued copies follow
got=$(records "$R/out.log")
rsyslog_start
connect_ok
arrived $((got + 8))
grep -q "audit: syslog 127.0.0.1:$TP: .*records are queued" "$T/gw.log" ||
	fail "the outage was not logged"
sg_stop
verify_ok -c "$T/tcp.yaml" "$A"
ok "rsyslog back: the copy resumed; local chain ok ($VOUT)"
