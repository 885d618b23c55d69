#!/usr/bin/env bash
# policy_bench.sh [ARGS] - build the library objects (build/rel), link
# tests/bench/policy_bench.c against the policy and lib objects, run it.
# ARGS go to policy_bench: -d DOMAINS -c CIDRS -r REGEXES -q QUERIES -s SEED.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
make -s --no-print-directory sandgate >/dev/null
out=build/rel/bench
mkdir -p "$out"
libs="libmaxminddb libpcre2-8 yaml-0.1 libcares"
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -pthread -I. -Ilib \
	$(pkg-config --cflags $libs) -o "$out/policy_bench" tests/bench/policy_bench.c \
	build/rel/lib/*.o build/rel/policy/*.o $(pkg-config --libs $libs) -pthread
exec "$out/policy_bench" "$@"
