#!/usr/bin/env bash
# SIGHUP reload: a valid new policy takes effect (audit policy_reload allow);
# an invalid one (unknown key, YAML syntax error) is rejected, logged and
# audited (deny invalid_config, "file:line:col" error) and the running
# policy stays; a CONNECT tunnel opened before a reload that removes its
# rule keeps working (in-flight connections keep their snapshot).
# Also: `serve --check` and `policy check` on good and bad files.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
need curl python3 jq openssl
PXC="python3 $TOP/tests/lib/px_client.py"

mkcerts api.example.test
upstream plain
PLAIN=$UP_PORT PLAIN_LOG=$UP_LOG
upstream tls --cert api.example.test
TLSP=$UP_PORT TLS_LOG=$UP_LOG
PP=$(freeport)

# write_cfg RULES... - the config with these allow rules (YAML flow lines)
write_cfg() {
	{
		cat <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 2
  resolver:
    hosts:
      a.example.test: [127.0.0.1]
      b.example.test: [127.0.0.1]
      api.example.test: [127.0.0.1]
audit: { path: $T/audit.jsonl }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
YAML
		local r
		for r in "$@"; do echo "      - $r"; done
		echo "default: deny"
	} >"$T/sg.yaml.new"
	mv "$T/sg.yaml.new" "$T/sg.yaml"
}
RULE_A="{ name: a, domains: [a.example.test], ports: [$PLAIN] }"
RULE_B="{ name: b, domains: [b.example.test], ports: [$PLAIN] }"
RULE_T="{ name: tunnel, domains: [api.example.test], ports: [$TLSP] }"

# status NAME URL - HTTP status of an absolute-form GET through the proxy
status() { pcurl "$1" "$2" | cut -d' ' -f1; }
# tunnel_status NAME - status of a fresh CONNECT to api.example.test (000 = refused)
tunnel_status() {
	local r
	r=$(pcurl "$1" --cacert "$T/certs/ca.pem" "https://api.example.test:$TLSP/$1")
	if [ "${r%% *}" = 000 ]; then
		grep -o 'response [0-9]*' "$T/$1.err" | awk '{print $2}'
	else
		echo "${r%% *}"
	fi
}
# reload_wait N - until the audit has N policy_reload records (5 s)
reload_wait() {
	local i
	for i in $(seq 1 100); do
		[ "$(audit_count '.event == "policy_reload"')" -ge "$1" ] && return 0
		sleep 0.05
	done
	fail "no policy_reload record number $1 after SIGHUP"
}

write_cfg "$RULE_A" "$RULE_T"
sg_start "$T/sg.yaml"

# --- policy 1: a and the tunnel allowed, b denied ------------------------
check "before reload: a.example.test 200" test "$(status a1 "http://a.example.test:$PLAIN/a1")" = 200
check "before reload: b.example.test 403" test "$(status b1 "http://b.example.test:$PLAIN/b1")" = 403
check "before reload: b's reason is default_deny" test "$(hdr b1 X-Sandgate-Reason)" = default_deny

# A long-lived tunnel, opened now, used again after the reloads.
$PXC tunnel "$PP" api.example.test "$TLSP" --cafile "$T/certs/ca.pem" --go "$T/tun.go" >"$T/tun.out" 2>"$T/tun.err" &
TUN_PID=$!
PIDS+=($TUN_PID)
for _ in $(seq 1 100); do grep -q ready "$T/tun.out" && break; sleep 0.05; done
grep -q ready "$T/tun.out" || fail "tunnel client not ready: $(cat "$T/tun.out" "$T/tun.err")"
check "tunnel: first request over the tunnel succeeded" \
	jqe -s '.[0].first[0] == 200' "$T/tun.out"

# --- policy 2: b allowed, the tunnel's rule removed ------------------------
write_cfg "$RULE_A" "$RULE_B"
kill -HUP "$SG_PID"
reload_wait 1
check "audit: policy_reload allow reloaded" \
	audit_exists '.event == "policy_reload" and .decision == "allow" and .reason == "reloaded"'
check "gateway log says reloaded" grep -q "reloaded" "$T/gw.log"
check "after reload: b.example.test 200" test "$(status b2 "http://b.example.test:$PLAIN/b2")" = 200
check "after reload: a.example.test still 200" test "$(status a2 "http://a.example.test:$PLAIN/a2")" = 200
check "after reload: a new CONNECT to api.example.test is 403" test "$(tunnel_status t2)" = 403
check "upstream saw /b2 but not /b1" \
	jqe -s '([.[].path] | index("/b2") != null and index("/b1") == null)' "$PLAIN_LOG"
check "audit: b allowed by rule b after the reload" \
	audit_exists '.event == "request" and .path == "/b2" and .decision == "allow" and .rule == "b"'

# --- invalid configs: rejected, policy 2 stays --------------------------
cp "$T/sg.yaml" "$T/good.yaml"
sed 's/^default: deny$/default: deny\nbogus_top_level: 1/' "$T/good.yaml" >"$T/sg.yaml"
bad_line=$(grep -n '^bogus_top_level' "$T/sg.yaml" | cut -d: -f1)
kill -HUP "$SG_PID"
reload_wait 2
check "gateway log says the reload was rejected, with FILE:LINE" \
	grep -Eq "reload rejected.*sg\.yaml:$bad_line:[0-9]+: .*bogus_top_level" "$T/gw.log"
check "audit: policy_reload deny invalid_config with FILE:$bad_line:COL error" \
	audit_exists '.event == "policy_reload" and .decision == "deny" and .reason == "invalid_config" and (.error | test("sg\\.yaml:'"$bad_line"':[0-9]+: .*bogus_top_level"))'
