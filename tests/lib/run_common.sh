# Sourced by tests/integration/run_*.sh: one suite, run against each
# backend of `sandgate run`. Everything stays on this machine: upstreams on
# loopback reached through made-up names (resolver.hosts), destinations in
# TEST-NET / documentation ranges that never leave the host.
#   run_suite NAME -- ARGS...   (ARGS go to `sandgate run`, e.g. --backend gvisor)
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RUN_PIDS=()
RUN_IDS=()
RUN_MOUNTS=()
TCPDUMP_PID=

run_cleanup() {
	local p id
	for p in "${RUN_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${RUN_PIDS[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	[ -n "$TCPDUMP_PID" ] && kill "$TCPDUMP_PID" 2>/dev/null
	for p in "${RUN_MOUNTS[@]}"; do umount "$p" 2>/dev/null; done
	# Whatever a failed test left, by its exact id only.
	for id in "${RUN_IDS[@]}"; do
		nft delete table inet "sandgate_$id" 2>/dev/null
		ip link del "sgr$id" 2>/dev/null
		ip netns del "sgr$id" 2>/dev/null
	done
	cleanup
}
trap run_cleanup EXIT

# run_setup - CA + upstreams + config; sets API_PORT, API_LOG, CFG, A (audit)
run_setup() {
	need_root
	need curl openssl python3 jq nft ip tcpdump
	mkcerts api.example.test other.example.test
	upstream api --cert api.example.test
	API_PORT=$UP_PORT API_LOG=$UP_LOG
	A=$T/audit.jsonl
	CFG=$T/sg.yaml
	cat >"$CFG" <<YAML
version: 1
gateway:
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
      other.example.test: [127.0.0.1]
  limits: { handshake_timeout: 2s, drain_timeout: 1s }
audit: { path: $A }
sandboxes:
  "sgt-*":
    allow:
      - { name: api, domains: [api.example.test], ports: [$API_PORT] }
default: deny
YAML
	WS=$T/ws
	mkdir -p "$WS"
	cp "$T/certs/ca.pem" "$WS/ca.pem"
	# Does this gateway build have the DNS responder?
	DNS=0
	if "$SANDGATE" serve -c <(sed 's/^  workers: 1/  workers: 1\n  listen: { transparent: "[::]:0", dns: "[::]:0" }/' "$CFG") \
		--check >/dev/null 2>&1; then DNS=1; fi
}

# tcpdump_start - capture, on the host's real (default-route) interface,
# anything to or from the sandbox ranges and the made-up destinations.
tcpdump_start() {
	WAN_IF=$(ip route show default | awk '{for (i=1;i<NF;i++) if ($i=="dev") print $(i+1); exit}')
	[ -n "$WAN_IF" ] || { WAN_IF=; return; }
	tcpdump -i "$WAN_IF" -n -U -w "$T/wan.pcap" \
		'net 10.231.0.0/16 or net 203.0.113.0/24 or net 198.51.100.0/24 or ip6 net fd53:6761:7465::/48 or ip6 net 2001:db8::/32' \
		>/dev/null 2>"$T/tcpdump.err" &
	TCPDUMP_PID=$!
	for _ in $(seq 1 100); do grep -q "listening on" "$T/tcpdump.err" && return; sleep 0.05; done
	fail "tcpdump did not start: $(cat "$T/tcpdump.err")"
}

tcpdump_check() {
	[ -n "$TCPDUMP_PID" ] || { echo "note: no default-route interface; tcpdump check skipped"; return; }
	sleep 0.3
	kill -INT "$TCPDUMP_PID"; wait "$TCPDUMP_PID" 2>/dev/null; TCPDUMP_PID=
	local n; n=$(tcpdump -r "$T/wan.pcap" -n 2>/dev/null | wc -l)
	[ "$n" -eq 0 ] || fail "$n packets of the sandbox on $WAN_IF: $(tcpdump -r "$T/wan.pcap" -n 2>/dev/null | head -5)"
	ok "tcpdump on $WAN_IF saw no packet from the sandbox"
}

# run_id FILE - the run's id from its -v output
run_id() {
	sed -n 's/.*(\w* backend): sgr\([0-9a-f]\{8\}\) .*/\1/p' "$1" | head -1
}

