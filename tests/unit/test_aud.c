/*
 * test_aud.c - the audit chain, writer, verifier, anchor and syslog copy
 * (audit/aud.h, aud_verify.h, aud_chain.h, aud_syslog.h).
 *
 * The chain is checked against values computed once, independently, with
 *   (printf '%064d' 0; printf '%s' RECORD) |
 *       openssl dgst -sha256 -mac HMAC -macopt key:KEY
 * Tamper cases run on files built here record by record with the chain
 * primitive, then on files written by the real writer thread; each must
 * be reported at the right line.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>
#include <cmocka.h>

#include "sg.h"
#include "audit/aud.h"
#include "audit/aud_chain.h"
#include "audit/aud_syslog.h"
#include "audit/aud_verify.h"
#include "policy/pol.h"
#include "sg_poison.h"

#define KEY "sandgate-unit-test-key-0123456789"

/* The fixture: two records and an anchor, MACs by openssl dgst (above). */
static const char R1[] = "{\"v\":1,\"seq\":1,\"ts\":\"2026-11-30T07:44:33.123456Z\","
	"\"event\":\"gateway_start\",\"sandbox\":null,\"decision\":\"allow\","
	"\"reason\":\"started\",\"rule\":null}";
static const char C1[] = "f588a97c08cdd5a9c200f2420f66608691bf9402e33fba9ae4f6ea41fc8367e6";
static const char R2[] = "{\"v\":1,\"seq\":2,\"ts\":\"2026-11-30T07:44:34.000001Z\","
	"\"event\":\"connection\",\"sandbox\":\"agent-*\",\"decision\":\"deny\","
	"\"reason\":\"default_deny\",\"rule\":null,\"dst_host\":\"evil.example\"}";
static const char C2[] = "50c478d3138b8ad1e63a640b8371bb054765fe9e25b6f5e1685d61021abfcf42";
/* HMAC(key, "sandgate-audit-head:" || the anchor without its mac) */
static const char HEAD_BODY[] = "{\"v\":1,\"file\":\"audit.jsonl\",\"seq\":2,\"chain\":"
	"\"50c478d3138b8ad1e63a640b8371bb054765fe9e25b6f5e1685d61021abfcf42\","
	"\"ts\":\"2026-11-30T07:44:35Z\"";
static const char HEAD_MAC[] = "27247198f70826c9de1ff374c63344d210ec26dfad9597978bc844b1340cee30";

static char tmpdir[64];
static struct aud_key key;
static struct aud_mac *mac;

