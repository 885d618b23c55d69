#!/usr/bin/env bash
# sandgate run --backend microvm driving Firecracker through its API socket.
# No Firecracker binary can be installed here, so `firecracker` on PATH is
# tests/lib/fake_firecracker.py: Firecracker's CLI and API (with its
# validation), every request recorded, and a real boot in QEMU -M microvm
# (TCG) with the serial console on its stdout, as Firecracker's is.
# SANDGATE_FC_FORCE=1 (a test hook) lets sandgate drive it without KVM.
# One boot: an agent from the workspace disk does plain HTTP through the
# gateway and exits 42; the status and the output come back, the recorded
# API calls carry the extracted ELF vmlinux, the run's initrd, boot args,
# tap and workspace drive, and nothing of the run remains. Then SIGTERM
# mid-run, the error path (the API answers 400: exit 125 with Firecracker's
# fault_message) and, without the hook on a host without KVM, QEMU with a
# notice saying why.
. "$(dirname "$0")/../lib/run_common.sh"
command -v qemu-system-x86_64 >/dev/null ||
	skip "needs qemu-system-x86_64 (Debian package qemu-system-x86): the fake firecracker boots in QEMU"
[ -x /bin/busybox ] && ! readelf -l /bin/busybox 2>/dev/null | grep -q INTERP ||
	skip "needs a static /bin/busybox (Debian package busybox-static)"
