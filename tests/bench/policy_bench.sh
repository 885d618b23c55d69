#!/usr/bin/env bash
# policy_bench.sh [ARGS] - build the lib/ and policy/ objects (build/rel,
# only those: the benchmark needs nothing else), link
# tests/bench/policy_bench.c against them, run it.
# ARGS go to policy_bench: -d DOMAINS -c CIDRS -r REGEXES -q QUERIES -s SEED.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
objs=$(ls lib/*.c policy/*.c | sed 's#^#build/rel/#; s#\.c$#.o#')
# shellcheck disable=SC2086
make -s --no-print-directory $objs >/dev/null
out=build/rel/bench
mkdir -p "$out"
libs="libmaxminddb libpcre2-8 yaml-0.1 libcares"
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -pthread -I. -Ilib \
	$(pkg-config --cflags $libs) -o "$out/policy_bench" tests/bench/policy_bench.c \
	$objs $(pkg-config --libs $libs) -pthread
exec "$out/policy_bench" "$@"