# assert_gone ID - nothing of the run remains
assert_gone() {
	local id=$1
	[ -n "$id" ] || fail "no run id"
	ip netns list | grep -q "sgr$id" && fail "namespace sgr$id remains"
	ip link show "sgr$id" >/dev/null 2>&1 && fail "interface sgr$id remains"
	nft list table inet "sandgate_$id" >/dev/null 2>&1 && fail "nft table sandgate_$id remains"
	[ -e "/run/sandgate/run/$id" ] && fail "state /run/sandgate/run/$id remains"
	local c
	for c in /sys/fs/cgroup/memory /sys/fs/cgroup/pids /sys/fs/cgroup; do
		[ -n "$(find "$c" -maxdepth 4 -name "sandgate-$id" 2>/dev/null)" ] && fail "cgroup sandgate-$id remains in $c"
	done
	pgrep -f "run/sandgate/run/$id" >/dev/null && fail "a process of run $id remains: $(pgrep -af "run/sandgate/run/$id")"
	return 0
}

# The agent: one script, every check, one result line each.
write_agent() {
	cat >"$WS/agent.sh" <<SH
#!/bin/sh
P=$API_PORT
r() { echo "\$1=\$2" >>/workspace/results; }
: >/workspace/results
out=\$(curl -sS --max-time 10 --cacert /workspace/ca.pem --resolve api.example.test:\$P:203.0.113.7 https://api.example.test:\$P/v4 2>&1)
r curl4 "\$out"
out=\$(curl -sS --max-time 10 --cacert /workspace/ca.pem --resolve "api.example.test:\$P:[2001:db8::7]" https://api.example.test:\$P/v6 2>&1)
r curl6 "\$out"
out=\$(python3 - 2>&1 <<PY
import socket, ssl
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
s = socket.create_connection(("203.0.113.8", \$P), timeout=10)
t = ctx.wrap_socket(s, server_hostname="api.example.test")
t.sendall(b"GET /py HTTP/1.1\\r\\nHost: api.example.test\\r\\nConnection: close\\r\\n\\r\\n")
d = b""
while True:
    c = t.recv(4096)
    if not c: break
    d += c
print(d.split(b"\\r\\n\\r\\n", 1)[1].decode())
PY
)
r python "\$out"
if curl -sS --max-time 10 --cacert /workspace/ca.pem --resolve other.example.test:\$P:203.0.113.9 https://other.example.test:\$P/deny >/dev/null 2>&1; then r denied reached; else r denied refused; fi
if curl -fsS --max-time 5 http://\$HOST4:\$HOSTPORT/ >/dev/null 2>&1; then r hostport reached; else r hostport refused; fi
python3 - <<PY >>/workspace/results 2>&1
import socket
for fam, dst in ((socket.AF_INET, ("203.0.113.10", \$UDPPORT)), (socket.AF_INET, ("\$HOST4", \$UDPPORT)), (socket.AF_INET6, ("\$HOST6", \$UDPPORT))):
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM); s.sendto(b"leak", dst)
    except OSError as e:
        pass
print("udp=sent")
PY
out=\$( (getent hosts unlisted.example.test 2>&1; echo "rc=\$?") | tr '\n' ' ')
r unlisted "\$out"
out=\$( (getent hosts api.example.test 2>&1; echo "rc=\$?") | tr '\n' ' ')
r listed "\$out"
r env_ssl "\$SSL_CERT_FILE"
r env_home "\$HOME"
r secret "\${SGT_HOST_SECRET:-unset}"
exit 7
SH
	chmod +x "$WS/agent.sh"
}

# A UDP and a TCP listener on the host, on all addresses: nothing from the
# sandbox may arrive at either.
host_listeners() {
	UDPPORT=$(freeport) HOSTPORT=$(freeport)
	bg udpl python3 -c "
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(('::', $UDPPORT))
print('ready', flush=True)
while True:
    d, a = s.recvfrom(100); print('got', a, flush=True)"
	bg tcpl python3 -c "
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('::', $HOSTPORT)); s.listen()
print('ready', flush=True)
while True:
    c, a = s.accept(); print('got', a, flush=True); c.close()"
	for _ in $(seq 1 100); do grep -q ready "$T/udpl.out" && grep -q ready "$T/tcpl.out" && return; sleep 0.05; done
	fail "host listeners did not start"
}

res() { sed -n "s/^$1=//p" "$WS/results" | head -1; }