command -v mke2fs >/dev/null || skip "needs mke2fs (Debian package e2fsprogs)"
ls /var/cache/sandgate/kernel/*/vmlinuz >/dev/null 2>&1 || apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1 ||
	skip "no Debian linux-image-cloud-amd64 in apt and no cached guest kernel"

run_setup
upstream plain
PLAIN_PORT=$UP_PORT PLAIN_LOG=$UP_LOG
sed -i "s|^      other.example.test: \[127.0.0.1\]|&\n      plain.example.test: [127.0.0.1]|;
        s|^      - { name: api, .*|&\n      - { name: plain, domains: [plain.example.test], ports: [$PLAIN_PORT] }|" "$CFG"
grep -q "name: plain" "$CFG" || fail "config edit"

# `firecracker` on PATH: the fake.
mkdir -p "$T/fcbin"
cat >"$T/fcbin/firecracker" <<SH
#!/bin/sh
exec python3 "$TOP/tests/lib/fake_firecracker.py" "\$@"
SH
chmod +x "$T/fcbin/firecracker"
export PATH="$T/fcbin:$PATH" FAKE_FC_LOG=$T/fc.jsonl
: >"$FAKE_FC_LOG"

echo "from the workspace disk" >"$WS/marker"
cat >"$WS/agent.sh" <<SH
echo "203.0.113.8 plain.example.test" >>/etc/hosts
out=\$(timeout 15 wget -q -O - http://plain.example.test:$PLAIN_PORT/fc 2>&1); echo "R:plain=\$out"
echo "R:disk=\$(cat /workspace/marker)"
echo "R:cmdline=\$(cat /proc/cmdline)"
printf 'fc tail, no newline'
exit 42
SH

name=sgt-fc$$
t0=$(date +%s%N)
SANDGATE_FC_FORCE=1 "$SANDGATE" run -v -c "$CFG" --backend microvm --sandbox "$name" --workspace "$WS" \
	-- sh /workspace/agent.sh >"$T/run.out" 2>"$T/run.err"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
id=$(run_id "$T/run.err"); RUN_IDS+=("$id")
[ -n "$id" ] || fail "no run id: $(tail -20 "$T/run.err")"
echo "--- agent output ($ms ms):"; sed 's/^/    /' "$T/run.out"; echo
grep -q '^R:' "$T/run.out" || fail "the agent did not run (rc $rc): $(tail -30 "$T/run.err")"
grep -q "notice: driving $T/fcbin/firecracker: no virtio-fs there" "$T/run.err" ||
	fail "no notice that Firecracker is driven: $(grep -i notice "$T/run.err")"
[ "$rc" = 42 ] || fail "exit status $rc, want CMD's 42: $(tail -20 "$T/run.err")"
ok "CMD's exit status came back through Firecracker's console"
[ "$(tail -c 19 "$T/run.out")" = "fc tail, no newline" ] || fail "stdout tail: $(tail -c 40 "$T/run.out" | od -c | head -3)"
grep -q SANDGATE- "$T/run.out" && fail "a console marker leaked into stdout"
ok "CMD's output forwarded byte for byte"
[ "$(sed -n 's/^R:plain=//p' "$T/run.out")" = "hello from plain" ] || fail "plain HTTP: $(grep '^R:plain' "$T/run.out")"
grep -q '"path": "/fc"' "$PLAIN_LOG" || fail "the request is not at the upstream"
audit_has "$A" '.event == "request" and .sandbox == "'"$name"'" and .decision == "allow"
	and .dst_host == "plain.example.test"'
ok "plain HTTP from the VM went through the gateway to the upstream"
[ "$(sed -n 's/^R:disk=//p' "$T/run.out")" = "from the workspace disk" ] || fail "workspace: $(grep '^R:disk' "$T/run.out")"
ok "the workspace arrived on the drive"

# The API calls, in order, as Firecracker would have received them.
req() { jq -c "select(.method == \"PUT\" and .path == \"$1\")" "$FAKE_FC_LOG" | head -1; }
jq -r 'select(.method) | "\(.method) \(.path) \(.status)"' "$FAKE_FC_LOG" >"$T/calls"
printf '%s\n' "PUT /boot-source 204" "PUT /machine-config 204" "PUT /network-interfaces/eth0 204" \
	"PUT /drives/ws 204" "PUT /actions 204" | cmp -s - "$T/calls" || fail "API calls: $(cat "$T/calls")"
kernel=$(req /boot-source | jq -r .body.kernel_image_path)
case "$kernel" in /var/cache/sandgate/kernel/*/vmlinux) ;; *) fail "kernel_image_path $kernel" ;; esac
[ "$(head -c 4 "$kernel" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "$kernel is not an ELF"
[ -f "$(dirname "$kernel")/vmlinuz" ] || fail "the ELF is not cached next to vmlinuz"
[ "$(req /boot-source | jq -r .body.initrd_path)" = "/run/sandgate/run/$id/initrd.cpio" ] ||
	fail "initrd_path: $(req /boot-source)"
args=$(req /boot-source | jq -r .body.boot_args)
case "$args" in "console=ttyS0 "*panic=-1*) ;; *) fail "boot_args: $args" ;; esac
grep -q "^R:cmdline=$args" "$T/run.out" || fail "the guest did not boot with boot_args: $(grep '^R:cmdline' "$T/run.out")"
[ "$(req /machine-config | jq -c .body)" = '{"vcpu_count":1,"mem_size_mib":256}' ] ||
	fail "machine-config: $(req /machine-config)"
[ "$(req /network-interfaces/eth0 | jq -c .body)" = '{"iface_id":"eth0","host_dev_name":"sgr'"$id"'"}' ] ||
	fail "network-interfaces: $(req /network-interfaces/eth0)"
[ "$(req /drives/ws | jq -c .body)" = '{"drive_id":"ws","path_on_host":"/run/sandgate/run/'"$id"'/workspace.img","is_root_device":false,"is_read_only":false}' ] ||
	fail "drives: $(req /drives/ws)"
[ "$(req /actions | jq -c .body)" = '{"action_type":"InstanceStart"}' ] || fail "actions: $(req /actions)"
fb=$(jq -r 'select(.event == "boot") | .kernel_fallback // "none"' "$FAKE_FC_LOG")
[ "$fb" = none ] || fail "the fake booted $fb, not the ELF: $(jq -c 'select(.event == "boot")' "$FAKE_FC_LOG")"
ok "API calls: ELF vmlinux, the run's initrd and boot args, 1 vCPU/256 MiB, tap sgr$id, the workspace drive, InstanceStart"
assert_gone "$id"
pgrep -f "sgr$id" >/dev/null && fail "a VM process of run $id remains: $(pgrep -af "sgr$id")"
ok "after the run no tap, nft table, state, firecracker or QEMU process remains"

