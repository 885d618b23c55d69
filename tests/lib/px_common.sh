# Helpers for the proxy/reload/resolver/badinput integration tests.
# Source after common.sh. Adds soft assertions (a test reports every broken
# check, then fails once at the end) and small curl/audit wrappers.

PX_FAILS=0

# check DESCRIPTION CMD... - run CMD; on failure report and keep going
check() {
	local what=$1; shift
	if "$@" >/dev/null; then
		ok "$what"
	else
		echo "FAIL: $what" >&2
		PX_FAILS=$((PX_FAILS + 1))
	fi
}

# soft_fail MESSAGE - record a failed check without stopping the test
soft_fail() {
	echo "FAIL: $*" >&2
	PX_FAILS=$((PX_FAILS + 1))
}

# px_done - end of test: non-zero if any check failed
px_done() {
	if [ "$PX_FAILS" -gt 0 ]; then
		echo "--- $PX_FAILS check(s) failed" >&2
		[ -f "$T/gw.log" ] && { echo "--- gateway log (tail)" >&2; tail -n 40 "$T/gw.log" >&2; }
		[ -f "$T/audit.jsonl" ] && { echo "--- audit (tail)" >&2; tail -n 20 "$T/audit.jsonl" >&2; }
		exit 1
	fi
	echo "all checks passed"
	exit 0
}

# pcurl NAME ARGS... - curl through the proxy $PP, 10 s cap; writes
# $T/NAME.body, $T/NAME.hdr, $T/NAME.err; prints "STATUS RC" (status 000
# when no HTTP answer)
pcurl() {
	local name=$1; shift
	local code rc
	code=$(curl -sS --max-time 10 -x "http://127.0.0.1:$PP" -o "$T/$name.body" \
		-D "$T/$name.hdr" -w '%{http_code}' "$@" 2>"$T/$name.err")
	rc=$?
	echo "$code $rc"
}

# hdr NAME FIELD - value of response header FIELD in $T/NAME.hdr (last one)
hdr() {
	tr -d '\r' <"$T/$1.hdr" | awk -v f="$(echo "$2" | tr 'A-Z' 'a-z')" -F': ' \
		'tolower($1) == f { v = substr($0, length($1) + 3) } END { print v }'
}

# audit_count FILTER - how many audit records satisfy the jq filter
# (the file is $AUDIT when set, else $T/audit.jsonl)
audit_count() {
	# The writer collects records for up to 2 ms before writing them.
	sleep 0.02
	jq -c "select($1)" "${AUDIT:-$T/audit.jsonl}" 2>/dev/null | wc -l
}

# audit_exists FILTER - like audit_has but soft (waits 2 s, returns 1)
audit_exists() {
	local end=$(( $(date +%s%N) + 2000000000 ))
	while :; do
		[ "$(audit_count "$1")" -gt 0 ] && return 0
		[ "$(date +%s%N)" -lt $end ] || break
		sleep 0.05
	done
	echo "  no audit record matches: $1" >&2
	return 1
}

# lines FILE - number of lines (0 if missing)
lines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

# sg_alive - the gateway process is still running
sg_alive() { kill -0 "$SG_PID" 2>/dev/null; }

# px_upstream NAME ARGS... - start tests/lib/px_upstream.py (raw TCP sink or
# resetting upstream); sets PXU_PORT, log in $T/NAME.log
px_upstream() {
	local name=$1; shift
	: >"$T/$name.log"
	bg "$name" python3 "$TOP/tests/lib/px_upstream.py" --log "$T/$name.log" "$@"
	local i
	PXU_PORT=
	for i in $(seq 1 100); do
		PXU_PORT=$(awk '/^ready/ {print $2}' "$T/$name.out" 2>/dev/null)
		[ -n "$PXU_PORT" ] && return 0
		sleep 0.05
	done
	fail "px_upstream $name did not start: $(cat "$T/$name.err")"
}

# jqe ARGS... - `jq -e` that fails on empty input (jq 1.6 exits 0 when it
# reads nothing). The input is the last argument if it is a file (may be
# empty only with -s), else stdin.
jqe() {
	local last=${!#}
	if [ $# -ge 2 ] && [ -f "$last" ]; then
		case " $* " in
		*" -s "*) ;;
		*) [ -s "$last" ] || { echo "  (empty file: $last)" >&2; return 1; } ;;
		esac
		jq -e "$@"
	else
		local in
		in=$(cat)
		[ -n "${in//[[:space:]]/}" ] || { echo "  (no JSON to check)" >&2; return 1; }
		jq -e "$@" <<<"$in"
	fi
}

# not CMD... - succeeds when CMD fails (for check)
not() { ! "$@"; }

# absent PATTERN FILE - FILE exists and has no line matching PATTERN (grep -E)
absent() {
	[ -f "$2" ] || { echo "  (no file $2)" >&2; return 1; }
	! grep -Eq -- "$1" "$2"
}