static int group_setup(void **state)
{
	char err[256];

	SG_UNUSED(state);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_aud.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	setenv("SG_TEST_AUDIT_KEY", KEY, 1);
	if (aud_key_load("env:SG_TEST_AUDIT_KEY", &key, err, sizeof(err)) < 0)
		return -1;
	mac = aud_mac_new(&key, err, sizeof(err));
	return mac ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[128];

	SG_UNUSED(state);
	aud_mac_free(mac);
	aud_key_free(&key);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void path_in(char *out, size_t sz, const char *name)
{
	snprintf(out, sz, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* ---- the chain and its fixture --------------------------------------- */

static void test_chain_fixture(void **state)
{
	char out[AUD_CHAIN_HEX + 1];

	SG_UNUSED(state);
	/* the body is the record without its closing brace */
	assert_int_equal(aud_chain_compute(mac, aud_chain_zero, R1, sizeof(R1) - 2, out), 0);
	assert_string_equal(out, C1);
	assert_int_equal(aud_chain_compute(mac, C1, R2, sizeof(R2) - 2, out), 0);
	assert_string_equal(out, C2);
	/* the context is reused: the same input again gives the same MAC */
	assert_int_equal(aud_chain_compute(mac, aud_chain_zero, R1, sizeof(R1) - 2, out), 0);
	assert_string_equal(out, C1);
}

static void test_head_fixture(void **state)
{
	char buf[1024];
	struct aud_head h;
	int n;

	SG_UNUSED(state);
	n = snprintf(buf, sizeof(buf), "%s,\"mac\":\"%s\"}\n", HEAD_BODY, HEAD_MAC);
	assert_int_equal(aud_head_parse(mac, buf, (size_t)n, &h), 0);
	assert_int_equal(h.seq, 2);
	assert_string_equal(h.chain, C2);
	assert_string_equal(h.file, "audit.jsonl");
	/* moved back to an earlier record without the key: refused */
	buf[strlen("{\"v\":1,\"file\":\"audit.jsonl\",\"seq\":")] = '1';
	assert_int_equal(aud_head_parse(mac, buf, (size_t)n, &h), SG_ERROR);
	assert_int_equal(aud_head_parse(mac, "{}", 2, &h), SG_EINVAL);
	/* what we format, we parse */
	n = aud_head_format(mac, "a\"b.jsonl", 42, C1, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(aud_head_parse(mac, buf, (size_t)n, &h), 0);
	assert_int_equal(h.seq, 42);
	assert_string_equal(h.chain, C1);
}

static void test_line_parse(void **state)
{
	char line[1024];
	struct aud_line l;
	int has, n;
	uint64_t ps;
	const char *pc;

	SG_UNUSED(state);
	n = snprintf(line, sizeof(line), "%.*s,\"chain\":\"%s\"}", (int)sizeof(R1) - 2, R1, C1);
	assert_int_equal(aud_line_parse(line, (size_t)n, &l), 0);
	assert_int_equal(l.seq, 1);
	assert_true(aud_line_is(&l, "gateway_start"));
	assert_non_null(l.chain);
	assert_memory_equal(l.chain, C1, AUD_CHAIN_HEX);
	assert_int_equal(l.body_len, sizeof(R1) - 2);
	/* without a chain */
	assert_int_equal(aud_line_parse(R1, sizeof(R1) - 1, &l), 0);
	assert_null(l.chain);
	/* not records */
	assert_int_equal(aud_line_parse("{\"v\":1,\"seq\":1", 14, &l), SG_EINVAL);
	assert_int_equal(aud_line_parse("{\"v\":2,\"seq\":1,\"ts\":\"x\",\"event\":\"a\"}", 36, &l),
			 SG_EINVAL);
	assert_int_equal(aud_line_parse("{\"v\":1,\"seq\":01,\"ts\":\"x\",\"event\":\"a\"}", 37, &l),
			 SG_EINVAL);
	/* the rotation link */
	n = snprintf(line, sizeof(line), "{\"v\":1,\"seq\":8,\"ts\":\"t\",\"event\":\"audit_rotate\","
		     "\"prev_file\":\"x\\\",\\\"prev_seq\\\":99\",\"prev_seq\":7,\"prev_chain\":\"%s\"}",
		     C2);
	assert_int_equal(aud_line_rotate_link(line, (size_t)n, &has, &ps, &pc), 0);
	assert_true(has);
	assert_int_equal(ps, 7);        /* not the 99 inside the string */
	assert_memory_equal(pc, C2, AUD_CHAIN_HEX);
	n = snprintf(line, sizeof(line), "{\"v\":1,\"seq\":1,\"ts\":\"t\",\"event\":\"audit_rotate\","
		     "\"prev_seq\":null,\"prev_chain\":null}");
	assert_int_equal(aud_line_rotate_link(line, (size_t)n, &has, &ps, &pc), 0);
	assert_false(has);
	assert_null(pc);
}

/* ---- keys -------------------------------------------------------------- */

static void test_key_load(void **state)
{
	char path[128], err[256], out1[AUD_CHAIN_HEX + 1], out2[AUD_CHAIN_HEX + 1];
	struct aud_key k;
	struct aud_mac *m;

	SG_UNUSED(state);
	/* a trailing newline is not part of the key */
	path_in(path, sizeof(path), "key.txt");
	write_file(path, KEY "\n", sizeof(KEY));
	{
		char spec[160];

		snprintf(spec, sizeof(spec), "file:%s", path);
		assert_int_equal(aud_key_load(spec, &k, err, sizeof(err)), 0);
	}
	assert_int_equal(k.len, sizeof(KEY) - 1);
	m = aud_mac_new(&k, err, sizeof(err));
	assert_non_null(m);
	aud_key_free(&k);
	assert_null(k.bytes);
	assert_int_equal(aud_chain_compute(m, aud_chain_zero, R1, sizeof(R1) - 2, out1), 0);
	aud_mac_free(m);
	assert_string_equal(out1, C1);

	/* env: the same key, the same MAC */
	assert_int_equal(aud_key_load("env:SG_TEST_AUDIT_KEY", &k, err, sizeof(err)), 0);
	m = aud_mac_new(&k, err, sizeof(err));
	aud_key_free(&k);
	assert_int_equal(aud_chain_compute(m, aud_chain_zero, R1, sizeof(R1) - 2, out2), 0);
	aud_mac_free(m);
	assert_string_equal(out2, C1);

	/* refusals, none of them showing key bytes */
	setenv("SG_TEST_SHORT_KEY", "tiny-secret", 1);
	assert_int_equal(aud_key_load("env:SG_TEST_SHORT_KEY", &k, err, sizeof(err)), SG_EINVAL);
	assert_non_null(strstr(err, "too short"));
	assert_null(strstr(err, "tiny-secret"));
	assert_int_equal(aud_key_load("vault:audit", &k, err, sizeof(err)), SG_EINVAL);
	assert_non_null(strstr(err, "vault keys arrive with the vault"));
	assert_int_equal(aud_key_load("env:SG_TEST_NOT_SET_ANYWHERE", &k, err, sizeof(err)),
			 SG_EINVAL);
	assert_non_null(strstr(err, "not set"));
	assert_int_equal(aud_key_load("file:/nonexistent/key", &k, err, sizeof(err)), SG_EIO);
	assert_non_null(strstr(err, "cannot open"));
	assert_int_equal(aud_key_load(KEY, &k, err, sizeof(err)), SG_EINVAL);
	assert_null(k.bytes);
}

/* ---- verify on crafted files ------------------------------------------ */

#define NREC 6

/* Record i (1-based) of a crafted chain, with its chain suffix. */
static int crafted(char *out, size_t sz, uint64_t seq, const char *prev, char *chain)
{
	char body[256];
	int n = snprintf(body, sizeof(body), "{\"v\":1,\"seq\":%llu,\"ts\":\"2026-11-30T08:00:0%llu."
			 "000000Z\",\"event\":\"connection\",\"sandbox\":\"s\",\"decision\":"
			 "\"allow\",\"reason\":\"rule_allow\",\"rule\":\"r\",\"dst_host\":"
			 "\"h%llu.example\"", (unsigned long long)seq,
			 (unsigned long long)seq % 10, (unsigned long long)seq);

	assert_int_equal(aud_chain_compute(mac, prev, body, (size_t)n, chain), 0);
	return snprintf(out, sz, "%s,\"chain\":\"%s\"}\n", body, chain);
}

/* lines[i] gets record i+1; returns the concatenation */
static void crafted_lines(char lines[NREC][512])
{
	char prev[AUD_CHAIN_HEX + 1], chain[AUD_CHAIN_HEX + 1];
	int i;

	memcpy(prev, aud_chain_zero, sizeof(prev));
	for (i = 0; i < NREC; i++) {
		crafted(lines[i], 512, (uint64_t)i + 1, prev, chain);
		memcpy(prev, chain, sizeof(prev));
	}
}

/* Verify one file made of the given text; expect where to begin with want. */
static void expect_verify(const char *text, size_t len, const struct aud_key *k,
			  const char *want_prefix, const char *want_sub)
{
	char path[128];
	const char *files[1] = { path };
	struct aud_verify_result res;
	int rc;

	path_in(path, sizeof(path), "f.jsonl");
	write_file(path, text, len);
	rc = aud_verify_files(files, 1, k, &res);
	if (!want_prefix) {
		if (rc != 0)
			fail_msg("expected ok, got: %s", res.where);
		assert_int_equal(res.ok, 1);
		return;
	}
	assert_int_equal(rc, 1);
	assert_int_equal(res.ok, 0);
	if (strncmp(res.where + strlen(tmpdir) + 1, want_prefix, strlen(want_prefix)) ||
	    (want_sub && !strstr(res.where, want_sub)))
		fail_msg("want \"%s...%s\", got \"%s\"", want_prefix, want_sub ? want_sub : "",
			 res.where);
}

static void join(char *out, size_t sz, char lines[NREC][512], const int *order, int n)
{
	size_t o = 0;
	int i;

	out[0] = '\0';
	for (i = 0; i < n; i++) {
		size_t l = strlen(lines[order[i]]);

		assert_true(o + l < sz);
		memcpy(out + o, lines[order[i]], l + 1);
		o += l;
	}
}

static void test_verify_crafted(void **state)
{
	static const int all[] = { 0, 1, 2, 3, 4, 5 };
	static const int deleted[] = { 0, 1, 3, 4, 5 };
	static const int swapped[] = { 0, 1, 3, 2, 4, 5 };
	static const int headless[] = { 1, 2, 3, 4, 5 };
	char lines[NREC][512], text[8192], forged[512], chain[AUD_CHAIN_HEX + 1], *p;
	struct aud_key wrong = { (uint8_t *)"another-key-0123456789abcdef", 28 };
	size_t len;
	int n;

	SG_UNUSED(state);
	crafted_lines(lines);
	join(text, sizeof(text), lines, all, NREC);
	expect_verify(text, strlen(text), &key, NULL, NULL);

	/* a changed byte in record 3 */
	join(text, sizeof(text), lines, all, NREC);
	p = strstr(text, "h3.example");
	p[1] = '4';
	expect_verify(text, strlen(text), &key, "f.jsonl:3: chain mismatch", "changed");

	/* a changed byte inside a chain value */
	join(text, sizeof(text), lines, all, NREC);
	p = strstr(text, "\"chain\":\"") + 9;
	p[5] = p[5] == 'a' ? 'b' : 'a';
	expect_verify(text, strlen(text), &key, "f.jsonl:1: chain mismatch", "wrong key");

	/* a removed line: a seq gap, and its chain does not follow either */
	join(text, sizeof(text), lines, deleted, NREC - 1);
	expect_verify(text, strlen(text), &key, "f.jsonl:3: seq 4 where 3 was expected",
		      "chain mismatch");

	/* two lines swapped */
	join(text, sizeof(text), lines, swapped, NREC);
	expect_verify(text, strlen(text), &key, "f.jsonl:3: seq 4 where 3 was expected", NULL);

	/* a forged line inserted (right seq, chain made without the key) */
	n = crafted(forged, sizeof(forged), 3, aud_chain_zero, chain);
	SG_UNUSED(n);
	join(text, sizeof(text), lines, all, 2);
	len = strlen(text);
	memcpy(text + len, forged, strlen(forged) + 1);
	len += strlen(forged);
	for (n = 2; n < NREC; n++) {
		memcpy(text + len, lines[n], strlen(lines[n]) + 1);
		len += strlen(lines[n]);
	}
	expect_verify(text, len, &key, "f.jsonl:3: chain mismatch", "forged");

	/* truncated mid-line */
	join(text, sizeof(text), lines, all, NREC);
	len = strlen(text) - 40;
	expect_verify(text, len, &key, "f.jsonl:6: truncated record", NULL);

	/* the first lines removed */
	join(text, sizeof(text), lines, headless, NREC - 1);
	expect_verify(text, strlen(text), &key, "f.jsonl:1: the chain does not start here", NULL);

	/* wrong key */
	join(text, sizeof(text), lines, all, NREC);
	expect_verify(text, strlen(text), &wrong, "f.jsonl:1: chain mismatch: wrong key", NULL);

	/* a record without chain */
	expect_verify(R1, sizeof(R1) - 1, &key, "f.jsonl:1: truncated record", NULL);
	snprintf(text, sizeof(text), "%s\n", R1);
	expect_verify(text, strlen(text), &key, "f.jsonl:1: no chain field", NULL);

	/* garbage between records */
	join(text, sizeof(text), lines, all, 2);
	len = strlen(text);
	len += (size_t)snprintf(text + len, sizeof(text) - len, "hello\n%s", lines[2]);
	expect_verify(text, len, &key, "f.jsonl:3: not a complete audit record", NULL);

	/* empty */
	expect_verify("", 0, &key, "f.jsonl: empty", NULL);
}

static void test_verify_missing(void **state)
{
	const char *files[1] = { "/nonexistent/audit.jsonl" };
	struct aud_verify_result res;

	SG_UNUSED(state);
	assert_true(aud_verify_files(files, 1, &key, &res) < 0);
	assert_int_equal(res.ok, 0);
	assert_non_null(strstr(res.where, "/nonexistent/audit.jsonl: cannot open"));
}

/* ---- the writer ---------------------------------------------------------- */

static struct aud_writer *open_writer(const char *path, uint64_t rotate, int keep,
				      size_t qmax)
{
	struct aud_config ac = {
		.path = path,
		.fsync_mode = AUD_FSYNC_BATCH,
		.key_spec = "env:SG_TEST_AUDIT_KEY",
		.rotate_size = rotate,
		.rotate_keep = keep,
		.queue_max = qmax,
	};
	char err[256];
	struct aud_writer *a = aud_open(&ac, err, sizeof(err));

	if (!a)
		fail_msg("aud_open: %s", err);
	return a;
}

static void submit_n(struct aud_writer *a, int n, const char *event)
{
	struct aud_rec r;
	int i;

	for (i = 0; i < n; i++) {
		aud_rec_begin(&r, event);
		aud_rec_decision(&r, "sbx", "allow", "rule_allow", "r");
		sg_json_int(&r.j, "i", i);
		sg_json_str(&r.j, "pad", "...................................................."
			    "......................................................");
		aud_rec_submit(a, &r);
	}
}

static int verify_opts(const char *const *files, size_t n, const char *anchor,
		       int accept, struct aud_verify_result *res)
{
	struct aud_verify_opts o = { .accept_recovered = accept, .anchor = anchor };

	return aud_verify_files_ex(files, n, &key, &o, res);
}

static void test_writer_restart(void **state)
{
	char path[128], head[160];
	const char *files[1] = { path };
	struct aud_verify_result res;
	struct aud_writer *a;
	struct aud_stats st;

	SG_UNUSED(state);
	path_in(path, sizeof(path), "w.jsonl");
	snprintf(head, sizeof(head), "%s.head", path);
	a = open_writer(path, 0, 0, 0);
	submit_n(a, 500, "connection");
	aud_close(a);
	assert_int_equal(verify_opts(files, 1, head, 0, &res), 0);
	assert_int_equal(res.records, 500);
	assert_int_equal(res.anchor_ok, 1);

	/* a restart continues seq and chain */
	a = open_writer(path, 0, 0, 0);
	submit_n(a, 10, "request");
	aud_close(a);
	assert_int_equal(verify_opts(files, 1, head, 0, &res), 0);
	assert_int_equal(res.records, 510);
	assert_int_equal(res.last_seq, 510);

	/* written but not yet counted: aud_stats */
	a = open_writer(path, 0, 0, 0);
	submit_n(a, 1, "request");
	aud_close(a);
	aud_stats_get(NULL, &st);
	assert_int_equal(st.written, 0);
}

static void test_writer_torn_tail(void **state)
{
	char path[128], msg[256];
	const char *files[1] = { path };
	struct aud_verify_result res;
	struct aud_writer *a;
	char *text;
	size_t len;
	int fd;

	SG_UNUSED(state);
	path_in(path, sizeof(path), "torn.jsonl");
	a = open_writer(path, 0, 0, 0);
	submit_n(a, 3, "connection");
	aud_close(a);
	/* a crash mid-write leaves half a record */
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\"v\":1,\"seq\":4,\"ts\":\"20", 23), 23);
	close(fd);
	/* the truncated tail alone */
	assert_int_equal(verify_opts(files, 1, NULL, 0, &res), 1);
	snprintf(msg, sizeof(msg), "%s:4: truncated record", path);
	assert_memory_equal(res.where, msg, strlen(msg));

	a = open_writer(path, 0, 0, 0);
	submit_n(a, 2, "connection");
	aud_close(a);
	text = read_file(path, &len);
	/* the fragment stays on its own line; the next record says so */
	assert_non_null(strstr(text, "{\"v\":1,\"seq\":4,\"ts\":\"20\n{\"v\":1,\"seq\":4,"));
	assert_non_null(strstr(text, "\"recovered_torn_tail\":true,\"torn_bytes\":23"));
	free(text);
	/* verify names the torn line until the operator accepts it */
	assert_int_equal(verify_opts(files, 1, NULL, 0, &res), 1);
	snprintf(msg, sizeof(msg), "%s:4: not a complete audit record (23 bytes)", path);
	assert_memory_equal(res.where, msg, strlen(msg));
	assert_non_null(strstr(res.where, "--accept-recovered"));
	assert_int_equal(verify_opts(files, 1, NULL, 1, &res), 0);
	assert_int_equal(res.torn, 1);
	assert_int_equal(res.records, 5);
}

static void test_writer_rotation(void **state)
{
	char path[128], p1[140], p2[140], p3[140], p4[140], head[160];
	const char *all[4] = { p3, p2, p1, path };
	const char *nomid[3] = { p3, p1, path };
	const char *nolast[3] = { p3, p2, p1 };
	struct aud_verify_result res;
	struct aud_writer *a;
	struct stat st;
	char *text;
	size_t len;

	SG_UNUSED(state);
	path_in(path, sizeof(path), "rot.jsonl");
	snprintf(p1, sizeof(p1), "%s.1", path);
	snprintf(p2, sizeof(p2), "%s.2", path);
	snprintf(p3, sizeof(p3), "%s.3", path);
	snprintf(p4, sizeof(p4), "%s.4", path);
	snprintf(head, sizeof(head), "%s.head", path);
	a = open_writer(path, 8192, 3, 0);
	submit_n(a, 400, "connection");     /* ~100 KB: a dozen rotations */
	aud_close(a);
	assert_int_equal(stat(p4, &st), -1);        /* keep: 3 */
	assert_int_equal(stat(p3, &st), 0);
	assert_true(st.st_size <= 8192);
	text = read_file(path, &len);
	assert_memory_equal(strstr(text, "\"event\":\""), "\"event\":\"audit_rotate\"", 22);
	assert_non_null(strstr(text, "\"reason\":\"size\",\"rule\":null,\"prev_file\":\"rot.jsonl.1\""));
	free(text);

	assert_int_equal(verify_opts(all, 4, head, 0, &res), 0);
	assert_int_equal(res.anchor_ok, 1);
	/* the newest file alone verifies from its prev_chain */
	assert_int_equal(verify_opts(&all[3], 1, NULL, 0, &res), 0);
	/* a dropped middle file */
	assert_int_equal(verify_opts(nomid, 3, NULL, 0, &res), 1);
	assert_memory_equal(res.where, p1, strlen(p1));
	assert_non_null(strstr(res.where, ":1: does not follow"));
	/* a dropped last file: only the anchor can tell */
	assert_int_equal(verify_opts(nolast, 3, NULL, 0, &res), 0);
	assert_int_equal(verify_opts(nolast, 3, head, 0, &res), 1);
	assert_non_null(strstr(res.where, "the newest file or its last"));
	/* out of order */
	{
		const char *swapped[4] = { p2, p3, p1, path };

		assert_int_equal(verify_opts(swapped, 4, NULL, 0, &res), 1);
		assert_memory_equal(res.where, p3, strlen(p3));
	}
}

/* Writes fail (ENOSPC from /dev/full), the queue overflows, then the path
 * works again: the gap is declared inside the chain. */
static void test_writer_lost(void **state)
{
	char path[128];
	const char *files[1] = { path };
	struct aud_verify_result res;
	struct aud_writer *a;
	struct aud_stats st;
	char *text;
	size_t len;
	int i;

	SG_UNUSED(state);
	path_in(path, sizeof(path), "full.jsonl");
	unlink(path);
	assert_int_equal(symlink("/dev/full", path), 0);
	a = open_writer(path, 0, 0, 5);
	submit_n(a, 1, "connection");
	for (i = 0; i < 200 && !aud_failing(a); i++)
		usleep(10000);
	assert_true(aud_failing(a));
	submit_n(a, 20, "connection");      /* 4 more fit in the queue, 16 lost */
	assert_int_equal(aud_lost(a), 16);
	/* the disk is back: a regular file at the path, SIGUSR1 */
	assert_int_equal(unlink(path), 0);
	aud_reopen(a);
	for (i = 0; i < 200 && aud_failing(a); i++)
		usleep(10000);
	assert_false(aud_failing(a));
	submit_n(a, 1, "request");
	aud_stats_get(a, &st);
	aud_close(a);
	assert_int_equal(st.lost, 16);
	assert_int_equal(st.chained, 1);
	text = read_file(path, &len);
	assert_non_null(strstr(text, "\"event\":\"request\""));
	assert_non_null(strstr(text, "\"lost_before\":16"));
	free(text);
	assert_int_equal(verify_opts(files, 1, NULL, 0, &res), 0);
	assert_int_equal(res.lost, 16);
	assert_int_equal(res.records, 7);   /* rotate + 5 + 1 */
}

/* Restarted with the file gone: the anchor keeps the chain linked; with
 * the tail cut while stopped: the new file records the finding. */
static void test_writer_anchor_restart(void **state)
{
	char path[128], p1[140];
	const char *files[2] = { p1, path };
	struct aud_verify_result res;
	struct aud_writer *a;
	char *text;
	size_t len, cut;

	SG_UNUSED(state);
	path_in(path, sizeof(path), "anc.jsonl");
	snprintf(p1, sizeof(p1), "%s.1", path);
	a = open_writer(path, 0, 0, 0);
	submit_n(a, 5, "connection");
	aud_close(a);
	/* logrotate moved it while we were down */
	assert_int_equal(rename(path, p1), 0);
	a = open_writer(path, 0, 0, 0);
	submit_n(a, 2, "connection");
	aud_close(a);
	text = read_file(path, &len);
	assert_non_null(strstr(text, "\"reason\":\"restart\""));
	free(text);
	assert_int_equal(verify_opts(files, 2, NULL, 0, &res), 0);
	assert_int_equal(res.records, 8);

	/* cut the last two records while stopped */
	text = read_file(path, &len);
	cut = (size_t)(strstr(text, "\"seq\":7") - text) - 7;   /* {"v":1, */
	write_file(path, text, cut);
	free(text);
	a = open_writer(path, 0, 0, 0);
	submit_n(a, 1, "connection");
	aud_close(a);
	text = read_file(path, &len);
	assert_non_null(strstr(text, "\"reason\":\"anchor_mismatch\""));
	assert_non_null(strstr(text, "\"anchor_seq\":8"));
	free(text);
	files[0] = path;
	assert_int_equal(verify_opts(files, 1, NULL, 0, &res), 1);
	if (!strstr(res.where, "found records missing"))
		fail_msg("got: %s", res.where);
	assert_int_equal(verify_opts(files, 1, NULL, 1, &res), 0);
}

/* ---- config ---------------------------------------------------------------- */

static int load_cfg(const char *yaml, struct sg_config **cfg, char *err, size_t errsz)
{
	char path[128];

	path_in(path, sizeof(path), "c.yaml");
	write_file(path, yaml, strlen(yaml));
	return pol_config_load(path, cfg, err, errsz);
}

static void test_config(void **state)
{
	static const struct { const char *size; uint64_t v; } sizes[] = {
		{ "64k", 65536 }, { "10MB", 10485760 }, { "1GB", 1073741824 },
		{ "512KiB", 524288 }, { "100000", 100000 }, { "2g", 2147483648ull },
	};
	struct sg_config *cfg;
	char yaml[512], err[512];
	size_t i;

	SG_UNUSED(state);
	for (i = 0; i < SG_ARRAY_LEN(sizes); i++) {
		snprintf(yaml, sizeof(yaml), "version: 1\naudit:\n  path: a.jsonl\n"
			 "  key: env:K\n  rotate: { size: %s, keep: 3 }\n"
			 "  syslog: tcp://[::1]:6514\n", sizes[i].size);
		if (load_cfg(yaml, &cfg, err, sizeof(err)) < 0)
			fail_msg("%s: %s", sizes[i].size, err);
		assert_int_equal(cfg->audit_rotate_size, sizes[i].v);
		assert_int_equal(cfg->audit_rotate_keep, 3);
		assert_string_equal(cfg->audit_key, "env:K");
		assert_string_equal(cfg->audit_syslog, "tcp://[::1]:6514");
		pol_config_free(cfg);
	}
	assert_int_equal(load_cfg("version: 1\naudit:\n  path: a\n", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg->audit_rotate_keep, 10);
	assert_int_equal(cfg->audit_rotate_size, 0);
	assert_null(cfg->audit_key);
	pol_config_free(cfg);

#define BAD(y, want) do { \
	assert_true(load_cfg(y, &cfg, err, sizeof(err)) < 0); \
	if (!strstr(err, want)) fail_msg("want \"%s\", got \"%s\"", want, err); \
} while (0)
	BAD("version: 1\naudit:\n  key: vault:audit\n",
	    "c.yaml:3:8: audit.key: vault keys arrive with the vault");
	BAD("version: 1\naudit:\n  key: my-secret-hmac-key-value\n",
	    "c.yaml:3:8: audit.key: expected file:PATH or env:NAME");
	assert_null(strstr(err, "my-secret-hmac-key-value"));
	BAD("version: 1\naudit:\n  rotate: { size: 10XB }\n",
	    "c.yaml:3:19: size in audit.rotate: invalid size \"10XB\"");
	BAD("version: 1\naudit:\n  rotate: { size: 1k }\n", "c.yaml:3:19: size in audit.rotate: 1k is out of range");
	BAD("version: 1\naudit:\n  rotate: { keep: 3 }\n", "c.yaml:3:11: audit.rotate: size is required");
	BAD("version: 1\naudit:\n  rotate: { size: 1MB, keep: 0 }\n", "keep in audit.rotate");
	BAD("version: 1\naudit:\n  rotate: { size: 1MB, every: 1h }\n",
	    "unknown key \"every\" in audit.rotate");
	BAD("version: 1\naudit:\n  syslog: http://x:1\n",
	    "c.yaml:3:11: audit.syslog: expected udp://HOST:PORT or tcp://HOST:PORT");
	BAD("version: 1\naudit:\n  syslog: udp://x\n", "audit.syslog: expected");
#undef BAD
}

/* ---- syslog ------------------------------------------------------------------ */

static int listen_on(int type, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, type, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 4), 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	*port = ntohs(sa.sin_port);
	return fd;
}

static ssize_t recv_wait(int fd, char *buf, size_t sz)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 3000) != 1)
		return -1;
	return recv(fd, buf, sz, 0);
}

