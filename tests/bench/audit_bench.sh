#!/usr/bin/env bash
# Audit writer and verify throughput: records/s through the writer thread
# with the HMAC chain and fsync: batch (goal >= 200,000/s), and
# `audit verify` MB/s (goal >= 100 MB/s). Links the release objects.
#   tests/bench/audit_bench.sh [RECORDS] [DIR]
# DIR defaults to a temp dir on the disk that holds the repo (not tmpfs),
# since fsync is part of what is measured.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
make --no-print-directory -s sandgate >/dev/null
objs=$(ls build/rel/lib/*.o build/rel/tls/*.o build/rel/policy/*.o build/rel/audit/*.o \
	build/rel/gateway/*.o | grep -v '/main\.o$')
libs="openssl libnghttp2 libcares libmaxminddb libpcre2-8 yaml-0.1"
mkdir -p build/rel/bench
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -pthread -I. -Ilib $(pkg-config --cflags $libs) \
	-o build/rel/bench/aud_bench tests/bench/aud_bench.c $objs \
	$(pkg-config --libs $libs) -pthread
dir=${2:-}
if [ -z "$dir" ]; then
	dir=$(mktemp -d "$top/build/rel/bench/run.XXXXXX")
	trap 'rm -rf "$dir"' EXIT
fi
echo "audit bench: ${1:-300000} records in $dir ($(df -T "$dir" | awk 'NR==2 {print $2}'))"
build/rel/bench/aud_bench "$dir" "${1:-300000}"