# run_suite ARGS... - the whole suite against `sandgate run ARGS`
run_suite() {
	run_setup
	host_listeners
	local name=sgt-$$ rc
	tcpdump_start
	write_agent
	export SGT_HOST_SECRET=do-not-leak
	# HOST4/HOST6 are only known once the run allocated its subnet: the
	# agent reads them from resolv.conf.
	sed -i '2i HOST4=$(sed -n "s/^nameserver \\([0-9.]*\\)$/\\1/p" /etc/resolv.conf | head -1)\nHOST6=$(sed -n "s/^nameserver \\([0-9a-f:]*:[0-9a-f:]*\\)$/\\1/p" /etc/resolv.conf | head -1)\nUDPPORT='"$UDPPORT"'\nHOSTPORT='"$HOSTPORT" "$WS/agent.sh"
	local t0=$(date +%s%N)
	# (through cat: gVisor writes a regular file at its own offset, so two
	# streams sharing one file would overwrite each other)
	"$SANDGATE" run -v -c "$CFG" --sandbox "$name" --workspace "$WS" "$@" -- /workspace/agent.sh \
		2> >(cat >"$T/run.err") | cat >"$T/run.out"
	rc=${PIPESTATUS[0]}
	sleep 0.1
	local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	local id; id=$(run_id "$T/run.err"); RUN_IDS+=("$id")
	[ -f "$WS/results" ] || fail "the agent did not run (rc $rc): $(cat "$T/run.err")"
	echo "--- agent results ($ms ms):"; sed 's/^/    /' "$WS/results"
	[ "$rc" = 7 ] || fail "exit status $rc, want CMD's 7: $(cat "$T/run.err")"
	ok "CMD's exit status returned"
	[ "$(res curl4)" = "hello from api" ] || fail "allowed HTTPS over IPv4 (curl): $(res curl4)"
	[ "$(res python)" = "hello from api" ] || fail "allowed HTTPS (python): $(res python)"
	ok "allowed HTTPS to a local upstream works (curl, python)"
	[ "$(res curl6)" = "hello from api" ] || fail "allowed HTTPS over IPv6: $(res curl6)"
	audit_has "$A" '.event == "connection" and .sandbox == "'"$name"'" and .decision == "allow"
		and .dst_host == "api.example.test" and ((.src // "") | test("^\\[?fd53:"))'
	audit_has "$A" '.event == "connection" and .sandbox == "'"$name"'" and .decision == "allow"
		and ((.src // "") | startswith("10.231."))'
	ok "IPv6 goes through the gateway too (audited under the registered name)"
	[ "$(res denied)" = refused ] || fail "denied domain reached"
	audit_has "$A" '.decision == "deny" and .sandbox == "'"$name"'" and .dst_host == "other.example.test"'
	grep -q '"path": "/deny"' "$API_LOG" && fail "denied request reached the upstream"
	ok "a denied domain fails and never reaches the upstream"
	[ "$(res hostport)" = refused ] || fail "a host port was reachable"
	grep -q got "$T/tcpl.out" && fail "host TCP listener got a connection from the sandbox"
	audit_has "$A" '.decision == "deny" and .sandbox == "'"$name"'" and .dst_port == '"$HOSTPORT"
	ok "other host ports are not reachable (redirected and judged)"
	grep -q got "$T/udpl.out" && fail "UDP from the sandbox arrived: $(cat "$T/udpl.out")"
	ok "UDP to any address is dropped"
	case "$(res unlisted)" in *rc=0*) fail "unlisted name resolved: $(res unlisted)" ;; esac
	if [ "$DNS" = 1 ]; then
		case "$(res listed)" in *rc=0*) ;; *) fail "listed name did not resolve: $(res listed)" ;; esac
		ok "an unlisted name does not resolve; a listed one does"
	else
		case "$(res listed)" in *rc=0*) fail "DNS answered without a DNS listener" ;; esac
		ok "no DNS listener in this build: DNS is dropped (nothing resolves)"
	fi
	[ "$(res env_ssl)" = /run/sandgate/ca.pem ] || fail "SSL_CERT_FILE: $(res env_ssl)"
	[ "$(res secret)" = unset ] || fail "a host variable leaked into the sandbox"
	ok "CA variables set; host environment not inherited"
	tcpdump_check
	assert_gone "$id"
	ok "after the run no namespace, interface, nft table, cgroup, state or process remains"
}

