#!/usr/bin/env bash
# dns_bench.sh - the DNS responder under load (tests/bench/dns_bench.c):
# cached allowed answers and NXDOMAIN answers per second against a gateway
# with workers: auto, from one bounded UDP client on the same machine.
#
#   tests/bench/dns_bench.sh [SECONDS]        (default 5 per case)
# Environment: SANDGATE (the binary, default ./sandgate), DNS_BENCH_ARGS
# (extra dns_bench arguments, e.g. "-S 16 -w 128"), DNS_BENCH_THREADS
# (client threads, default 1).
#
# The upstream is a dnsmasq on loopback: the allowed name is resolved
# there once, then answered from the worker's cache. The limits are lifted
# (gateway.dns rate/burst/max_names) so they do not cap the figure, and
# the audit log is written to a tmpfs file as in production: allowed
# repeats aggregate to a few records, while every NXDOMAIN is a record of
# its own (denials are always recorded). A last case repeats NXDOMAIN
# without an audit log, to show what the per-query record costs.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SANDGATE=${SANDGATE:-$TOP/sandgate}
SECS=${1:-5}
THREADS=${DNS_BENCH_THREADS:-1}
T=$(mktemp -d /dev/shm/sgdnsb.XXXXXX 2>/dev/null || mktemp -d /tmp/sgdnsb.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
die() { echo "dns_bench: $*" >&2; exit 1; }

[ -x "$SANDGATE" ] || make -s -C "$TOP" >/dev/null || die "cannot build sandgate"
command -v dnsmasq >/dev/null || die "needs dnsmasq"
mkdir -p "$TOP/build/rel/bench"
BIN=$TOP/build/rel/bench/dns_bench
${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror -pthread -o "$BIN" "$TOP/tests/bench/dns_bench.c" ||
	die "dns_bench.c does not compile"

DP=$(python3 -c 'import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0)); print(u.getsockname()[1])')
dnsmasq --no-daemon --no-resolv --no-hosts --port="$DP" --listen-address=127.0.0.1 \
	--bind-interfaces --local-ttl=300 --address=/bench.example.test/203.0.113.80 \
	2>"$T/dnsmasq.err" &
PIDS+=($!)

# start_gw AUDIT_LINE - a gateway; sets GW_PID and PORT
start_gw() {
	cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:0", dns: "127.0.0.1:0" }
  workers: auto
  resolver: { servers: ["127.0.0.1:$DP"] }
  dns: { rate: 100000000, burst: 100000000, max_names_per_minute: 10000000 }
$1
sandboxes:
  bench:
    sources: [127.0.0.0/8]
    allow:
      - { name: bench, domains: [bench.example.test] }
default: deny
YAML
	: >"$T/gw.log"
	"$SANDGATE" serve -c "$T/sg.yaml" 2>"$T/gw.log" &
	GW_PID=$!
	PIDS+=($GW_PID)
	for _ in $(seq 1 200); do
		PORT=$(sed -n 's/.*listening dns on .*:\([0-9]*\) (udp, tcp).*/\1/p' "$T/gw.log")
		[ -n "$PORT" ] && grep -q "serving with" "$T/gw.log" && return 0
		sleep 0.025
	done
	die "gateway did not start: $(cat "$T/gw.log")"
}

stop_gw() {
	kill -TERM "$GW_PID" 2>/dev/null
	wait "$GW_PID" 2>/dev/null
}

# one CASE NAME ARGS... - run the client, print a table row
one() {
	local label=$1; shift
	local cpu0 cpu1 out
	cpu0=$(awk '{print $14 + $15}' "/proc/$GW_PID/stat")
	# shellcheck disable=SC2086
	out=$("$BIN" -p "$PORT" -d "$SECS" -t "$THREADS" ${DNS_BENCH_ARGS:-} "$@")
	cpu1=$(awk '{print $14 + $15}' "/proc/$GW_PID/stat")
	printf '| %-34s | %s | gateway CPU %.0f%% |\n' "$label" "$out" \
		"$(echo "($cpu1 - $cpu0) / $(getconf CLK_TCK) / $SECS * 100" | bc -l)"
}

echo "# DNS responder: $(nproc) cores, workers: auto, $SECS s per case, client threads $THREADS"
echo
start_gw "audit: { path: $T/audit.jsonl }"
"$BIN" -p "$PORT" -d 1 -n bench.example.test >/dev/null      # warm: resolve once
one "cached allowed A (audit on)" -n bench.example.test
one "NXDOMAIN, 1000 names (audit on)" -n "nx%u.denied.test" -N 1000
n=$(wc -l <"$T/audit.jsonl")
stop_gw
echo
echo "audit records written: $n ($(du -h "$T/audit.jsonl" | cut -f1))"
rm -f "$T/audit.jsonl"
start_gw ""
"$BIN" -p "$PORT" -d 1 -n bench.example.test >/dev/null
one "cached allowed A (no audit)" -n bench.example.test
one "NXDOMAIN, 1000 names (no audit)" -n "nx%u.denied.test" -N 1000
stop_gw
