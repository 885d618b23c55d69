#!/usr/bin/env bash
# Explicit proxy, absolute-form HTTP and CONNECT edge cases:
#  - absolute-form GET is forwarded in origin-form (query kept), hop-by-hop
#    fields (Connection and what it lists, Keep-Alive, Proxy-Connection,
#    Proxy-Authorization, TE, Trailer, Upgrade) removed, Connection: close
#    added, other fields intact and in order; audit has method, path without
#    the query, decision;
#  - request bodies (Content-Length and chunked) arrive intact;
#  - a Host header that disagrees with the URI is 403 host_mismatch and
#    nothing reaches the upstream; a denied name is 403 + X-Sandgate-Reason;
#    a malformed request is 400;
#  - a CONNECT tunnel whose ClientHello names another host is closed
#    (sni_mismatch);
#  - the sandbox comes from the source address, never Proxy-Authorization;
#    an uncovered source gets the default with reason unknown_source;
#  - allowed but unreachable is 502 upstream_connect_failed;
#  - one request per upstream connection: bytes pipelined after a request
#    (a second request to a denied name) never reach the upstream;
#  - Host/authority edge cases (duplicate Host, no Host, userinfo, IP
#    literals, Connection naming framing fields, SNI case/trailing dot).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/px_common.sh"
need curl openssl python3 jq sha256sum
PXC="python3 $TOP/tests/lib/px_client.py"

mkcerts api.example.test
upstream plain
PLAIN=$UP_PORT PLAIN_LOG=$UP_LOG
upstream tls --cert api.example.test
TLSP=$UP_PORT TLS_LOG=$UP_LOG
px_upstream sink --mode sink
SINK=$PXU_PORT
DEADP=$(freeport)   # nothing listens there
PP=$(freeport)
cat >"$T/sg.yaml" <<YAML
version: 1
gateway:
  listen: { proxy: "127.0.0.1:$PP" }
  workers: 1
  resolver:
    hosts:
      api.example.test: [127.0.0.1]
      other.example.test: [127.0.0.1]
      b.example.test: [127.0.0.1]
      denied.example.test: [127.0.0.1]
audit: { path: $T/audit.jsonl }
sandboxes:
  sbx-a:
    sources: [127.0.0.1/32]
    allow:
      - { name: api, domains: [api.example.test, other.example.test], ports: [$PLAIN, $TLSP, $SINK, $DEADP] }
  sbx-b:
    sources: [127.0.0.2/32]
    allow:
      - { name: bee, domains: [b.example.test], ports: [$PLAIN, $TLSP] }
default: deny
YAML
sg_start "$T/sg.yaml"
URL=http://api.example.test:$PLAIN

# --- 1. hop-by-hop removal, origin-form, Connection: close -------------
r=$(pcurl get1 -H 'Proxy-Authorization: Basic c2J4LWI6eA==' -H 'Proxy-Connection: keep-alive' \
	-H 'Keep-Alive: timeout=5' -H 'Connection: X-Foo' -H 'X-Foo: bar' -H 'TE: trailers' \
	-H 'Trailer: X-T' -H 'Upgrade: websocket' -H 'X-Keep: yes' -H 'X-Order-2: two' -A px-test/1 \
	"$URL/a/b?q=secret1&r=2")
[ "$r" = "200 0" ] || fail "absolute-form GET: status/rc $r: $(cat "$T/get1.err")"
check "GET body from upstream" grep -qx "hello from plain" "$T/get1.body"
rec=$(jq -c 'select(.method == "GET" and (.path | startswith("/a/b")))' "$PLAIN_LOG")
[ -n "$rec" ] || fail "upstream saw no GET /a/b: $(cat "$PLAIN_LOG")"
check "upstream got origin-form path with the query" \
	jqe '.path == "/a/b?q=secret1&r=2"' <<<"$rec"
check "no hop-by-hop field reached the upstream" \
	jqe '[.headers[][0] | ascii_downcase] | all(. as $h | ["proxy-authorization","proxy-connection","keep-alive","x-foo","te","trailer","upgrade"] | index($h) | not)' <<<"$rec"
check "exactly one Connection field upstream, and it is close" \
	jqe '[.headers[] | select(.[0] | ascii_downcase == "connection") | .[1]] == ["close"]' <<<"$rec"
