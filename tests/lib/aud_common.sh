# Sourced by tests/integration/audit_*.sh after common.sh: a gateway with
# an explicit-proxy listener, an HMAC key, traffic generators and
# assertions on `sandgate audit verify`.

# aud_key - a fresh random key in $T/audit.key (hex text); sets AUD_KEY
aud_key() {
	AUD_KEY=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s\n' "$AUD_KEY" >"$T/audit.key"
	chmod 600 "$T/audit.key"
}

# aud_config FILE AUDIT_YAML - a config with the proxy on $PP (set here if
# unset), the upstream api.example.test:$UP_PORT allowed, everything else
# denied; AUDIT_YAML is the body of the audit: mapping (indented 2).
aud_config() {
	PP=${PP:-$(freeport)}
	cat >"$1" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: ${WORKERS:-1}
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
audit:
$2
sandboxes:
  local:
    sources: [127.0.0.0/8]
    allow:
      - { name: api, domains: [api.example.test], ports: [${UP_PORT:-443}] }
default: deny
YAML
}

# connect_ok - one allowed CONNECT through the proxy; fails the test otherwise
connect_ok() {
	local out
	out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$PP" --cacert "$T/certs/ca.pem" \
		"https://api.example.test:$UP_PORT/") || fail "allowed CONNECT failed"
	[ "$out" = "hello from api" ] || fail "allowed CONNECT: got '$out'"
}

# connect_denied N - N denied CONNECTs (403 from the gateway, one record each)
# in one curl process
connect_denied() {
	local urls=() i
	for i in $(seq 1 "$1"); do urls+=("https://denied$i.example.test/"); done
	curl -s -o /dev/null --max-time 20 -x "http://127.0.0.1:$PP" "${urls[@]}" || true
}

# http_code - the status a denied CONNECT gets now: 403, or 000 when the
# gateway closed the connection (refused)
http_code() {
	curl -s -o /dev/null -w '%{http_connect}' --max-time 5 -x "http://127.0.0.1:$PP" \
		https://probe.example.test/ 2>/dev/null || true
}

# verify_ok ARGS... - `sandgate audit verify ARGS` exits 0; output in $VOUT
verify_ok() {
	VOUT=$("$SANDGATE" audit verify "$@" 2>&1)
	local rc=$?
	[ $rc -eq 0 ] || fail "audit verify $* exited $rc: $VOUT"
	case $VOUT in *"chain ok"*) ;; *) fail "audit verify $*: no 'chain ok': $VOUT" ;; esac
}

# verify_bad WANT ARGS... - exits 1 and says WANT (a substring: FILE:LINE: why)
verify_bad() {
	local want=$1; shift
	VOUT=$("$SANDGATE" audit verify "$@" 2>&1)
	local rc=$?
	[ $rc -eq 1 ] || fail "audit verify $* exited $rc, wanted 1: $VOUT"
	case $VOUT in *"$want"*) ;; *) fail "audit verify $*: wanted '$want', got: $VOUT" ;; esac
}

# records FILE - lines in FILE
records() { wc -l <"$1" | tr -d ' '; }
