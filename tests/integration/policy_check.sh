#!/usr/bin/env bash
# `sandgate policy check FILE` as a user runs it: exit 0 for a valid file
# (warnings allowed) with "FILE:LINE:COL: warning: ..." lines on stderr and
# "FILE: ok (N warnings)" on stdout; exit 1 with "FILE:LINE:COL: message"
# for an invalid one (regex that does not compile, missing GeoIP database,
# bad country code); exit 2 for usage. Each warning kind itself is covered
# with its line and column in tests/unit/test_pol_check.c.
. "$(dirname "$0")/../lib/common.sh"

fails=0
check() {   # check DESCRIPTION COMMAND...
	local what=$1; shift
	if "$@"; then ok "$what"; else echo "FAIL: $what" >&2; fails=$((fails + 1)); fi
}

cat >"$T/warn.yaml" <<'YAML'
version: 1
floor:
  deny:
    - { name: internal, domains: ["**.internal.example.com"] }
sandboxes:
  "agent-*":
    allow:
      - { domains: ["**.example.com", api.test, api.test] }
      - { regex: '^[a-z]+\.s3\.example\.net$' }
    deny:
      - { regex: '^[a-z]+\.s3\.example\.net$' }
  "agent-1": {}
YAML
"$SANDGATE" policy check "$T/warn.yaml" >"$T/w.out" 2>"$T/w.err"; rc=$?
cat "$T/w.out" "$T/w.err"
check "valid file with warnings exits 0 (got $rc)" test $rc = 0
check "stdout says ok with the count" grep -qx "$T/warn.yaml: ok (4 warnings)" "$T/w.out"
check "wider than the floor, at its line:col" grep -qx "$T/warn.yaml:8:21: warning: \*\*.example.com in sandboxes/agent-\*/allow/0 is wider than the floor allows: internal (line 4) denies \*\*.internal.example.com" "$T/w.err"
check "duplicate pattern at the second one" grep -qx "$T/warn.yaml:8:49: warning: duplicate domain \"api.test\" in sandboxes/agent-\*/allow/0 (first at line 8)" "$T/w.err"
check "shadowed regex rule" grep -qx "$T/warn.yaml:9:9: warning: sandboxes/agent-\*/allow/1 can never match: everything it allows is denied first, by sandboxes/agent-\*/deny/0 (line 11)" "$T/w.err"
check "unreachable sandbox" grep -qx "$T/warn.yaml:12:3: warning: sandbox \"agent-1\" is never chosen: \"agent-\*\" (line 6) comes first and matches every name it does" "$T/w.err"
check "warnings in line order" bash -c "cut -d: -f2 '$T/w.err' | sort -nc"

cat >"$T/clean.yaml" <<'YAML'
version: 1
sandboxes:
  "agent-*":
    allow:
      - { domains: [api.test], regex: '^[a-z0-9-]+\.s3\.example\.net$' }
YAML
"$SANDGATE" policy check "$T/clean.yaml" >"$T/c.out" 2>"$T/c.err"; rc=$?
check "clean file exits 0 (got $rc)" test $rc = 0
check "clean file: ok, no warnings" grep -qx "$T/clean.yaml: ok" "$T/c.out"
check "clean file: nothing on stderr" test ! -s "$T/c.err"

printf 'version: 1\nsandboxes:\n  s:\n    allow:\n      - { regex: "(unclosed" }\n' >"$T/re.yaml"
"$SANDGATE" policy check "$T/re.yaml" >"$T/r.out" 2>"$T/r.err"; rc=$?
check "bad regex exits 1 (got $rc)" test $rc = 1
check "bad regex: FILE:LINE:COL and PCRE2's message" \
	grep -qx "$T/re.yaml:5:18: regex \"(unclosed\" in sandboxes/s/allow/0: missing closing parenthesis at offset 9" "$T/r.err"

printf 'version: 1\ngeoip:\n  country: %s/none.mmdb\n' "$T" >"$T/geo.yaml"
"$SANDGATE" policy check "$T/geo.yaml" >"$T/g.out" 2>"$T/g.err"; rc=$?
check "missing GeoIP database exits 1 (got $rc)" test $rc = 1
check "missing database named" grep -qx "$T/geo.yaml:3:12: geoip.country: cannot open $T/none.mmdb: No such file or directory" "$T/g.err"

"$SANDGATE" policy check >"$T/u.out" 2>&1; rc=$?
check "no FILE is a usage error (got $rc)" test $rc = 2
"$SANDGATE" policy frobnicate x >"$T/u2.out" 2>&1; rc=$?
check "unknown subcommand is a usage error (got $rc)" test $rc = 2

[ $fails -eq 0 ] || fail "$fails check(s) failed"
echo "all policy check checks passed"
