# Helpers for the DNS responder's integration tests (tests/integration/dns_*.sh).
# Source after common.sh (and px_common.sh for check/audit_count).

# dnsmasq_start ARGS... - a dnsmasq on 127.0.0.1 that logs every query it
# gets to $DNSLOG; sets DP (its port, UDP and TCP). ARGS: --address=... etc.
dnsmasq_start() {
	DNSLOG=$T/dnsmasq.log
	local attempt
	for attempt in 1 2 3 4 5; do
		DP=$(python3 -c 'import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0)); p = u.getsockname()[1]
t = socket.socket(); t.bind(("127.0.0.1", p)); print(p)' 2>/dev/null) || continue
		: >"$DNSLOG"
		bg dnsmasq dnsmasq --no-daemon --no-resolv --no-hosts --port="$DP" \
			--listen-address=127.0.0.1 --bind-interfaces --log-queries \
			--log-facility="$DNSLOG" --cache-size=0 "$@"
		local pid=$LAST_PID
		for _ in $(seq 1 100); do
			grep -q "started" "$DNSLOG" 2>/dev/null && break
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		grep -q "started" "$DNSLOG" 2>/dev/null && kill -0 "$pid" 2>/dev/null && return 0
	done
	fail "dnsmasq did not start: $(cat "$T/dnsmasq.err")"
}

# upstream_saw NAME - dnsmasq was asked about NAME (any type)
upstream_saw() { grep -q "query\[[A-Za-z0-9]*\] $1 from" "$DNSLOG"; }
# upstream_never NAME - dnsmasq never heard of NAME
upstream_never() { ! grep -qi -- "$1" "$DNSLOG"; }

# sg_dns_port - the port the gateway's DNS listener bound (from its log)
sg_dns_port() {
	sed -n 's/.*listening dns on .*:\([0-9]*\) (udp, tcp).*/\1/p' "$T/gw.log" | tail -n 1
}

# dq NAME ARGS... - dig against the gateway ($DNS_PORT on 127.0.0.1 unless
# @SERVER is given); the full output in $T/NAME.dig, prints the status
# ("NOERROR", "NXDOMAIN", ... or "none")
dq() {
	local name=$1; shift
	dig -p "$DNS_PORT" +time=3 +tries=1 "$@" >"$T/$name.dig" 2>&1
	local s
	s=$(sed -n 's/.*status: \([A-Z]*\),.*/\1/p' "$T/$name.dig" | tail -n 1)
	echo "${s:-none}"
}

# dig_answers NAME - the answer section's records of $T/NAME.dig, one per line
dig_answers() {
	awk '/^;; ANSWER SECTION:/ { on = 1; next } /^$/ { on = 0 } on && !/^;/' "$T/$1.dig"
}

# dig_flags NAME - the flags of the (last) header in $T/NAME.dig
dig_flags() { sed -n 's/^;; flags: \([a-z ]*\);.*/\1/p' "$T/$1.dig" | tail -n 1; }