check "end-to-end fields intact and in order, Connection: close the only addition" \
	jqe --arg host "api.example.test:$PLAIN" '[.headers[] | select(.[0] | ascii_downcase != "connection")] == [["Host",$host],["User-Agent","px-test/1"],["Accept","*/*"],["X-Keep","yes"],["X-Order-2","two"]]' <<<"$rec"

# Connection with several tokens, in another case: each named field goes.
r=$(pcurl get2 -H 'connection: keep-alive, X-Bar,x-baz' -H 'x-bar: 1' -H 'X-BAZ: 2' -H 'X-Stay: 3' "$URL/two")
[ "$r" = "200 0" ] || fail "GET /two: $r"
rec2=$(jq -c 'select(.path == "/two")' "$PLAIN_LOG")
check "fields listed by a multi-token Connection are removed (case-insensitive)" \
	jqe '([.headers[][0] | ascii_downcase] | (index("x-bar") == null and index("x-baz") == null and index("x-stay") != null)) and ([.headers[] | select(.[0] | ascii_downcase == "connection") | .[1]] == ["close"])' <<<"$rec2"

audit_has "$T/audit.jsonl" '.event == "request" and .method == "GET" and .path == "/a/b"'
check "audit request: method, path without query, decision, rule, sandbox, dst" \
	audit_exists '.event == "request" and .method == "GET" and .path == "/a/b" and .decision == "allow" and .rule == "api" and .sandbox == "sbx-a" and .dst_host == "api.example.test" and .dst_port == '"$PLAIN"' and .dst_ip == "127.0.0.1" and .tls == "none" and .bytes_up > 0 and .bytes_down > 0'
check "the query string (secret1) is in no audit record" \
	absent secret1 "$T/audit.jsonl"

# --- 2. request bodies --------------------------------------------------
head -c 300000 /dev/urandom >"$T/body.bin"
want=$(sha256sum "$T/body.bin" | cut -d' ' -f1)
r=$(pcurl post1 --data-binary @"$T/body.bin" -H 'Content-Type: application/octet-stream' "$URL/upload-cl")
check "POST with Content-Length answered 200 (got $r)" test "$r" = "200 0"
check "POST Content-Length body intact (sha256, 300000 bytes)" \
	jqe --arg h "$want" 'select(.path == "/upload-cl") | .method == "POST" and .body_sha256 == $h and .body_len == 300000' "$PLAIN_LOG"
r=$(pcurl post2 --data-binary @"$T/body.bin" -H 'Transfer-Encoding: chunked' "$URL/upload-chunked")
check "POST chunked answered 200 (got $r)" test "$r" = "200 0"
check "POST chunked body intact (sha256) and still chunked upstream" \
	jqe --arg h "$want" 'select(.path == "/upload-chunked") | .body_sha256 == $h and .body_len == 300000 and ([.headers[] | select(.[0] | ascii_downcase == "transfer-encoding") | .[1] | ascii_downcase] == ["chunked"])' "$PLAIN_LOG"
check "audit has both POSTs" audit_exists '.event == "request" and .method == "POST" and .path == "/upload-chunked" and .decision == "allow"'

# --- 3. Host mismatch, denied name, malformed ------------------------------
r=$(pcurl hm -H 'Host: evil.test' "$URL/hm?x=1")
check "Host mismatch is 403 (got $r)" test "$r" = "403 0"
check "Host mismatch says X-Sandgate-Reason: host_mismatch" test "$(hdr hm X-Sandgate-Reason)" = host_mismatch
r=$(pcurl hm2 -H "Host: api.example.test:1" "$URL/hm2")
check "Host with another port is a mismatch too (got $r, $(hdr hm2 X-Sandgate-Reason))" \
	test "$r $(hdr hm2 X-Sandgate-Reason)" = "403 0 host_mismatch"
r=$(pcurl hmok -H "Host: API.Example.TEST:$PLAIN" "$URL/hm-case")
check "Host differing only in case is not a mismatch (got $r)" test "$r" = "200 0"
check "nothing from the mismatched requests reached the upstream" \
	jqe -s '[.[] | select(.path == "/hm?x=1" or .path == "/hm2")] | length == 0' "$PLAIN_LOG"
