#!/usr/bin/env bash
# Cold start of `sandgate run` per backend: wall time from exec to CMD
# (`true`) having run and everything torn down, median of N runs, plus the
# time of the bare backend without sandgate for comparison where it makes
# sense. Prints a table; a backend this host lacks is listed as skipped.
#   tests/bench/run_coldstart.sh [N]      (root; default N=5)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
SANDGATE=${SANDGATE:-$top/sandgate}
N=${1:-5}
[ "$(id -u)" = 0 ] || { echo "run_coldstart: needs root"; exit 77; }
cfg=$(mktemp /tmp/sgcold.XXXXXX.yaml)
trap 'rm -f "$cfg"' EXIT
printf 'version: 1\ngateway: { workers: 1 }\ndefault: deny\n' >"$cfg"

median() { sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1; local rc=$?; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); return $rc; }

printf '%-26s %10s   %s\n' backend "median ms" "notes"
row() {     # name, needed binary, args...
	local name=$1 need=$2; shift 2
	if [ -n "$need" ] && ! command -v "$need" >/dev/null; then
		printf '%-26s %10s   %s\n' "$name" - "skipped: needs $need"; return
	fi
	local i out=() fail=0
	for i in $(seq 1 "$N"); do
		out+=("$(ms "$SANDGATE" run -c "$cfg" "$@" -- true)") || fail=1
	done
	printf '%-26s %10s   %s\n' "$name" "$(printf '%s\n' "${out[@]}" | median)" \
		"$([ $fail = 1 ] && echo "some runs failed" || echo "gateway start + netns + nft + sandbox + teardown")"
}
row "container (own ns)" "" --backend container
row "container --runtime runc" runc --backend container --runtime runc
row "container --runtime crun" crun --backend container --runtime crun
row "gvisor (runsc ptrace)" runsc --backend gvisor
row "microvm (qemu)" qemu-system-x86_64 --backend microvm