# run_kill_gateway ARGS... - kill -9 the gateway mid-run: no egress after
run_kill_gateway() {
	local name=sgt-k$$ rc pid gw
	rm -f "$WS/results" "$WS/phase1" "$WS/killed"
	cat >"$WS/kill.sh" <<SH
#!/bin/sh
P=$API_PORT
curl -sS --max-time 10 --cacert /workspace/ca.pem --resolve api.example.test:\$P:203.0.113.7 https://api.example.test:\$P/before >/workspace/before 2>&1
touch /workspace/phase1
while [ ! -f /workspace/killed ]; do sleep 0.1; done
if curl -sS --max-time 5 --cacert /workspace/ca.pem --resolve api.example.test:\$P:203.0.113.7 https://api.example.test:\$P/after >/workspace/after 2>&1; then echo reached >/workspace/results; else echo refused >/workspace/results; fi
SH
	chmod +x "$WS/kill.sh"
	tcpdump_start
	"$SANDGATE" run -v -c "$CFG" --sandbox "$name" --workspace "$WS" "$@" -- /workspace/kill.sh \
		>"$T/kill.out" 2>"$T/kill.err" &
	pid=$!; RUN_PIDS+=($pid)
	for _ in $(seq 1 600); do [ -f "$WS/phase1" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
	[ -f "$WS/phase1" ] || fail "kill test: the sandbox did not start: $(cat "$T/kill.err")"
	grep -q "hello from api" "$WS/before" || fail "kill test: first request failed: $(cat "$WS/before")"
	gw=$(pgrep -P $pid -f " serve -c ")
	[ -n "$gw" ] || fail "kill test: no gateway child of $pid"
	kill -9 $gw
	touch "$WS/killed"
	wait $pid
	[ "$(cat "$WS/results")" = refused ] || fail "after the gateway died the sandbox still reached the upstream"
	grep -q '"path": "/after"' "$API_LOG" && fail "a request after the gateway died reached the upstream"
	tcpdump_check
	assert_gone "$(run_id "$T/kill.err")"
	ok "gateway killed: the sandbox has no egress, nothing leaves the host"
}

# run_signals ARGS... - SIGTERM and SIGINT to `sandgate run`, and its parent killed
run_signals() {
	local sig pid id rc
	for sig in TERM INT; do
		"$SANDGATE" run -v -c "$CFG" --sandbox "sgt-s$$" "$@" -- sleep 60 >"$T/sig.out" 2>"$T/sig.err" &
		pid=$!; RUN_PIDS+=($pid)
		for _ in $(seq 1 600); do id=$(run_id "$T/sig.err"); [ -n "$id" ] && pgrep -f "sleep 60" >/dev/null && break; sleep 0.05; done
		[ -n "$id" ] || fail "SIG$sig: the run did not start: $(cat "$T/sig.err")"
		kill -$sig $pid
		wait $pid; rc=$?
		[ $rc -ne 0 ] || fail "SIG$sig: exit 0"
		assert_gone "$id"
		ok "SIG$sig to sandgate run tears everything down (exit $rc)"
	done
	# The parent (a supervisor) is SIGKILLed: PR_SET_PDEATHSIG ends the run.
	# (two commands, so bash forks the run instead of exec'ing it)
	bash -c 'err=$1; shift; "$@" 2>"$err"; true' - "$T/pd.err" \
		"$SANDGATE" run -v -c "$CFG" --sandbox "sgt-p$$" "$@" -- sleep 60 &
	pid=$!
	for _ in $(seq 1 600); do id=$(run_id "$T/pd.err" 2>/dev/null); [ -n "$id" ] && break; sleep 0.05; done
	[ -n "$id" ] || fail "parent-death: the run did not start"
	sleep 0.3
	kill -9 $pid
	for _ in $(seq 1 100); do [ -e "/run/sandgate/run/$id" ] || break; sleep 0.1; done
	sleep 0.2
	assert_gone "$id"
	ok "the parent of sandgate run killed: torn down"
}

# run_userns ARGS... - root in the sandbox is not root on the host: the
# uid map is not the identity (not even with a root-owned workspace), and
# what CMD writes to /workspace belongs to the workspace's owner.
run_userns() {
	local ws owner f
	for owner in 4321:4322 0:0; do
		ws=$T/ws-userns-${owner%%:*}
		mkdir -p "$ws"; chown "$owner" "$ws"; chmod 0755 "$ws"
		"$SANDGATE" run -c "$CFG" --sandbox "sgt-u$$" --workspace "$ws" "$@" -- sh -c '
			head -1 /proc/self/uid_map >/workspace/uid_map
			head -1 /proc/self/gid_map >/workspace/gid_map
			id -u >/workspace/id
			cat /etc/ssl/certs/ca-certificates.crt /usr/bin/env >/dev/null && echo readable >/workspace/ro
			echo written >/workspace/written' >"$T/userns.out" 2>"$T/userns.err" \
			|| fail "userns run ($owner): $(cat "$T/userns.err")"
		f=$(awk '{print $1, $2, $3}' "$ws/uid_map")
		[ -n "$f" ] || fail "no uid_map from inside: $(cat "$T/userns.err")"
		[ "$f" != "0 0 4294967295" ] || fail "workspace $owner: no user namespace (uid_map is the identity)"
		local host; host=$(awk '{print $2}' "$ws/uid_map")
		[ "$(awk '{print $1}' "$ws/uid_map")" = 0 ] && [ "$host" != 0 ] ||
			fail "workspace $owner: root inside maps to host uid $host: $(cat "$ws/uid_map")"
		[ "$(awk '{print $2}' "$ws/gid_map")" != 0 ] || fail "workspace $owner: gid 0 inside is gid 0 outside"
		[ "$(cat "$ws/id")" = 0 ] || fail "CMD is not root inside: $(cat "$ws/id")"
		[ "$(cat "$ws/ro" 2>/dev/null)" = readable ] || fail "host views not readable in the user namespace"
		[ "$(stat -c %u:%g "$ws/written")" = "$owner" ] ||
			fail "a file written to /workspace is owned by $(stat -c %u:%g "$ws/written") on the host, want $owner"
		ok "workspace owned by $owner: root inside is host uid $host, its files land as $owner"
	done
}

# run_stopped ARGS... - the gateway stops the sandbox (POST .../stop, what
# block_and_kill does): sandgate run kills it at once, says why, exits 137,
# the stop is audited with its reason, and nothing of the run remains.
# held_run NAME TAG ARGS... - start `sandgate run` with a CMD that waits;
# sets pid, id and sock (its gateway's admin socket) once CMD runs. TAG
# names the output files ($T/TAG.out, $T/TAG.err).
held_run() {
	local n=$1 tag=$2; shift 2
	rm -f "$WS/up"
	"$SANDGATE" run -v -c "$CFG" --sandbox "$n" --workspace "$WS" "$@" -- \
		sh -c 'echo up >/workspace/up; sleep 60' >"$T/$tag.out" 2>"$T/$tag.err" &
	pid=$!; RUN_PIDS+=($pid)
	for _ in $(seq 1 1200); do [ -f "$WS/up" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
	[ -f "$WS/up" ] || fail "$tag: the sandbox did not start: $(cat "$T/$tag.err")"
	id=$(run_id "$T/$tag.err"); RUN_IDS+=("$id")
	sock=$(sed -n 's/.* admin \([^,]*\), log .*/\1/p' "$T/$tag.err" | head -1)
	[ -S "$sock" ] || fail "$tag: no admin socket in: $(head -3 "$T/$tag.err")"
}

run_stopped() {
	local name=sgt-x$$ pid id sock rc t0
	held_run "$name" stop "$@"
	t0=$(date +%s%N)
	curl -sS --max-time 5 --unix-socket "$sock" -X POST -d '{"reason":"secret_violation"}' \
		-o "$T/stop.body" -w '%{http_code}' "http://x/v1/sandboxes/$name/stop" >"$T/stop.code"
	[ "$(cat "$T/stop.code")" = 200 ] || fail "stop: $(cat "$T/stop.code") $(cat "$T/stop.body")"
	wait $pid; rc=$?
	local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ $rc = 137 ] || fail "stopped run: exit $rc, want 137: $(tail -5 "$T/stop.err")"
	grep -q "the gateway stopped sandbox $name (secret_violation): killing it" "$T/stop.err" ||
		fail "stopped run: no reason given: $(tail -5 "$T/stop.err")"
	audit_has "$A" '.event == "sandbox_stop" and .sandbox == "'"$name"'" and .decision == "deny" and .reason == "secret_violation"'
	assert_gone "$id"
	ok "the gateway stopped the sandbox: killed in $ms ms (exit 137, reason printed and audited), nothing left"
}

# run_nosetid ARGS... - nothing the sandbox writes carries a setuid or setgid
# bit to the host. The workspace is root's (root inside writes there as its
# owner): each way of setting or creating such a mode is tried inside, then
# the host looks at the files. Plain modes still work; chmod g+s on a
# directory is refused too (seccomp cannot tell it from a file).
run_nosetid() {
	local ws=$T/ws-nosetid v got left
	rm -rf "$ws"; mkdir -p "$ws"; chown 0:0 "$ws"; chmod 0755 "$ws"
	cat >"$ws/nosetid.sh" <<'SH'
#!/bin/sh
# name=ok: the call succeeded; name=refused: it failed (the mode is what the host sees).
cd /workspace || exit 1
t() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n=ok"; else echo "$n=refused"; fi >>nosetid.out; }
: >nosetid.out
t chmod_us sh -c 'cp /bin/true chmod_us && chmod u+s chmod_us'
t chmod_gs sh -c 'cp /bin/true chmod_gs && chmod g+s chmod_gs'
t install install -m 4755 /bin/true install
t py_open python3 -c 'import os; os.close(os.open("py_open", os.O_CREAT | os.O_WRONLY, 0o4755))'
t py_chmod python3 -c 'import os; open("py_chmod", "w").close(); os.chmod("py_chmod", 0o6755)'
t py_mknod python3 -c 'import os, stat; os.mknod("py_mknod", stat.S_IFREG | 0o2755)'
# fchmodat2 (Linux 6.6) and openat2 by number: libc may not wrap them.
t fchmodat2 python3 -c 'import ctypes; l = ctypes.CDLL(None); open("fchmodat2", "w").close(); exit(l.syscall(452, -100, b"fchmodat2", 0o4755, 0) != 0)'
t openat2 python3 -c 'import ctypes, os, struct; l = ctypes.CDLL(None); h = ctypes.create_string_buffer(struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, 0o4755, 0)); exit(l.syscall(437, -100, b"openat2", h, 24) < 0)'
# O_TMPFILE with the mode, then linked in (no write: a write would clear the bit).
t tmpfile python3 -c 'import ctypes, os; l = ctypes.CDLL(None); fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o4755); exit(l.linkat(-100, b"/proc/self/fd/%d" % fd, -100, b"tmpfile", 0x400) != 0)'
t plain755 sh -c 'cp /bin/true plain755 && chmod 0755 plain755'
t plain600 sh -c 'echo x >plain600 && chmod 0600 plain600'
t plain644 python3 -c 'import os; os.close(os.open("plain644", os.O_CREAT | os.O_WRONLY, 0o644))'
t dir_gs sh -c 'mkdir dir_gs && chmod g+s dir_gs'
t dir_mk python3 -c 'import os; os.mkdir("dir_mk", 0o2755)'
echo done >>nosetid.out
SH
	chmod 0755 "$ws/nosetid.sh"
	"$SANDGATE" run -c "$CFG" --sandbox "sgt-n$$" --workspace "$ws" "$@" -- /workspace/nosetid.sh \
		>"$T/nosetid.run" 2>&1
	grep -qx done "$ws/nosetid.out" 2>/dev/null || fail "nosetid: the script did not run: $(tail -5 "$T/nosetid.run")"
	echo "--- nosetid results (inside):" $(grep -v done "$ws/nosetid.out")
	for v in chmod_us chmod_gs install py_open py_chmod py_mknod fchmodat2 openat2 tmpfile; do
		[ -e "$ws/$v" ] || continue      # refused before anything was created
		got=$(stat -c %a "$ws/$v")
		[ -z "$(find "$ws/$v" -perm /6000)" ] || fail "nosetid: $v left mode $got on the host (owner $(stat -c %u:%g "$ws/$v"))"
	done
	left=$(find "$ws" -perm /6000 -type f)
	[ -z "$left" ] || fail "nosetid: setuid/setgid files in the workspace: $(ls -ln $left)"
	ok "no setuid/setgid file from the sandbox in a root-owned workspace (chmod u+s, g+s, install -m 4755, open/mknod/fchmodat2/openat2/O_TMPFILE with 04755)"
	for v in chmod_us chmod_gs install py_open py_chmod py_mknod; do
		grep -qx "$v=refused" "$ws/nosetid.out" || fail "nosetid: $v succeeded inside"
	done
	ok "the sandbox is told: each attempt fails (EPERM) instead of silently dropping the bit"
	[ "$(stat -c %a "$ws/plain755" 2>/dev/null)" = 755 ] && [ "$(stat -c %a "$ws/plain600" 2>/dev/null)" = 600 ] &&
		[ -f "$ws/plain644" ] && grep -qx "plain755=ok" "$ws/nosetid.out" && grep -qx "plain600=ok" "$ws/nosetid.out" ||
		fail "nosetid: plain chmod 0755/0600 or open 0644 broken: $(grep plain "$ws/nosetid.out" | tr '\n' ' ')"
	ok "plain modes still work (chmod 0755, 0600; open with 0644)"
	grep -qx "dir_gs=refused" "$ws/nosetid.out" && [ -d "$ws/dir_gs" ] && [ -z "$(find "$ws/dir_gs" -perm /2000)" ] ||
		fail "nosetid: chmod g+s on a directory: $(grep dir_gs "$ws/nosetid.out"), host mode $(stat -c %a "$ws/dir_gs" 2>&1)"
	[ -d "$ws/dir_mk" ] && [ -z "$(find "$ws/dir_mk" -perm /2000)" ] ||
		fail "nosetid: mkdir 02755: $(grep dir_mk "$ws/nosetid.out"), host mode $(stat -c %a "$ws/dir_mk" 2>&1)"
	ok "directories: chmod g+s refused (as for files), mkdir works and gets no setgid bit"
	rm -rf "$ws"
}

# run_unregistered ARGS... - someone removes the sandbox's registration
# (DELETE on the gateway): it has no identity left, and is killed as if
# stopped (reason "unregistered", exit 137).
run_unregistered() {
	local name=sgt-y$$ pid id sock rc
	held_run "$name" unreg "$@"
	[ "$(curl -sS --max-time 5 --unix-socket "$sock" -X DELETE -o /dev/null -w '%{http_code}' \
		"http://x/v1/sandboxes/$name")" = 204 ] || fail "unregister test: DELETE failed"
	wait $pid; rc=$?
	[ $rc = 137 ] && grep -q "the gateway stopped sandbox $name (unregistered): killing it" "$T/unreg.err" ||
		fail "unregistered run: exit $rc: $(tail -5 "$T/unreg.err")"
	assert_gone "$id"
	ok "the sandbox's registration removed by someone else: killed (exit 137), nothing left"
}

# run_idmap_fallback ARGS... - a workspace on a filesystem that cannot be
# idmapped (ramfs): root inside becomes the workspace's owner (notice),
# or, for a root-owned one, there is no user namespace (notice); CMD runs
# either way, its files land as the owner, and setuid bits stay refused.
run_idmap_fallback() {
	local owner ws host
	for owner in 4321:4322 0:0; do
		ws=$T/ramfs-${owner%%:*}
		mkdir -p "$ws"; mount -t ramfs ramfs "$ws" || fail "mount ramfs"
		RUN_MOUNTS+=("$ws")
		chown "$owner" "$ws"; chmod 0755 "$ws"
		"$SANDGATE" run -c "$CFG" --sandbox "sgt-f$$" --workspace "$ws" "$@" -- sh -c '
			head -1 /proc/self/uid_map >/workspace/uid_map
			echo written >/workspace/written
			cp /bin/true /workspace/s && chmod u+s /workspace/s 2>/dev/null; true' \
			>"$T/fb.out" 2>"$T/fb.err" || fail "fallback run ($owner): $(cat "$T/fb.err")"
		host=$(awk '{print $2}' "$ws/uid_map")
		if [ "$owner" = 0:0 ]; then
			grep -q "notice: no user namespace: the workspace is root's and cannot be idmapped" "$T/fb.err" ||
				fail "root-owned ramfs: no notice: $(cat "$T/fb.err")"
		else
			grep -q "notice: the workspace cannot be idmapped .*: root in the sandbox is its owner, uid 4321" "$T/fb.err" ||
				fail "4321-owned ramfs: no notice: $(cat "$T/fb.err")"
			[ "$host" = 4321 ] || fail "4321-owned ramfs: root inside is host uid $host"
		fi
		[ "$(stat -c %u:%g "$ws/written")" = "$owner" ] ||
			fail "ramfs $owner: file owned by $(stat -c %u:%g "$ws/written")"
		[ -z "$(find "$ws" -perm /6000 -type f)" ] || fail "ramfs $owner: a setuid file was made"
		umount "$ws"
		ok "workspace that cannot be idmapped, owned by $owner: fallback with a notice (root inside = host uid $host), files land as $owner, no setuid"
	done
}