static void test_syslog(void **state)
{
	char url[64], err[256], buf[4096], want[600], host[256];
	struct aud_syslog *s;
	int fd, cfd, port;
	ssize_t n;
	size_t got = 0;

	SG_UNUSED(state);
	gethostname(host, sizeof(host));
	/* UDP: one datagram per record, authpriv.notice for a deny */
	fd = listen_on(SOCK_DGRAM, &port);
	snprintf(url, sizeof(url), "udp://127.0.0.1:%d", port);
	s = aud_syslog_open(url, err, sizeof(err));
	assert_non_null(s);
	aud_syslog_send(s, R2, sizeof(R2) - 1);
	n = recv_wait(fd, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	snprintf(want, sizeof(want), "<85>1 2026-11-30T07:44:34.000001Z %s sandgate %d - - {",
		 host, (int)getpid());
	assert_memory_equal(buf, want, strlen(want));
	assert_string_equal(strstr(buf, " - - ") + 5, R2);
	aud_syslog_close(s);
	close(fd);

	/* TCP: octet counting, info for an allow */
	fd = listen_on(SOCK_STREAM, &port);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	s = aud_syslog_open(url, err, sizeof(err));
	assert_non_null(s);
	aud_syslog_send(s, R1, sizeof(R1) - 1);
	aud_syslog_send(s, R1, sizeof(R1) - 1);
	cfd = accept(fd, NULL, NULL);
	assert_true(cfd >= 0);
	/* RFC 6587 octet counting: "LEN SP MSG", twice */
	for (;;) {
		const char *sp;
		unsigned long len;

		n = recv_wait(cfd, buf + got, sizeof(buf) - 1 - got);
		assert_true(n > 0);
		got += (size_t)n;
		buf[got] = '\0';
		sp = memchr(buf, ' ', got);
		if (!sp)
			continue;
		len = strtoul(buf, NULL, 10);
		if (got < (size_t)(sp + 1 - buf) + len + 2)
			continue;
		assert_memory_equal(sp + 1, "<86>1 2026-11-30T07:44:33.123456Z ", 34);
		assert_memory_equal(sp + 1 + len - (sizeof(R1) - 1), R1, sizeof(R1) - 1);
		assert_true(sp[1 + len] >= '1' && sp[1 + len] <= '9');  /* the next frame */
		break;
	}
	aud_syslog_close(s);
	assert_true(aud_syslog_sent(NULL) == 0);
	close(cfd);
	close(fd);

	/* a peer that is not there: sends are dropped and counted, never block */
	s = aud_syslog_open("udp://127.0.0.1:9", err, sizeof(err));
	assert_non_null(s);
	aud_syslog_close(s);
	assert_null(aud_syslog_open("ftp://x:1", err, sizeof(err)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain_fixture),
		cmocka_unit_test(test_head_fixture),
		cmocka_unit_test(test_line_parse),
		cmocka_unit_test(test_key_load),
		cmocka_unit_test(test_verify_crafted),
		cmocka_unit_test(test_verify_missing),
		cmocka_unit_test(test_writer_restart),
		cmocka_unit_test(test_writer_torn_tail),
		cmocka_unit_test(test_writer_rotation),
		cmocka_unit_test(test_writer_lost),
		cmocka_unit_test(test_writer_anchor_restart),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_syslog),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
