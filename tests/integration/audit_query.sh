#!/usr/bin/env bash
# `sandgate audit query`: on records the real gateway wrote (an allowed and a
# denied CONNECT, an allowed plain request, an accepted and a rejected
# reload) the table, --json (byte-identical lines that still verify) and
# --stats (checked against jq's own counts); on hand-written fixtures every
# filter, relative and absolute times, several files in order, invalid lines
# (FILE:LINE, exit 1), usage errors (exit 2), hostile text in cells, and a
# file bigger than the in-memory table.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
need curl openssl python3 jq
SG=$SANDGATE

# --- records from the gateway ---------------------------------------------
mkcerts api.example.test other.example.test
upstream api --cert api.example.test
TLSP=$UP_PORT
upstream plain
PLAIN=$UP_PORT
PP=$(freeport)
(umask 077; head -c 32 /dev/urandom >"$T/audit.key")
A=$T/audit.jsonl
write_cfg() {
	cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
      other.example.test: [127.0.0.1]
      plain.example.test: [127.0.0.1]
audit: { path: $A, key: "file:$T/audit.key" }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: api, domains: [api.example.test], ports: [$TLSP] }
      - { name: plain, domains: [plain.example.test], ports: [$PLAIN] }
$1
default: deny
YAML
}
write_cfg ""
sg_start "$T/sg.yaml"
out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
	"https://api.example.test:$TLSP/v1/models")
[ "$out" = "hello from api" ] || fail "allowed CONNECT: got '$out'"
curl -s -o /dev/null --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
	"https://other.example.test:$TLSP/" || true
curl -s -o /dev/null --max-time 10 -x "http://127.0.0.1:$PP" "http://plain.example.test:$PLAIN/p?token=x" ||
	fail "plain request"
audit_has "$A" '.event == "connection" and .decision == "deny"'
kill -HUP "$SG_PID"
audit_has "$A" '.event == "policy_reload" and .decision == "allow"'
write_cfg "bogus_top_level: 1"
kill -HUP "$SG_PID"
audit_has "$A" '.event == "policy_reload" and .decision == "deny"'
sg_stop
N=$(wc -l <"$A")

"$SG" audit query "$A" >"$T/table" 2>"$T/table.err"
check "table: exit 0 on a clean file" test $? = 0
check "table: nothing on stderr" test ! -s "$T/table.err"
check "table: a header and one row per record" test "$(wc -l <"$T/table")" = $((N + 1))
check "table: header names the columns" \
	grep -Eq '^TIME \(UTC\) +SANDBOX +EVENT +DECISION +REASON +RULE +DESTINATION +BYTES UP/DOWN$' "$T/table"
check "table: the allowed tunnel" \
	grep -Eq "^20[0-9-]+ [0-9:.]+ +local +connection +allow +rule_allow +api +api\.example\.test:$TLSP +[0-9]+/[1-9][0-9]*$" "$T/table"
check "table: the denied tunnel" \
	grep -Eq "^20[0-9-]+ [0-9:.]+ +local +connection +deny +default_deny +- +other\.example\.test:$TLSP +0/0$" "$T/table"
check "table: the plain request" \
	grep -Eq " local +request +allow +rule_allow +plain +plain\.example\.test:$PLAIN " "$T/table"
check "table: lifecycle rows with - for what they lack" \
	grep -Eq ' - +policy_reload +deny +invalid_config +- +- +-$' "$T/table"
# every column starts where its header does: the widths fit the output
aligned() {
	python3 - "$1" <<'PY'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
head = lines[0]
starts = [head.index(w) for w in ("SANDBOX", "EVENT", "DECISION", "REASON", "RULE", "DESTINATION")]
for l in lines[1:]:
    for s in starts:
        if l[s - 2:s] != "  " or l[s] == " ":
            sys.exit("misaligned at %d: %r" % (s, l))
    if len(l) != len(head):
        sys.exit("row width %d != header %d: %r" % (len(l), len(head), l))
PY
}
check "table: columns aligned, bytes right-aligned under their header" aligned "$T/table"

"$SG" audit query --json "$A" >"$T/all.json"
check "--json: every line exactly as stored" cmp "$T/all.json" "$A"
check "--json: the copy still verifies with the key" \
	"$SG" audit verify --key "file:$T/audit.key" "$T/all.json"
"$SG" audit query --json --decision deny "$A" >"$T/deny.json"
check "--json --decision deny: as many lines as jq finds" \
	test "$(wc -l <"$T/deny.json")" = "$(jq -c 'select(.decision == "deny")' "$A" | wc -l)"
