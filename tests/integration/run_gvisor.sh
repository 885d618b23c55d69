#!/usr/bin/env bash
# sandgate run --backend gvisor: the suite of run_container.sh against runsc
# (a generated OCI bundle whose network namespace is the prepared one).
. "$(dirname "$0")/../lib/run_common.sh"
command -v runsc >/dev/null || skip "needs runsc (Debian package runsc)"
run_suite --backend gvisor
run_nosetid --backend gvisor
run_kill_gateway --backend gvisor
run_signals --backend gvisor
run_stopped --backend gvisor

# gVisor has no user namespace here: with a workspace another user owns,
# CMD runs as that owner (root without capabilities could not write it),
# and what it writes lands as the owner.
ws=$T/ws-gv
mkdir -p "$ws"; chown 4321:4322 "$ws"
"$SANDGATE" run -c "$CFG" --sandbox "sgt-gu$$" --workspace "$ws" --backend gvisor -- sh -c '
	id -u >/workspace/uid; echo made >/workspace/made; touch "$HOME/h" && echo ok >/workspace/home' \
	>"$T/gu.out" 2>"$T/gu.err" || fail "gVisor with a 4321-owned workspace: $(cat "$T/gu.err")"
[ "$(cat "$ws/uid")" = 4321 ] || fail "CMD's uid in gVisor: $(cat "$ws/uid")"
[ "$(stat -c %u:%g "$ws/made")" = 4321:4322 ] || fail "file owned by $(stat -c %u:%g "$ws/made")"
[ "$(cat "$ws/home")" = ok ] || fail "HOME not writable as the owner"
ok "gVisor with a workspace owned by 4321: CMD runs as 4321, writes land as 4321, HOME is its own"