check "audit: request deny host_mismatch, path without query" \
	audit_exists '.event == "request" and .decision == "deny" and .reason == "host_mismatch" and .path == "/hm" and .method == "GET" and .rule == null'
check "audit: the 403 the gateway answered is the record's status" \
	audit_exists '.event == "request" and .reason == "host_mismatch" and .status == 403'
check "audit: an allowed request records the upstream's status (200)" \
	audit_exists '.event == "request" and .path == "/hm-case" and .status == 200'

n0=$(lines "$PLAIN_LOG")
r=$(pcurl den "http://denied.example.test:$PLAIN/nope?t=1")
check "denied absolute-form is 403 (got $r)" test "$r" = "403 0"
check "denied absolute-form has X-Sandgate-Reason: default_deny (got '$(hdr den X-Sandgate-Reason)')" \
	test "$(hdr den X-Sandgate-Reason)" = default_deny
check "denied absolute-form never reached the upstream" test "$(lines "$PLAIN_LOG")" = "$n0"
check "audit: request deny default_deny for denied.example.test" \
	audit_exists '.event == "request" and .decision == "deny" and .reason == "default_deny" and .dst_host == "denied.example.test" and .path == "/nope" and .method == "GET"'

out=$($PXC raw "$PP" --data 'GARBAGE\r\n\r\n' --wait 3)
check "malformed request line is 400 http_bad_request and then closed ($out)" \
	jqe '.status == 400 and .reason == "http_bad_request" and .end == "eof"' <<<"$out"
out=$($PXC raw "$PP" --data 'GET /origin-form HTTP/1.1\r\nHost: api.example.test\r\n\r\n' --wait 3)
check "origin-form request to the proxy is 400 ($out)" jqe '.status == 400' <<<"$out"
out=$($PXC raw "$PP" --data 'GET http://api.example.test:'"$PLAIN"'/x HTTP/1.1\r\nHost: api.example.test:'"$PLAIN"'\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' --wait 3)
check "Content-Length together with Transfer-Encoding is 400 ($out)" jqe '.status == 400' <<<"$out"
check "audit: malformed request denied http_bad_request" \
	audit_exists '.decision == "deny" and .reason == "http_bad_request"'
check "the smuggling attempt never reached the upstream" \
	jqe -s '[.[] | select(.path == "/x")] | length == 0' "$PLAIN_LOG"

# Allowed, but nobody listens: 502 upstream_connect_failed.
r=$(pcurl dead "http://api.example.test:$DEADP/dead")
check "allowed absolute-form to a closed port is 502 upstream_connect_failed (got $r, '$(hdr dead X-Sandgate-Reason)')" \
	test "$r $(hdr dead X-Sandgate-Reason)" = "502 0 upstream_connect_failed"
r=$(pcurl deadc "https://api.example.test:$DEADP/deadc")
check "allowed CONNECT to a closed port is refused with 502 (got $r: $(cat "$T/deadc.err"))" \
	grep -q "response 502" "$T/deadc.err"
check "audit: upstream_connect_failed recorded for both" \
	test "$(audit_count '.reason == "upstream_connect_failed" and .dst_port == '"$DEADP")" = 2

# --- 4. CONNECT + ClientHello naming another host -------------------------
echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PP" -connect "api.example.test:$TLSP" \
	-servername other.example.test -CAfile "$T/certs/ca.pem" >"$T/sni.out" 2>&1
rc=$?
check "SNI mismatch: TLS handshake did not complete (openssl rc $rc)" \
	bash -c "[ $rc -ne 0 ] && grep -q 'no peer certificate available' '$T/sni.out'"
check "audit: connection deny sni_mismatch with the SNI seen" \
	audit_exists '.event == "connection" and .decision == "deny" and .reason == "sni_mismatch" and .dst_host == "api.example.test" and .sni == "other.example.test" and .bytes_up == 0 and .bytes_down == 0'
echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PP" -connect "api.example.test:$TLSP" \
	-servername api.example.test -CAfile "$T/certs/ca.pem" >"$T/sni2.out" 2>&1
check "control: the same CONNECT with the right SNI completes the handshake" \
	grep -q 'subject=CN = api.example.test' "$T/sni2.out"