check "after rejected reload: b.example.test still 200" test "$(status b3 "http://b.example.test:$PLAIN/b3")" = 200
check "after rejected reload: a.example.test still 200" test "$(status a3 "http://a.example.test:$PLAIN/a3")" = 200
check "after rejected reload: CONNECT to api.example.test still 403" test "$(tunnel_status t3)" = 403

# A YAML syntax error (unclosed flow mapping), and a bad value in a rule.
sed 's/^  listen: { proxy: \(.*\) }$/  listen: { proxy: \1/' "$T/good.yaml" >"$T/sg.yaml"
kill -HUP "$SG_PID"
reload_wait 3
check "audit: syntax error rejected with FILE:LINE:COL" \
	audit_exists '.event == "policy_reload" and .decision == "deny" and .reason == "invalid_config" and (.error | test("sg\\.yaml:[0-9]+:[0-9]+: "))'
sed "s/ports: \[$PLAIN\] }/ports: [$PLAIN, 70000] }/" "$T/good.yaml" >"$T/sg.yaml"
grep -q 70000 "$T/sg.yaml" || fail "could not write the bad-port config"
kill -HUP "$SG_PID"
reload_wait 4
check "audit: out-of-range port rejected (invalid_config)" \
	audit_exists '.event == "policy_reload" and .decision == "deny" and .reason == "invalid_config" and (.error | test("sg\\.yaml:[0-9]+:[0-9]+: "))'
mv "$T/sg.yaml" "$T/sg.yaml.away"
kill -HUP "$SG_PID"
reload_wait 5
mv "$T/sg.yaml.away" "$T/sg.yaml"
check "audit: a missing config file is rejected (invalid_config)" \
	audit_exists '.event == "policy_reload" and .decision == "deny" and .reason == "invalid_config" and (.error | test("sg\\.yaml"))'
check "exactly one accepted reload so far" test "$(audit_count '.event == "policy_reload" and .decision == "allow"')" = 1
check "after four rejected reloads: b still 200, a still 200, api CONNECT still 403" \
	test "$(status b4 "http://b.example.test:$PLAIN/b4") $(status a4 "http://a.example.test:$PLAIN/a4") $(tunnel_status t4)" = "200 200 403"

# --- the tunnel opened under policy 1 still works --------------------------
touch "$T/tun.go"
for _ in $(seq 1 100); do kill -0 $TUN_PID 2>/dev/null || break; sleep 0.05; done
res=$(tail -n 1 "$T/tun.out")
check "tunnel opened before the reloads: second request on it succeeded ($res)" \
	jqe '.second[0] == 200 and (.second[1] | startswith("hello from tls"))' <<<"$res"
check "TLS upstream saw /one and /two over the tunnel" \
	jqe -s '[.[].path] | index("/one") != null and index("/two") != null' "$TLS_LOG"

# --- back to a good config: reload accepted again ---------------------------
cp "$T/good.yaml" "$T/sg.yaml"
kill -HUP "$SG_PID"
reload_wait 6
check "a valid config after rejected ones is accepted" \
	test "$(audit_count '.event == "policy_reload" and .decision == "allow"')" = 2
check "audit: policy_reload records carry increasing generations" \
	jqe -s '[.[] | select(.event == "policy_reload" and .decision == "allow") | .generation] | . == (sort) and length == 2 and .[0] < .[1]' "$T/audit.jsonl"

check "gateway alive after the reloads" sg_alive
sg_stop

# --- offline validation -----------------------------------------------------
sed 's/^default: deny$/default: deny\nbogus_top_level: 1/' "$T/good.yaml" >"$T/bad.yaml"
"$SANDGATE" serve -c "$T/bad.yaml" --check >"$T/chk.out" 2>"$T/chk.err"; rc=$?
check "serve --check bad.yaml exits 1 (got $rc)" test $rc = 1
check "serve --check prints FILE:LINE:COL: message ($(cat "$T/chk.err"))" \
	grep -Eq "bad\.yaml:$bad_line:[0-9]+: .*bogus_top_level" "$T/chk.err"
"$SANDGATE" serve -c "$T/good.yaml" --check >"$T/chk2.out" 2>&1; rc=$?
check "serve --check good.yaml exits 0 (got $rc)" test $rc = 0
"$SANDGATE" policy check "$T/bad.yaml" >"$T/pc.out" 2>"$T/pc.err"; rc=$?
check "policy check bad.yaml exits 1 (got $rc)" test $rc = 1
check "policy check prints FILE:LINE:COL: message ($(cat "$T/pc.err"))" \
	grep -Eq "bad\.yaml:$bad_line:[0-9]+: .*bogus_top_level" "$T/pc.err"
printf 'version: 1\ngateway:\n  listen: { proxy: "127.0.0.1:1" \ndefault: deny\n' >"$T/syntax.yaml"
"$SANDGATE" policy check "$T/syntax.yaml" >"$T/pc3.out" 2>"$T/pc3.err"; rc=$?
check "policy check on a YAML syntax error exits 1 with FILE:LINE:COL ($(cat "$T/pc3.err"))" \
	bash -c "[ $rc = 1 ] && grep -Eq 'syntax\.yaml:[0-9]+:[0-9]+: ' '$T/pc3.err'"
"$SANDGATE" policy check "$T/good.yaml" >"$T/pc2.out" 2>&1; rc=$?
check "policy check good.yaml exits 0 (got $rc)" test $rc = 0
px_done
