#!/bin/sh
# Installs the Debian packages sandgate needs for a given job, and only the
# missing ones: quiet and fast (one dpkg-query) when everything is present.
#   scripts/deps.sh build|test|demo|bench
set -eu
build="build-essential pkg-config libssl-dev libnghttp2-dev libc-ares-dev
libmaxminddb-dev libpcre2-dev libyaml-dev libseccomp-dev"
test="$build libcmocka-dev clang libclang-rt-14-dev curl openssl python3
nghttp2-client nghttp2-server nginx-light dnsutils dnsmasq-base iproute2
nftables procps jq rsyslog chromium libmaxmind-db-writer-perl mmdb-bin
tcpdump runc crun runsc qemu-system-x86 busybox-static e2fsprogs"
demo="$test"
bench="$test haproxy libnginx-mod-stream sniproxy tinyproxy squid-openssl
mitmproxy wrk gnuplot-nox"
case "${1:-build}" in
build) want=$build ;; test) want=$test ;; demo) want=$demo ;; bench) want=$bench ;;
*) echo "usage: $0 build|test|demo|bench" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
	# python3 may come from elsewhere (pyenv); a working binary is enough
	if [ "$p" = python3 ] && command -v python3 >/dev/null 2>&1; then continue; fi
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in *"ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
echo "sandgate: installing missing Debian packages:$missing" >&2
if [ "$(id -u)" != 0 ]; then
	echo "sandgate: not root; install them with: sudo apt-get install$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 || {
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
}