# SIGTERM while CMD runs: firecracker (and the fake's QEMU) end, all torn down.
SANDGATE_FC_FORCE=1 "$SANDGATE" run -v -c "$CFG" --backend microvm --sandbox "sgt-fs$$" \
	-- sh -c 'echo up; sleep 60' >"$T/sig.out" 2>"$T/sig.err" &
pid=$!; RUN_PIDS+=($pid)
for _ in $(seq 1 1200); do grep -q '^up' "$T/sig.out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
grep -q '^up' "$T/sig.out" || fail "SIGTERM test: the VM did not start: $(tail -20 "$T/sig.err")"
id=$(run_id "$T/sig.err"); RUN_IDS+=("$id")
pgrep -f "run/sandgate/run/$id/fc.sock" >/dev/null || fail "SIGTERM test: no firecracker process for run $id"
kill -TERM $pid
wait $pid; rc=$?
[ $rc -ne 0 ] || fail "SIGTERM: exit 0"
assert_gone "$id"
pgrep -f "sgr$id" >/dev/null && fail "a VM process of run $id remains after SIGTERM"
ok "SIGTERM to sandgate run ends firecracker and tears everything down (exit $rc)"

# The API refuses: exit 125 with Firecracker's fault_message.
: >"$FAKE_FC_LOG"
FAKE_FC_FAIL=boot-source SANDGATE_FC_FORCE=1 "$SANDGATE" run -v -c "$CFG" --backend microvm \
	--sandbox "sgt-ff$$" -- true >"$T/fail.out" 2>"$T/fail.err"
rc=$?
id=$(run_id "$T/fail.err"); RUN_IDS+=("$id")
[ "$rc" = 125 ] || fail "refused boot-source: exit $rc, want 125: $(tail -20 "$T/fail.err")"
grep -q "HTTP 400: The kernel file cannot be opened: Permission denied (os error 13)" "$T/fail.err" ||
	fail "the fault_message is not in the error: $(tail -20 "$T/fail.err")"
grep -q '"status": 400' "$FAKE_FC_LOG" && ! grep -q InstanceStart "$FAKE_FC_LOG" ||
	fail "after a 400 the client went on: $(cat "$FAKE_FC_LOG")"
echo "    $(grep 'HTTP 400' "$T/fail.err")"
assert_gone "$id"
ok "a refused API call fails the run (125) with the fault_message, nothing remains"

# Without the hook, Firecracker needs KVM: where it is not usable here,
# QEMU runs and the notice says why.
if grep -qE ' (vmx|svm)' /proc/cpuinfo && [ ! -e /sys/module/kvm_pvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	echo "note: KVM is usable here: the QEMU fallback for firecracker without KVM is not exercised"
else
	: >"$FAKE_FC_LOG"
	"$SANDGATE" run -v -c "$CFG" --backend microvm --sandbox "sgt-fq$$" -- sh -c 'exit 3' \
		>"$T/q.out" 2>"$T/q.err"
	rc=$?
	id=$(run_id "$T/q.err"); RUN_IDS+=("$id")
	[ "$rc" = 3 ] || fail "QEMU fallback: exit $rc: $(tail -20 "$T/q.err")"
	grep -q "firecracker.*needs KVM.*using QEMU" "$T/q.err" || fail "no notice: $(grep -i notice "$T/q.err")"
	[ -s "$FAKE_FC_LOG" ] && fail "firecracker was driven without KVM: $(cat "$FAKE_FC_LOG")"
	echo "    $(grep 'needs KVM' "$T/q.err")"
	assert_gone "$id"
	ok "firecracker on PATH but no usable KVM: QEMU, with a notice"
fi