check "--json --decision deny: only denials" jq -e -s 'length == 2 and all(.[]; .decision == "deny")' "$T/deny.json"
check "--json --decision deny: each line is a line of the file" grep -Fxqf "$T/deny.json" "$A"
check "--json --event policy_reload: the rejected reload carries its error" \
	jq -e -s 'length == 2 and (map(select(.decision == "deny"))[0].error | test("sg\\.yaml:[0-9]+:[0-9]+: "))' \
	<("$SG" audit query --json --event policy_reload "$A")

# --stats against jq's own counts
"$SG" audit query --stats --json "$A" >"$T/stats.json"
jq -s '{records: length,
	by_sandbox: (group_by(.sandbox) | map({(.[0].sandbox // "-"): length}) | add),
	by_decision: (group_by(.decision) | map({(.[0].decision): length}) | add),
	by_reason: (group_by(.reason) | map({(.[0].reason): length}) | add),
	by_host: (map(select(.dst_host != null or .dst_ip != null)) | group_by(.dst_host // .dst_ip)
		  | map({(.[0].dst_host // .[0].dst_ip): length}) | add)}' "$A" >"$T/want.json"
check "--stats --json: counts by sandbox, decision, host, reason match jq" \
	jq -e --slurpfile w "$T/want.json" '. as $g | $w[0] | . == {records: $g.records,
		by_sandbox: $g.by_sandbox, by_decision: $g.by_decision, by_reason: $g.by_reason,
		by_host: $g.by_host}' "$T/stats.json"
"$SG" audit query --stats "$A" >"$T/stats.txt"
check "--stats: text has the record count" grep -qx "records: $N" "$T/stats.txt"
check "--stats: allow count in the decision section" \
	grep -Eq "^  allow +$(jq -c 'select(.decision == "allow")' "$A" | wc -l)$" "$T/stats.txt"
check "--stats: four sections" test "$(grep -c '^by ' "$T/stats.txt")" = 4

# --- fixtures: filters and time ------------------------------------------
python3 - "$T" <<'PY'
import datetime, json, sys
t = sys.argv[1]
now = datetime.datetime.now(datetime.timezone.utc)
def ts(d): return d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
def rec(seq, when, event, sbx, dec, reason, rule, **kw):
    r = {"v": 1, "seq": seq, "ts": when, "event": event, "sandbox": sbx,
         "decision": dec, "reason": reason, "rule": rule}
    r.update(kw)
    return json.dumps(r, separators=(",", ":"))
H = datetime.timedelta
f1 = [
    rec(1, ts(now - H(hours=3)), "connection", "agent-*", "allow", "rule_allow", "openai",
        dst_host="api.openai.com", dst_ip="203.0.113.5", dst_port=443, bytes_up=10, bytes_down=20),
    rec(2, ts(now - H(minutes=30)), "connection", "ci", "deny", "floor_deny", "floor/deny/0",
        dst_host=None, dst_ip="169.254.169.254", dst_port=80, bytes_up=0, bytes_down=0),
    rec(3, ts(now - H(minutes=5)), "request", "agent-*", "would_deny", "default_deny", None,
        dst_host="API.GitHub.com", dst_port=443, method="GET", path="/repos", secrets=["github"]),
    rec(4, "2026-01-01T00:00:00Z", "secret_violation", "notebook", "deny", "secret_violation", None,
        dst_host="x" * 100 + ".example", dst_port=443, method="POST",
        path="/\u001b[2J\u001b]0;pwned\u0007", secrets=["openai"]),
]
f2 = [rec(5, ts(now - H(minutes=1)), "gateway_stop", None, "allow", "stopped", None)]
open(t + "/f1.jsonl", "w").write("\n".join(f1) + "\n")
open(t + "/f2.jsonl", "w").write("\n".join(f2) + "\n")
bad = [f1[0], '{"ts":"2026-11-30T07:00:00Z","event":"connection"', f1[1],
       '{"ts":"2026-11-30T07:00:00Z","event":"dns","dst_port":"53"}', "x" * 70000, f1[2]]
open(t + "/bad.jsonl", "w").write("\n".join(bad))        # and no final newline
PY
F1=$T/f1.jsonl F2=$T/f2.jsonl
# seqs QUERY-ARGS... - the seq numbers the query prints with --json
seqs() { "$SG" audit query --json "$@" | jq -r .seq | tr '\n' ' ' | sed 's/ $//'; }
expect() {      # expect "SEQS" ARGS...
	local want=$1; shift
	local got; got=$(seqs "$@")
	if [ "$got" = "$want" ]; then ok "query $*: $want"; else soft_fail "query $*: got '$got', want '$want'"; fi
}
expect "1 2 3 4 5" "$F1" "$F2"
expect "5 1 2 3 4" "$F2" "$F1"
expect "1 3" --sandbox 'agent-*' "$F1"
expect "2" --sandbox 'c?' "$F1"
expect "1 2 3 4" --sandbox "*" "$F1" "$F2"           # a null sandbox (5) matches no glob
expect "1" --host '*.openai.com' "$F1"
expect "2" --host '169.254.*' "$F1"                  # no dst_host: dst_ip
expect "3" --host 'api.github.com' "$F1"             # names ignore case
expect "2" --rule floor/deny/0 "$F1"
expect "3" --secret github "$F1"
expect "3 4" --secret github --secret openai "$F1"
expect "2 3 4" --decision deny --decision would_deny "$F1"
expect "4" --event secret_violation "$F1"
expect "1" --sandbox 'agent-*' --decision allow "$F1"
expect "2 3 5" --since 1h "$F1" "$F2"
expect "3 5" --since 10m "$F1" "$F2"
expect "3 5" --since=600s "$F1" "$F2"
expect "1 4" --until 1h "$F1" "$F2"
expect "1 4" --until 2h --until 1h "$F1"             # the last one counts
expect "4" --since 2026-01-01T00:00:00Z --until 2026-01-01T00:00:01Z "$F1"
expect "" --since 2026-01-01T00:00:00.000001Z --until 2026-01-01T01:00:00+01:00 "$F1"
expect "4" --since 2026-01-01 --until 2026-01-02 "$F1"
expect "1 2 3" --since 2d --decision allow --decision deny --decision would_deny "$F1"

# hostile text and long cells in the table
"$SG" audit query --event secret_violation "$F1" >"$T/hostile" 2>&1
check "table: no escape or control byte from the log reaches the terminal" \
	test "$(tr -d '\n' <"$T/hostile" | LC_ALL=C grep -c $'[\x01-\x1f\x7f]')" = 0
check "table: a 108-character host is cut to 48 with an ellipsis" \
	grep -q "$(printf 'x%.0s' $(seq 1 47))…" "$T/hostile"

# invalid lines: reported as FILE:LINE, skipped, exit 1; valid ones still shown
"$SG" audit query --json "$T/bad.jsonl" >"$T/bad.out" 2>"$T/bad.err"
check "invalid lines: exit 1" test $? = 1
check "invalid lines: the valid ones still printed" test "$(jq -r .seq "$T/bad.out" | tr '\n' ' ')" = "1 2 3 "
check "invalid lines: a truncated record named by FILE:LINE" grep -q "^$T/bad.jsonl:2: " "$T/bad.err"
check "invalid lines: a wrongly typed field named by FILE:LINE" grep -q "^$T/bad.jsonl:4: " "$T/bad.err"
check "invalid lines: an over-long line named by FILE:LINE" grep -q "^$T/bad.jsonl:5: .*64 KiB" "$T/bad.err"
check "invalid lines: three reported" test "$(wc -l <"$T/bad.err")" = 3
"$SG" audit query "$T/missing.jsonl" "$F2" >"$T/miss.out" 2>"$T/miss.err"
check "missing file: exit 1" test $? = 1
check "missing file: named on stderr" grep -q "missing.jsonl: No such file" "$T/miss.err"
check "missing file: the other file still read" grep -q gateway_stop "$T/miss.out"
stdin_ok() { local o; o=$("$SG" audit query - <"$F2") && [[ $o == *gateway_stop* ]]; }
check "FILE - reads stdin" stdin_ok

# usage errors: exit 2, nothing on stdout
usage2() {
	"$SG" audit query "$@" >"$T/u.out" 2>"$T/u.err"
	local rc=$?
	[ $rc = 2 ] && [ ! -s "$T/u.out" ] && [ -s "$T/u.err" ]
}
check "usage: --decision maybe" usage2 --decision maybe "$F1"
check "usage: --event typo" usage2 --event conection "$F1"
check "usage: --since soon" usage2 --since soon "$F1"
check "usage: --since 90 (no unit)" usage2 --since 90 "$F1"
check "usage: unknown option" usage2 --bogus x "$F1"
check "usage: no FILE" usage2 --json
check "usage: option without its value" usage2 "$F1" --host

# a file bigger than the in-memory table: rows stream with fixed widths
awk -v l="$(head -n 1 "$F1")" 'BEGIN { for (i = 0; i < 25000; i++) print l }' >"$T/big.jsonl"
check "big file: --stats counts every record" \
	jq -e '.records == 25000' <("$SG" audit query --stats --json "$T/big.jsonl")
check "big file: table has every row" test "$("$SG" audit query "$T/big.jsonl" | wc -l)" = 25001

px_done
