#!/usr/bin/env bash
# The startup sweep after a crash: a `sandgate run` (runc, then the
# container backend's own namespaces) is SIGKILLed mid-run, with its
# runtime too (runc), and its sandbox ignoring SIGTERM; the next run's
# sweep must remove the orphaned container (its processes included), the
# cgroups, the namespace, the nft table and the interface of the dead run.
. "$(dirname "$0")/../lib/run_common.sh"
need_root
need nft ip pgrep
MARK=sgt-sweep-$$
CFG=$T/sg.yaml
cat >"$CFG" <<YAML
version: 1
gateway:
  workers: 1
audit: { path: $T/audit.jsonl }
default: deny
YAML

# Anything a failing test leaves: the sandbox's processes (ours: they carry
# the marker), the runtime's container by its exact id, cgroups by name.
sweep_cleanup() {
	local id p
	for p in $(pgrep -f "$MARK"); do kill -9 "$p" 2>/dev/null; done
	for id in "${RUN_IDS[@]}"; do
		[ -n "$id" ] || continue
		[ -d "/run/sandgate/run/$id/runc-root" ] &&
			runc --root "/run/sandgate/run/$id/runc-root" delete -f "sandgate-$id" 2>/dev/null
		find /sys/fs/cgroup -maxdepth 6 -type d -name "sandgate-$id" 2>/dev/null |
			sort -r | xargs -r rmdir 2>/dev/null
		rm -rf "/run/sandgate/run/$id"
	done
	run_cleanup
}
trap sweep_cleanup EXIT

# crash ARGS... - start a run whose CMD ignores SIGTERM, SIGKILL it (and
# its runtime process, if any) mid-run; sets ID and SBX (the sandbox's PID)
crash() {
	local pid rt
	"$SANDGATE" run -v -c "$CFG" --sandbox "sgt-w$$" "$@" -- \
		sh -c 'trap "" TERM INT HUP; while :; do sleep 1; done' "$MARK" \
		>"$T/crash.out" 2>"$T/crash.err" &
	pid=$!; RUN_PIDS+=($pid)
	ID=
	for _ in $(seq 1 600); do
		ID=$(run_id "$T/crash.err")
		SBX=$(pgrep -f "^sh -c trap .* $MARK\$" | head -1)
		[ -n "$ID" ] && [ -n "$SBX" ] && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.05
	done
	RUN_IDS+=("$ID")
	[ -n "$ID" ] && [ -n "$SBX" ] || fail "the first run did not start: $(cat "$T/crash.err")"
	rt=$(pgrep -P $pid -x "$RT" 2>/dev/null)
	kill -9 $pid
	wait $pid 2>/dev/null
	# A crash takes the runtime's supervisor along (it would otherwise
	# forward SIGTERM, which the sandbox ignores, and wait for ever).
	[ -n "$rt" ] && kill -9 $rt 2>/dev/null
	sleep 0.5
	kill -0 "$SBX" 2>/dev/null || [ "$RT" = none ] || fail "the sandbox did not survive the crash (test setup)"
}

# after ID - run `sandgate run -- true`, then nothing of ID may remain
after() {
	local id=$1 c
	"$SANDGATE" run -c "$CFG" --sandbox "sgt-a$$" -- true 2>"$T/after.err" ||
		fail "the second run failed: $(cat "$T/after.err")"
	pgrep -r RSDT -f "$MARK" >/dev/null && fail "a process of the crashed sandbox remains: $(pgrep -af "$MARK")"
	# (a zombie is gone: it waits for the host's init to reap it)
	case $(ps -o stat= -p "$SBX" 2>/dev/null) in ""|Z*) ;; *) fail "the crashed sandbox's PID $SBX is still there" ;; esac
	runc list 2>/dev/null | grep -q "sandgate-$id" && fail "runc list shows sandgate-$id"
	[ -d "/run/sandgate/run/$id/runc-root/sandgate-$id" ] && fail "runc state of sandgate-$id remains"
	c=$(find /sys/fs/cgroup -maxdepth 6 -type d -name "sandgate-$id" 2>/dev/null)
	[ -z "$c" ] || fail "cgroups of the crashed run remain: $c"
	assert_gone "$id"
}

if command -v runc >/dev/null; then
	RT=runc
	crash --backend container --runtime runc
	[ -d "/run/sandgate/run/$ID/runc-root/sandgate-$ID" ] || fail "no runc state for sandgate-$ID (test setup)"
	[ -n "$(find /sys/fs/cgroup -maxdepth 6 -type d -name "sandgate-$ID")" ] || fail "runc made no cgroup (test setup)"
	after "$ID"
	ok "runc: after a crash the next run removes the container, its processes, cgroups, namespace, table, interface"
else
	echo "note: runc not installed (Debian package runc): runc part skipped"
fi

RT=none
crash --backend container
[ -n "$(find /sys/fs/cgroup -maxdepth 6 -type d -name "sandgate-$ID")" ] || fail "no cgroup sandgate-$ID to sweep (test setup)"
after "$ID"
ok "container backend: after a crash the next run removes its cgroups, namespace, table, interface"