out=$($PXC tunnel "$PP" api.example.test "$TLSP" --cafile "$T/certs/ca.pem" --go /dev/null --sni other.example.test)
check "SNI mismatch from a python client: 200 to the CONNECT, then no TLS session ($out)" \
	jqe '.connect_status == 200 and .handshake_error != null and .first == null' <<<"$out"
check "no TLS request reached the TLS upstream" test "$(lines "$TLS_LOG")" = 0

# --- 5. identity comes from the source address ------------------------------
B64B=$(printf 'sbx-b:x' | base64) B64A=$(printf 'sbx-a:x' | base64)
n0=$(lines "$PLAIN_LOG")
r=$(pcurl id1 -H "Proxy-Authorization: Basic $B64B" "http://b.example.test:$PLAIN/id1")
check "127.0.0.1 claiming sbx-b still gets sbx-a's policy: b.example.test 403 (got $r)" test "$r" = "403 0"
r=$(pcurl id1c --proxy-user sbx-b:x --proxy-basic --cacert "$T/certs/ca.pem" \
	--resolve "b.example.test:$TLSP:127.0.0.1" "https://b.example.test:$TLSP/id1c")
check "… also for CONNECT with Proxy-Authorization (got $r)" bash -c "[[ '$r' == 000* ]] && grep -q 403 '$T/id1c.err'"
r=$(pcurl id2 --interface 127.0.0.2 -H "Proxy-Authorization: Basic $B64A" "http://b.example.test:$PLAIN/id2")
check "127.0.0.2 (sbx-b) claiming sbx-a: b.example.test 200 (got $r)" test "$r" = "200 0"
r=$(pcurl id3 --interface 127.0.0.2 -H "Proxy-Authorization: Basic $B64A" "$URL/id3")
check "127.0.0.2 (sbx-b) claiming sbx-a: api.example.test 403 (got $r)" test "$r" = "403 0"
check "upstream saw only /id2 of the identity requests" \
	jqe -s '[.[] | select(.path | startswith("/id")) | .path] == ["/id2"]' "$PLAIN_LOG"
check "audit: the 127.0.0.1 requests are sbx-a's, denied" \
	audit_exists '.sandbox == "sbx-a" and .decision == "deny" and .dst_host == "b.example.test" and (.src | startswith("127.0.0.1:"))'
check "audit: the 127.0.0.2 requests are sbx-b's" \
	audit_exists '.sandbox == "sbx-b" and .decision == "allow" and .path == "/id2" and (.src | startswith("127.0.0.2:"))'
check "audit: no record names a sandbox other than the source's" \
	bash -c "[ \$(jq -c 'select((.src // \"\" | startswith(\"127.0.0.1:\")) and .sandbox != \"sbx-a\")' '$T/audit.jsonl' | wc -l) -eq 0 ]"

# An uncovered source: the default (deny) with reason unknown_source.
r=$(pcurl unk --interface 127.0.0.3 -H "Proxy-Authorization: Basic $B64A" "$URL/unk")
check "uncovered source 127.0.0.3 is 403 (got $r)" test "$r" = "403 0"
check "uncovered source says unknown_source (got '$(hdr unk X-Sandgate-Reason)')" \
	test "$(hdr unk X-Sandgate-Reason)" = unknown_source
check "audit: unknown_source deny from 127.0.0.3, no sandbox of ours" \
	audit_exists '.decision == "deny" and .reason == "unknown_source" and (.src | startswith("127.0.0.3:")) and .sandbox != "sbx-a" and .sandbox != "sbx-b"'
check "nothing from the unknown source reached the upstream" \
	jqe -s '[.[] | select(.path == "/unk")] | length == 0' "$PLAIN_LOG"

