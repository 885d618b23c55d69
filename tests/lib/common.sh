# Sourced by every integration test. Gives each test its own temp dir,
# helpers to start peers and the gateway, and a cleanup that runs however
# the test ends: it stops only the processes the test started (by PID)
# and removes only the namespaces and nft tables named with its prefix.
set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SANDGATE=${SANDGATE:-$TOP/sandgate}
T=$(mktemp -d /tmp/sgt.XXXXXX)
# Short unique prefix for kernel object names (IFNAMSIZ is 16).
SGT_ID=sgt$(printf '%04x' $(( $$ % 65536 )))
PIDS=()
NETNS=()
NFT_TABLES=()
LINKS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	for p in "${NFT_TABLES[@]}"; do nft delete table inet "$p" 2>/dev/null; done
	for p in "${LINKS[@]}"; do ip link del "$p" 2>/dev/null; done
	for p in "${NETNS[@]}"; do ip netns del "$p" 2>/dev/null; done
	[ -n "${KEEP_TMP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "FAIL: $*" >&2; [ -f "$T/gw.log" ] && { echo "--- gateway log" >&2; tail -n 30 "$T/gw.log" >&2; }; exit 1; }
skip() { echo "$*"; exit 77; }
ok() { echo "ok: $*"; }

need() { local c; for c in "$@"; do command -v "$c" >/dev/null || skip "needs $c"; done; }
need_root() { [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, nftables)"; }

freeport() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT [HOST] - until something accepts there (5 s)
wait_port() {
	local host=${2:-127.0.0.1} i
	for i in $(seq 1 100); do
		(exec 3<>"/dev/tcp/$host/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	fail "nothing listening on $host:$1"
}

# bg NAME CMD... - start a process in the background, remember its PID
bg() {
	local name=$1; shift
	"$@" >"$T/$name.out" 2>"$T/$name.err" &
	PIDS+=($!)
	LAST_PID=$!
}

# mkcerts NAME... - a CA and one leaf per NAME (SAN = NAME), P-256
mkcerts() {
	local d=$T/certs n
	mkdir -p "$d"
	[ -f "$d/ca.pem" ] || {
		openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
		openssl req -x509 -new -key "$d/ca.key" -subj "/CN=sandgate test CA" -days 2 \
			-out "$d/ca.pem" 2>/dev/null
	}
	for n in "$@"; do
		openssl ecparam -name prime256v1 -genkey -noout -out "$d/$n.key" 2>/dev/null
		openssl req -new -key "$d/$n.key" -subj "/CN=$n" -out "$d/$n.csr" 2>/dev/null
		printf 'subjectAltName=DNS:%s\n' "$n" >"$d/$n.ext"
		openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
			-CAcreateserial -days 2 -extfile "$d/$n.ext" -out "$d/$n.pem" 2>/dev/null
	done
}

# upstream NAME [--cert CERTNAME] [--bind ADDR] - start tests/lib/upstream.py;
# sets UP_PORT and UP_LOG
upstream() {
	local name=$1; shift
	local extra=() bind=127.0.0.1
	while [ $# -gt 0 ]; do
		case $1 in
		--cert) extra+=(--cert "$T/certs/$2.pem" --key "$T/certs/$2.key"); shift 2 ;;
		--bind) bind=$2; shift 2 ;;
		*) extra+=("$1"); shift ;;
		esac
	done
	UP_LOG=$T/$name.requests
	: >"$UP_LOG"
	bg "$name" python3 "$TOP/tests/lib/upstream.py" --name "$name" --log "$UP_LOG" \
		--bind "$bind" --docroot "$T" "${extra[@]}"
	local i
	for i in $(seq 1 100); do
		UP_PORT=$(awk '/^ready/ {print $2}' "$T/$name.out" 2>/dev/null)
		[ -n "$UP_PORT" ] && return 0
		sleep 0.05
	done
	fail "upstream $name did not start: $(cat "$T/$name.err")"
}

# sg_start CONFIG - run the gateway, wait until it serves; sets SG_PID
sg_start() {
	: >"$T/gw.log"
	"$SANDGATE" serve -c "$1" 2>>"$T/gw.log" &
	SG_PID=$!
	PIDS+=($SG_PID)
	local i
	for i in $(seq 1 200); do
		grep -q "serving with" "$T/gw.log" && return 0
		kill -0 $SG_PID 2>/dev/null || fail "gateway exited: $(cat "$T/gw.log")"
		sleep 0.025
	done
	fail "gateway did not start"
}

# sg_stop - SIGTERM and wait; fails the test on a non-zero exit (ASan)
sg_stop() {
	kill -TERM "$SG_PID" 2>/dev/null
	wait "$SG_PID"
	local rc=$?
	[ $rc -eq 0 ] || fail "gateway exited with $rc"
}

# audit_wait N FILE - until FILE has at least N lines (2 s)
audit_wait() {
	local i
	for i in $(seq 1 80); do
		[ -f "$2" ] && [ "$(wc -l <"$2")" -ge "$1" ] && return 0
		sleep 0.025
	done
	fail "audit $2 has $(wc -l <"$2" 2>/dev/null || echo 0) lines, wanted $1"
}

# audit_has FILE JQ-FILTER - some record satisfies the filter
audit_has() {
	local i
	for i in $(seq 1 80); do
		[ "$(jq -c "select($2)" "$1" 2>/dev/null | wc -l)" -gt 0 ] && return 0
		sleep 0.025
	done
	echo "--- audit $1:" >&2; cat "$1" >&2
	fail "no audit record matches: $2"
}

# netns_make NAME [V4NET(10.x.y) V6NET(fd42:x:y)] - a namespace behind a veth
# pair, host side .1 / ::1, sandbox side .2 / ::2; sets NS, HOST_IF, NS_V4, NS_V6,
# HOST_V4, HOST_V6 (and NS_NAME). NAME: at most 7 characters (IFNAMSIZ).
# Without V4NET/V6NET the subnets are derived from the test script's name and
# NAME, so different test files can run in parallel.
netns_make() {
	local v4=${2:-} v6=${3:-} h
	[ ${#1} -le 7 ] || fail "netns_make: name '$1' longer than 7 characters"
	if [ -z "$v4" ]; then
		h=$(printf '%s/%s' "$(basename "$0" .sh)" "$1" | cksum | cut -d' ' -f1)
		v4=10.$((64 + h % 128)).$(((h >> 8) % 256))
		v6=fd42:$((64 + h % 128)):$(((h >> 8) % 256))
	fi
	NS_NAME=$1
	NS=${SGT_ID}$1
	HOST_IF=v${SGT_ID}$1
	ip netns add "$NS" || fail "ip netns add $NS"
	NETNS+=("$NS")
	ip link add "$HOST_IF" type veth peer name eth0 netns "$NS" || fail "veth $HOST_IF"
	LINKS+=("$HOST_IF")
	HOST_V4=$v4.1 NS_V4=$v4.2 HOST_V6=$v6::1 NS_V6=$v6::2
	NS_NET4=$v4.0/30 NS_NET6=$v6::/64
	{
		ip addr add "$HOST_V4/30" dev "$HOST_IF" &&
		sysctl -qw "net.ipv6.conf.$HOST_IF.accept_ra=0" &&
		ip addr add "$HOST_V6/64" dev "$HOST_IF" nodad &&
		ip link set "$HOST_IF" up &&
		ip -n "$NS" addr add "$NS_V4/30" dev eth0 &&
		ip -n "$NS" addr add "$NS_V6/64" dev eth0 nodad &&
		ip -n "$NS" link set lo up &&
		ip -n "$NS" link set eth0 up &&
		ip -n "$NS" route add default via "$HOST_V4" &&
		ip -n "$NS" -6 route add default via "$HOST_V6"
	} || fail "netns_make: configuring $NS / $HOST_IF"
}

# nft_redirect PORT - every TCP connection from $HOST_IF goes to PORT on this
# host; anything else from it is dropped. One table per link (call it after
# each netns_make); cleanup deletes it. (nft 1.0.6 wants a newline, not just
# "}", after a redirect statement.)
nft_redirect() {
	local t=${SGT_ID}_${NS_NAME:-t}
	NFT_TABLES+=("$t")
	nft -f - <<NFT || fail "nft"
table inet $t {
	chain sbx_pre {
		type nat hook prerouting priority dstnat; policy accept;
		iifname "$HOST_IF" meta l4proto tcp redirect to :$1
	}
	chain sbx_fwd {
		type filter hook forward priority filter; policy accept;
		iifname "$HOST_IF" drop
	}
	chain sbx_input {
		type filter hook input priority filter; policy accept;
		iifname "$HOST_IF" tcp dport $1 accept
		iifname "$HOST_IF" meta l4proto { icmp, ipv6-icmp } accept
		iifname "$HOST_IF" drop
	}
}
NFT
}
