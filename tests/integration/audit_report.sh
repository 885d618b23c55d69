#!/usr/bin/env bash
# `sandgate audit report --html`: records from the real gateway (allowed and
# denied CONNECTs, an accepted and a rejected reload) rendered in headless
# Chromium; the DOM is checked the way a reviewer reads the page: the
# verification status (green with -c and --key, red on a tampered copy,
# amber with no key), a known destination in each top list, the charts as
# SVG, the reload rows. A hostile fixture (markup in host names, sandbox
# names, paths and errors) must show as text and add no element or
# attribute. The page must reference no URL at all.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
need curl openssl python3 jq
SG=$SANDGATE
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)

# dom HTML - the DOM Chromium builds from the page, serialised
dom() {
	timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
		--no-first-run --disable-background-networking --disable-component-update \
		--disable-sync --user-data-dir="$(mktemp -d "$T/chr.XXXXXX")" \
		--dump-dom "file://$1" 2>>"$T/chromium.err"
}

# shape DOM - what the rendered page holds, as JSON: every element name,
# every attribute, the text of the status, of each panel and of the tables
shape() {
	python3 - "$1" <<'PY'
import json, sys
from html.parser import HTMLParser
class P(HTMLParser):
    def __init__(s):
        super().__init__(convert_charrefs=True)
        s.tags, s.attrs, s.ids, s.stack, s.text = [], [], {}, [], []
    def handle_starttag(s, tag, attrs):
        s.tags.append(tag)
        if tag in ("td", "th", "text", "tr"):
            s.handle_data("\t")     # cells stay apart in the text
        s.attrs += [[k, v or ""] for k, v in attrs]
        i = dict(attrs).get("id")
        if tag not in ("meta", "line", "rect", "br", "i"):
            s.stack.append(i)
    def handle_startendtag(s, tag, attrs):
        s.tags.append(tag)
        s.attrs += [[k, v or ""] for k, v in attrs]
    def handle_endtag(s, tag):
        if tag not in ("meta", "line", "rect", "br", "i") and s.stack:
            s.stack.pop()
    def handle_data(s, d):
        s.text.append(d)
        for i in s.stack:
            if i:
                s.ids[i] = s.ids.get(i, "") + d
p = P()
p.feed(open(sys.argv[1], encoding="utf-8").read())
json.dump({"tags": p.tags, "attrs": p.attrs, "ids": p.ids, "text": "".join(p.text)}, sys.stdout)
PY
}

# --- records from the gateway ---------------------------------------------
mkcerts api.example.test other.example.test
upstream api --cert api.example.test
TLSP=$UP_PORT
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
audit: { path: $A, key: "file:$T/audit.key" }
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: api, domains: [api.example.test], ports: [$TLSP] }
$1
default: deny
YAML
}
write_cfg ""
sg_start "$T/sg.yaml"
for i in 1 2 3; do
	curl -sS -o /dev/null --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
		"https://api.example.test:$TLSP/v1/models" || fail "allowed CONNECT $i"
done
curl -s -o /dev/null --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
	"https://other.example.test:$TLSP/" || true
audit_has "$A" '.event == "connection" and .decision == "deny"'
kill -HUP "$SG_PID"
audit_has "$A" '.event == "policy_reload" and .decision == "allow"'
write_cfg "bogus_top_level: 1"
kill -HUP "$SG_PID"
audit_has "$A" '.event == "policy_reload" and .decision == "deny"'
sg_stop
N=$(wc -l <"$A")
BAD_LINE=$(grep -n '^bogus_top_level' "$T/sg.yaml" | cut -d: -f1)
"$SG" audit report -c "$T/sg.yaml" --html "$T/badcfg.html" "$A" 2>"$T/badcfg.err"
check "report -c with a broken config: exit 1, the loader's error as the status" \
	grep -q "NOT VERIFIED: $T/sg.yaml:$BAD_LINE:1: .*bogus_top_level" "$T/badcfg.err"
write_cfg ""

