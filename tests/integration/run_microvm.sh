#!/usr/bin/env bash
# sandgate run --backend microvm: QEMU -M microvm (TCG here) on the run's
# tap, with the workspace and the host's /usr on virtio-fs. The suite of
# run_container.sh runs inside the VM as it does in a container (curl and
# python3 are the host's, read from the /usr share): allowed HTTPS over
# IPv4 and IPv6, denied name, unlisted name, UDP dropped, no packet on the
# host's interface, environment allow-list, exit status, gateway killed,
# signals, nothing left behind. Then what is particular to the microVM:
# CMD's stdout byte for byte (console markers stripped), the workspace is
# written back live and as its owner, /usr is read-only and root-only
# files in it stay unreadable, no setuid/setgid file reaches the host
# through virtiofsd, and the fallback without virtiofsd (the
# workspace copied onto a disk, busybox only) still runs and says so.
. "$(dirname "$0")/../lib/run_common.sh"
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86_64 (Debian package qemu-system-x86)"
[ -x /bin/busybox ] && ! readelf -l /bin/busybox 2>/dev/null | grep -q INTERP ||
	skip "needs a static /bin/busybox (Debian package busybox-static)"
[ -x /usr/lib/qemu/virtiofsd ] || [ -x /usr/libexec/virtiofsd ] || command -v virtiofsd >/dev/null ||
	skip "needs virtiofsd (Debian package qemu-system-common)"
command -v mke2fs >/dev/null || skip "needs mke2fs (Debian package e2fsprogs)"
# The guest kernel comes from apt (once) or the cache.
ls /var/cache/sandgate/kernel/*/vmlinuz >/dev/null 2>&1 || apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1 ||
	skip "no Debian linux-image-cloud-amd64 in apt and no cached guest kernel"

run_suite --backend microvm
grep -q "notice: no KVM here" "$T/run.err" && echo "note: TCG ($(grep -o 'no KVM here ([^)]*)' "$T/run.err"))"
grep -q "workspace on virtio-fs" "$T/run.err" || fail "the workspace was not on virtio-fs: $(cat "$T/run.err")"
ok "the suite ran in the VM from a virtio-fs workspace (results written back live)"
# Guest root writes through virtiofsd as the workspace's owner: no setuid
# or setgid mode may reach the host that way either.
run_nosetid --backend microvm
run_kill_gateway --backend microvm
run_signals --backend microvm
run_stopped --backend microvm

# stdout byte for byte; workspace owner; /usr read-only.
ws=$T/ws-owned
mkdir -p "$ws"; chown 4321:4322 "$ws"; echo "from the host" >"$ws/in.txt"; chown 4321:4322 "$ws/in.txt"
"$SANDGATE" run -c "$CFG" --backend microvm --sandbox "sgt-o$$" --workspace "$ws" -- sh -c '
	cat /workspace/in.txt
	echo made-inside >/workspace/out.txt
	mkdir /workspace/dir && echo deep >/workspace/dir/f
	if touch /usr/sandgate-probe 2>/dev/null; then echo usr=writable; else echo usr=read-only; fi
	if cat /usr/share/polkit-1/rules.d/* >/dev/null 2>&1 || ls /usr/share/polkit-1/rules.d >/dev/null 2>&1; then
		echo rootonly=readable; else echo rootonly=hidden; fi
	printf "no newline at the end"
	exit 9' >"$T/own.out" 2>"$T/own.err"
rc=$?
[ $rc = 9 ] || fail "exit status $rc, want 9: $(tail -20 "$T/own.err")"
grep -qx "from the host" "$T/own.out" || fail "the host's file was not visible: $(cat "$T/own.out")"
[ "$(tail -c 21 "$T/own.out")" = "no newline at the end" ] || fail "stdout tail: $(tail -c 40 "$T/own.out" | od -c | head)"
grep -q SANDGATE- "$T/own.out" && fail "a console marker leaked into stdout"
ok "CMD's output forwarded byte for byte (markers and boot noise stripped)"
[ "$(cat "$ws/out.txt" 2>/dev/null)" = made-inside ] && [ "$(cat "$ws/dir/f" 2>/dev/null)" = deep ] ||
	fail "what CMD wrote is not in the host's workspace"
[ "$(stat -c %u:%g "$ws/out.txt")" = 4321:4322 ] && [ "$(stat -c %u:%g "$ws/dir")" = 4321:4322 ] ||
	fail "files written in the VM are owned by $(stat -c %u:%g "$ws/out.txt") on the host, want 4321:4322"
ok "the workspace is written back, and what the VM writes belongs to the workspace's owner"
grep -qx "usr=read-only" "$T/own.out" || fail "/usr writable from the VM: $(cat "$T/own.out")"
[ -e /usr/sandgate-probe ] && { rm -f /usr/sandgate-probe; fail "the VM wrote into the host's /usr"; }
if [ -d /usr/share/polkit-1/rules.d ] && [ "$(stat -c %a /usr/share/polkit-1/rules.d)" = 700 ]; then
	grep -qx "rootonly=hidden" "$T/own.out" || fail "a root-only directory of /usr was readable from the VM"
	ok "the host's /usr is read-only in the VM, and its root-only files stay unreadable"
else
	ok "the host's /usr is read-only in the VM"
fi

# Without virtiofsd: the workspace is a copy on a disk, busybox only.
ws=$T/ws-copy
mkdir -p "$ws"; echo copied >"$ws/in.txt"
SANDGATE_VIRTIOFSD=off "$SANDGATE" run -v -c "$CFG" --backend microvm --sandbox "sgt-c$$" --workspace "$ws" -- sh -c '
	cat /workspace/in.txt; echo changed >/workspace/in.txt
	[ -e /usr/bin/python3 ] && echo python=there || echo python=absent
	exit 3' >"$T/copy.out" 2>"$T/copy.err"
rc=$?
id=$(run_id "$T/copy.err"); RUN_IDS+=("$id")
[ $rc = 3 ] || fail "fallback: exit status $rc, want 3: $(tail -20 "$T/copy.err")"
grep -qx copied "$T/copy.out" && grep -qx python=absent "$T/copy.out" || fail "fallback output: $(cat "$T/copy.out")"
grep -q "not written back" "$T/copy.err" || fail "fallback: no notice that changes are not written back"
[ "$(cat "$ws/in.txt")" = copied ] || fail "fallback: the copy was written back?"
assert_gone "$id"
ok "without virtiofsd: the workspace is a disk copy (not written back, with a notice), busybox only"
SANDGATE_VIRTIOFSD=/nonexistent/virtiofsd "$SANDGATE" run -c "$CFG" --backend microvm -- true >/dev/null 2>"$T/bad.err"
rc=$?
[ $rc = 125 ] && grep -q "SANDGATE_VIRTIOFSD=/nonexistent/virtiofsd" "$T/bad.err" ||
	fail "a missing SANDGATE_VIRTIOFSD: rc $rc, $(cat "$T/bad.err")"
ok "SANDGATE_VIRTIOFSD naming a missing binary fails before anything starts (125)"