# --- 6. one request per upstream connection ------------------------------
# Bytes a client pipelines after its request (a second request, possibly to
# a name it may not reach) must not ride on the first request's decision:
# the raw sink records exactly what the upstream connection carried.
H="api.example.test:$SINK"
$PXC raw "$PP" --wait 3 --data "GET http://$H/pipe1 HTTP/1.1\r\nHost: $H\r\n\r\nGET http://denied.example.test:$SINK/smuggled-get HTTP/1.1\r\nHost: denied.example.test:$SINK\r\n\r\n" >"$T/pipe1.json"
$PXC raw "$PP" --wait 3 --data "POST http://$H/pipe2 HTTP/1.1\r\nHost: $H\r\nContent-Length: 5\r\n\r\nhelloGET /smuggled-cl HTTP/1.1\r\nHost: denied.example.test\r\n\r\n" >"$T/pipe2.json"
$PXC raw "$PP" --wait 3 --data "POST http://$H/pipe3 HTTP/1.1\r\nHost: $H\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /smuggled-chunked HTTP/1.1\r\nHost: denied.example.test\r\n\r\n" >"$T/pipe3.json"
check "pipelined requests: the allowed first ones reached the sink" \
	jqe -s '[.[].data | capture("^(?<m>[A-Z]+) (?<p>/pipe[0-9])") | .p] | sort == ["/pipe1","/pipe2","/pipe3"]' "$T/sink.log"
check "GET + pipelined GET to a denied name: the second never reached the upstream" \
	absent smuggled-get "$T/sink.log"
check "POST Content-Length + pipelined request: only the 5 body bytes followed the head" \
	absent smuggled-cl "$T/sink.log"
check "POST chunked + pipelined request: nothing after the last chunk reached the upstream" \
	absent smuggled-chunked "$T/sink.log"

# --- 7. request-target and Host edge cases --------------------------------
HP="api.example.test:$PLAIN"
out=$($PXC raw "$PP" --wait 3 --data "GET http://$HP/dup-host HTTP/1.1\r\nHost: $HP\r\nHost: evil.test\r\n\r\n")
check "two Host fields: 400 ($out)" jqe '.status == 400' <<<"$out"
out=$($PXC raw "$PP" --wait 3 --data "GET http://$HP/no-host HTTP/1.1\r\n\r\n")
check "absolute-form without Host: 200 ($out)" jqe '.status == 200' <<<"$out"
check "… and the upstream gets a Host from the URI" \
	jqe -s --arg h "$HP" '[.[] | select(.path == "/no-host") | [.headers[] | select(.[0] | ascii_downcase == "host") | .[1]]] == [[$h]]' "$PLAIN_LOG"
out=$($PXC raw "$PP" --wait 3 --data "POST http://$HP/conn-framing HTTP/1.1\r\nHost: $HP\r\nContent-Length: 5\r\nConnection: Host, Content-Length, Transfer-Encoding\r\n\r\nhello")
check "Connection naming Host/Content-Length does not strip framing: 200 ($out)" jqe '.status == 200' <<<"$out"
check "… upstream got Host, Content-Length: 5 and the 5-byte body" \
	jqe -s '[.[] | select(.path == "/conn-framing")] | length == 1 and (.[0] | .body_len == 5 and ([.headers[][0] | ascii_downcase] | index("host") != null and index("content-length") != null))' "$PLAIN_LOG"
out=$($PXC raw "$PP" --wait 3 --data "GET http://$HP@evil.test/userinfo HTTP/1.1\r\n\r\n")
check "authority with userinfo (http://api:port@evil.test/) is not sent to api ($out)" jqe '.status != 200' <<<"$out"
check "… nothing reached the upstream" jqe -s '[.[] | select(.path == "/userinfo")] | length == 0' "$PLAIN_LOG"
out=$($PXC raw "$PP" --wait 3 --data "CONNECT 127.0.0.1:$TLSP HTTP/1.1\r\n\r\n")
check "CONNECT to an IP literal is not matched by domain rules: 403 ($out)" jqe '.status == 403' <<<"$out"
out=$($PXC raw "$PP" --wait 3 --data "GET http://127.0.0.1:$PLAIN/ip-literal HTTP/1.1\r\nHost: 127.0.0.1:$PLAIN\r\n\r\n")
check "absolute-form to an IP literal: 403 ($out)" jqe '.status == 403' <<<"$out"
for sni in API.Example.TEST api.example.test.; do
	echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PP" -connect "api.example.test:$TLSP" \
		-servername "$sni" -CAfile "$T/certs/ca.pem" >"$T/sni-$sni.out" 2>&1
	check "SNI '$sni' (case / trailing dot) is the CONNECT host, not a mismatch" \
		grep -q 'subject=CN = api.example.test' "$T/sni-$sni.out"
done

check "gateway still serving" test "$(pcurl last "$URL/last")" = "200 0"
sg_stop
px_done