"$SG" audit report -c "$T/sg.yaml" --html "$T/c.html" "$A" 2>"$T/c.err"
check "report -c: exit 0 when the chain verifies" test $? = 0
check "report -c: says so on stderr" grep -q "verified: $N records, chain intact, anchor matches" "$T/c.err"
"$SG" audit report --key "file:$T/audit.key" --html "$T/k.html" "$A" 2>"$T/k.err"
check "report --key: exit 0" test $? = 0
check "report: no http(s) URL anywhere in the page" test "$(grep -Eic 'https?://' "$T/k.html")" = 0
check "report: a Content-Security-Policy that allows no fetch" \
	grep -q "default-src 'none'" "$T/k.html"
check "report: no temporary file left behind" test ! -e "$T/k.html.tmp"

# tampered copy: one digit of the denied record's port changed
awk -v n="$(grep -n '"decision":"deny","reason":"default_deny"' "$A" | cut -d: -f1)" \
	'NR == n { sub(/"dst_port":[0-9]/, "\"dst_port\":0") } { print }' "$A" >"$T/tampered.jsonl"
TL=$(grep -n '"dst_port":0' "$T/tampered.jsonl" | cut -d: -f1)
[ -n "$TL" ] || fail "could not tamper with the copy"
"$SG" audit report --key "file:$T/audit.key" --html "$T/t.html" "$T/tampered.jsonl" 2>"$T/t.err"
check "report on a tampered file: exit 1" test $? = 1
check "report on a tampered file: still written" test -s "$T/t.html"
"$SG" audit report --html "$T/n.html" "$A" 2>"$T/n.err"
check "report without a key: exit 0" test $? = 0

# --- a hostile fixture ------------------------------------------------------
python3 - "$T/hostile.jsonl" <<'PY'
import json, sys
def rec(seq, ts, event, sbx, dec, reason, **kw):
    r = {"v": 1, "seq": seq, "ts": ts, "event": event, "sandbox": sbx, "decision": dec,
         "reason": reason, "rule": None}
    r.update(kw)
    return json.dumps(r, separators=(",", ":"))
x = [
    rec(1, "2026-11-30T07:00:00Z", "connection", 'x" onmouseover="alert(3)', "deny", "default_deny",
        dst_host="evil<script>alert(1)</script>.example", dst_port=443),
    rec(2, "2026-11-30T07:01:00Z", "connection", "agent-<b>1</b>", "allow", "rule_allow",
        dst_host="api.example.test'><svg onload=alert(4)>", dst_port=443, bytes_up=1, bytes_down=2),
    rec(3, "2026-11-30T07:02:00Z", "secret_violation", "agent-<b>1</b>", "deny", "secret_violation",
        dst_host="exfil.example", dst_port=443, method="POST",
        path="/<img src=x onerror=alert(5)>", secrets=["openai</td><script>alert(6)</script>"]),
    rec(4, "2026-11-30T07:03:00Z", "policy_reload", None, "deny", "invalid_config",
        error="sg.yaml:1:1: </td></tr></table><script>alert(7)</script><iframe src=//x>"),
]
open(sys.argv[1], "w").write("\n".join(x) + "\n")
PY
"$SG" audit report --html "$T/h.html" "$T/hostile.jsonl" 2>"$T/h.err"
check "hostile fixture: report written, exit 0" test $? = 0
check "hostile fixture: no URL in the page" test "$(grep -Eic 'https?://' "$T/h.html")" = 0

if [ -z "$CHROMIUM" ]; then
	[ "$PX_FAILS" -gt 0 ] && px_done
	skip "needs chromium for the rendered checks (apt-get install chromium)"
fi

# --- the rendered pages -----------------------------------------------------
dom "$T/k.html" >"$T/k.dom" && shape "$T/k.dom" >"$T/k.json" ||
	fail "chromium could not render the report: $(tail -5 "$T/chromium.err")"
check "rendered: green status 'verified: N records, chain intact'" \
	jq -e --arg n "$N" '(.ids.verify | startswith("verified: \($n) records, chain intact")) and
		any(.attrs[]; .[0] == "class" and .[1] == "status green")' "$T/k.json"
