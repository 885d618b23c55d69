#!/usr/bin/env bash
# sandgate run --rootfs DIR: CMD runs from that tree (a static busybox
# here) on the container backend and under runc; sandgate's own mount
# points are made inside it. A rootfs whose etc (or etc/ssl/certs, proc,
# workspace ...) is a symlink is refused before anything is created, so
# a tree prepared by someone else cannot make root write outside it.
. "$(dirname "$0")/../lib/run_common.sh"
[ -x /bin/busybox ] && ! readelf -l /bin/busybox 2>/dev/null | grep -q INTERP ||
	skip "needs a static /bin/busybox (Debian package busybox-static)"
run_setup
RFS=$T/rootfs VICTIM=$T/victim
# (under runc, root inside is an unprivileged uid that must reach the tree)
chmod 0755 "$T"
mkdir -p "$RFS/bin" "$VICTIM"
cp /bin/busybox "$RFS/bin/"; ln -s busybox "$RFS/bin/sh"

for rt in "" runc; do
	[ -n "$rt" ] && ! command -v "$rt" >/dev/null && { echo "note: $rt not installed"; continue; }
	args=(--backend container); [ -n "$rt" ] && args+=(--runtime "$rt")
	"$SANDGATE" run -c "$CFG" --sandbox "sgt-r$$" --rootfs "$RFS" "${args[@]}" -- \
		/bin/busybox sh -c 'echo from-rootfs; ls /bin; cat /etc/resolv.conf | head -1' \
		>"$T/rfs.out" 2>"$T/rfs.err" || fail "rootfs run ${rt:-own}: $(cat "$T/rfs.err")"
	grep -qx from-rootfs "$T/rfs.out" && grep -q nameserver "$T/rfs.out" ||
		fail "rootfs run ${rt:-own}: $(cat "$T/rfs.out")"
	ok "--rootfs ${rt:-(own namespaces)}: CMD runs from the given tree, with sandgate's resolv.conf"
done
[ -d "$RFS/proc" ] && [ -e "$RFS/etc/resolv.conf" ] || fail "mount points were not made inside the rootfs"

for link in etc etc/ssl/certs workspace; do
	rm -rf "${RFS:?}/etc" "${RFS:?}/workspace"
	mkdir -p "$(dirname "$RFS/$link")"
	ln -s "$VICTIM" "$RFS/$link"
	for rt in "" runc; do
		[ -n "$rt" ] && ! command -v "$rt" >/dev/null && continue
		args=(--backend container); [ -n "$rt" ] && args+=(--runtime "$rt")
		"$SANDGATE" run -c "$CFG" --sandbox "sgt-r$$" --rootfs "$RFS" --workspace "$WS" "${args[@]}" -- \
			/bin/busybox true >"$T/l.out" 2>"$T/l.err"
		rc=$?
		[ $rc = 2 ] && grep -q "$RFS/$link is a symlink" "$T/l.err" ||
			fail "rootfs with $link -> elsewhere (${rt:-own}): rc $rc: $(cat "$T/l.err")"
		[ -z "$(ls -A "$VICTIM")" ] || fail "files created through the $link symlink: $(ls -A "$VICTIM")"
	done
	rm -f "$RFS/$link"
done
ok "a rootfs whose etc, etc/ssl/certs or workspace is a symlink is refused (2); nothing is created outside it"