check "rendered: api.example.test in the top allowed destinations, with its 3 connections" \
	jq -e '.ids["top-allowed"] | test("\tapi\\.example\\.test\t3\t")' "$T/k.json"
check "rendered: other.example.test in the top denied destinations" \
	jq -e '.ids["top-denied"] | test("other\\.example\\.test") and test("default_deny")' "$T/k.json"
check "rendered: three SVG charts (time, top allowed, top denied) with bars" \
	jq -e '([.tags[] | select(. == "svg")] | length) == 3 and ([.tags[] | select(. == "rect")] | length) >= 3' "$T/k.json"
check "rendered: the accepted reload row" jq -e '.ids.reloads | test("reloaded")' "$T/k.json"
check "rendered: the rejected reload row with its FILE:LINE:COL error" \
	jq -e --arg l "$BAD_LINE" '.ids.reloads | test("invalid_config") and test("sg\\.yaml:\($l):[0-9]+: .*bogus_top_level")' "$T/k.json"
check "rendered: the empty state for secret violations" \
	jq -e '.ids.violations | test("No secret violations recorded")' "$T/k.json"

dom_has() { dom "$1" | grep -q "$2"; }
check "rendered -c: the anchor is reported" dom_has "$T/c.html" 'anchor matches'

dom "$T/t.html" >"$T/t.dom" && shape "$T/t.dom" >"$T/t.json" || fail "render tampered"
check "rendered tampered: red 'NOT VERIFIED: FILE:LINE: why'" \
	jq -e --arg f "$T/tampered.jsonl:$TL:" '(.ids.verify | startswith("NOT VERIFIED: \($f)")) and
		any(.attrs[]; .[0] == "class" and .[1] == "status red")' "$T/t.json"
dom "$T/n.html" >"$T/n.dom" && shape "$T/n.dom" >"$T/n.json" || fail "render unkeyed"
check "rendered without a key: amber 'not verified: no key given'" \
	jq -e '.ids.verify == "not verified: no key given" and
		any(.attrs[]; .[0] == "class" and .[1] == "status amber")' "$T/n.json"

dom "$T/h.html" >"$T/h.dom" && shape "$T/h.dom" >"$T/h.json" || fail "render hostile"
check "hostile: no script, img or iframe element from the data" \
	jq -e '[.tags[] | select(. == "script" or . == "img" or . == "iframe")] | length == 0' "$T/h.json"
check "hostile: <b> only in the ten summary cards, the sandbox's <b> is text" \
	jq -e '([.tags[] | select(. == "b")] | length == 10) and (.text | contains("agent-<b>1</b>"))' "$T/h.json"
check "hostile: svg elements are only our three charts" \
	jq -e '[.tags[] | select(. == "svg")] | length == 3' "$T/h.json"
check "hostile: no event-handler attribute, no src/href" \
	jq -e '[.attrs[] | select((.[0] | startswith("on")) or .[0] == "src" or .[0] == "href")] | length == 0' "$T/h.json"
check "hostile: the <script> host name shows as text in the denied list" \
	jq -e '.ids["top-denied"] | contains("evil<script>alert(1)</script>.example")' "$T/h.json"
check "hostile: the quoted sandbox name shows as text" \
	jq -e '.text | contains("x\" onmouseover=\"alert(3)")' "$T/h.json"
check "hostile: the violation row shows path and secret as text" \
	jq -e '.ids.violations | contains("/<img src=x onerror=alert(5)>") and contains("openai</td><script>alert(6)</script>")' "$T/h.json"
check "hostile: the reload error shows as text in one cell" \
	jq -e '.ids.reloads | contains("</td></tr></table><script>alert(7)</script><iframe src=//x>")' "$T/h.json"

# a screenshot renders (the one in docs/ is made the same way)
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$(mktemp -d "$T/chr.XXXXXX")" --hide-scrollbars \
	--screenshot="$T/shot.png" --window-size=1200,1600 "file://$T/k.html" >/dev/null 2>&1
check "a 1200x1600 screenshot renders" \
	python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); sys.exit(not (d[:8]==b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", d[16:24])==(1200,1600)))' "$T/shot.png"

px_done
