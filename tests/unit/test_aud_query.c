/*
 * test_aud_query.c - the audit reading layer (audit/aud_jsonl.h): the
 * strict one-line JSON scanner, the record view, RFC 3339 and relative
 * times, globs, the query filters, text cleaning, the tally and the block
 * line reader.
 *
 * The scanner cases are annotated lines: each says which rule of RFC 8259
 * (or of our flat-record restriction) it exercises. A test that only
 * checked "no crash" would pass on a scanner that accepts everything, so
 * every rejection is asserted as SG_ERROR and every acceptance by value.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "audit/aud_jsonl.h"

#define L(s) (s), (sizeof(s) - 1)

/* The example line of docs/audit.md, plus a chain. */
static const char rec_doc[] =
	"{\"v\":1,\"seq\":2,\"ts\":\"2026-11-30T07:55:19.143297Z\",\"event\":\"connection\","
	"\"sandbox\":\"local\",\"decision\":\"allow\",\"reason\":\"rule_allow\",\"rule\":\"api\","
	"\"src\":\"127.0.0.1:49464\",\"dst_host\":\"api.example.test\",\"dst_ip\":\"127.0.0.1\","
	"\"dst_port\":38151,\"sni\":\"api.example.test\",\"alpn\":\"h2,http/1.1\","
	"\"tls\":\"passthrough\",\"bytes_up\":746,\"bytes_down\":1525,\"duration_ms\":48,"
	"\"chain\":\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"}";

/* ---- scanner: accepted ------------------------------------------------------ */

static void test_find_values(void **state)
{
	static const char line[] =
		" {\"s\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"n\":-12.5e+3 ,\"z\":null,"
		"\"t\":true,\"f\":false,\"a\":[\"x\", \"y\\u0041\"],\"e\":[],"
		"\"u\":\"\\u00e9\\ud83d\\ude00\xc3\xa9\"}\r\n";
	struct aud_jval v;
	char buf[64];

	(void)state;
	assert_int_equal(aud_jsonl_check(L(line)), 0);
	assert_int_equal(aud_jsonl_find(L(line), "s", &v), 0);
	assert_int_equal(v.type, AUD_J_STRING);
	assert_true(v.esc);
	assert_int_equal(aud_jsonl_str(&v, buf, sizeof(buf)), 12);
	assert_memory_equal(buf, "a\"b\\c/d\b\f\n\r\t", 13);

	assert_int_equal(aud_jsonl_find(L(line), "n", &v), 0);
	assert_int_equal(v.type, AUD_J_NUMBER);
	assert_int_equal(v.n, 8);
	assert_memory_equal(v.p, "-12.5e+3", 8);
	assert_int_equal(aud_jsonl_find(L(line), "z", &v), 0);
	assert_int_equal(v.type, AUD_J_NULL);
	assert_int_equal(aud_jsonl_find(L(line), "t", &v), 0);
	assert_int_equal(v.type, AUD_J_TRUE);
	assert_int_equal(aud_jsonl_find(L(line), "f", &v), 0);
	assert_int_equal(v.type, AUD_J_FALSE);
	assert_int_equal(aud_jsonl_find(L(line), "a", &v), 0);
	assert_int_equal(v.type, AUD_J_ARRAY);
	assert_int_equal(aud_jsonl_find(L(line), "missing", &v), SG_DECLINED);

	/* \u00e9 and a surrogate pair (U+1F600) decode to UTF-8; raw UTF-8 stays */
	assert_int_equal(aud_jsonl_find(L(line), "u", &v), 0);
	assert_int_equal(aud_jsonl_str(&v, buf, sizeof(buf)), 8);
	assert_memory_equal(buf, "\xc3\xa9\xf0\x9f\x98\x80\xc3\xa9", 9);
}

static void test_array_walk(void **state)
{
	static const char line[] = "{\"a\":[ \"openai\" ,\"git\\u0068ub\"],\"e\":[ ]}";
	struct aud_jval v, e;
	size_t off = 0;
	char buf[32];

	(void)state;
	assert_int_equal(aud_jsonl_find(L(line), "a", &v), 0);
	assert_int_equal(aud_jsonl_arr_next(&v, &off, &e), 1);
	assert_int_equal(aud_jsonl_str(&e, buf, sizeof(buf)), 6);
	assert_string_equal(buf, "openai");
	assert_int_equal(aud_jsonl_arr_next(&v, &off, &e), 1);
	assert_int_equal(aud_jsonl_str(&e, buf, sizeof(buf)), 6);
	assert_string_equal(buf, "github");
	assert_int_equal(aud_jsonl_arr_next(&v, &off, &e), 0);
	assert_int_equal(aud_jsonl_arr_next(&v, &off, &e), 0);   /* stays at the end */

	off = 0;
	assert_int_equal(aud_jsonl_find(L(line), "e", &v), 0);
	assert_int_equal(aud_jsonl_arr_next(&v, &off, &e), 0);
	/* not an array */
	assert_int_equal(aud_jsonl_find(L(line), "a", &v), 0);
	v.type = AUD_J_STRING;
	assert_int_equal(aud_jsonl_arr_next(&v, &off, &e), SG_ERROR);
}

static void test_iterator_and_keys(void **state)
{
	static const char line[] = "{\"\\u0074s\":\"x\",\"b\":1}";
	struct aud_jsonl_it it;
	struct aud_jval k, v;

	(void)state;
	aud_jsonl_it_init(&it, L(line));
	assert_int_equal(aud_jsonl_it_next(&it, &k, &v), 1);
	/* an escaped key still names "ts": readers must not be fooled by spelling */
	assert_true(aud_jsonl_key_is(&k, "ts"));
	assert_false(aud_jsonl_key_is(&k, "t"));
	assert_false(aud_jsonl_key_is(&k, "tss"));
	assert_int_equal(aud_jsonl_it_next(&it, &k, &v), 1);
	assert_true(aud_jsonl_key_is(&k, "b"));
	assert_int_equal(aud_jsonl_it_next(&it, &k, &v), 0);
	assert_int_equal(aud_jsonl_it_next(&it, &k, &v), 0);
	assert_int_equal(aud_jsonl_find(L(line), "ts", &v), 0);

	assert_int_equal(aud_jsonl_check(L("{}")), 0);
	assert_int_equal(aud_jsonl_check(L(" { } ")), 0);
}

/* ---- scanner: rejected ------------------------------------------------------ */

static void test_rejects(void **state)
{
	static const struct {
		const char *line;
		const char *why;
	} bad[] = {
		{ "", "empty line" },
		{ "   ", "only whitespace" },
		{ "[]", "not an object" },
		{ "\"x\"", "a bare string" },
		{ "{", "unterminated object" },
		{ "{\"a\":1", "no closing brace" },
		{ "{\"a\":1}}", "trailing brace" },
		{ "{\"a\":1}{\"b\":2}", "two objects on one line" },
		{ "{\"a\":1} x", "trailing garbage" },
		{ "{\"a\":{\"b\":1}}", "nested object (records are flat)" },
		{ "{\"a\":[1,2]}", "array of numbers" },
		{ "{\"a\":[\"x\",]}", "trailing comma in array" },
		{ "{\"a\":[\"x\" \"y\"]}", "missing comma in array" },
		{ "{\"a\":[[\"x\"]]}", "nested array" },
		{ "{\"a\":[\"x\"}", "unterminated array" },
		{ "{\"a\":1,}", "trailing comma" },
		{ "{,\"a\":1}", "leading comma" },
		{ "{\"a\" 1}", "missing colon" },
		{ "{\"a\":1 \"b\":2}", "missing comma" },
		{ "{a:1}", "unquoted key" },
		{ "{'a':1}", "single quotes" },
		{ "{\"a\":}", "missing value" },
		{ "{\"a\":tru}", "truncated literal" },
		{ "{\"a\":True}", "literal case" },
		{ "{\"a\":nan}", "NaN" },
		{ "{\"a\":01}", "leading zero (RFC 8259 6)" },
		{ "{\"a\":1.}", "fraction without digits" },
		{ "{\"a\":.5}", "no integer part" },
		{ "{\"a\":-}", "lone minus" },
		{ "{\"a\":+1}", "plus sign" },
		{ "{\"a\":1e}", "exponent without digits" },
		{ "{\"a\":0x10}", "hex number" },
		{ "{\"a\":\"x}", "unterminated string" },
		{ "{\"a\":\"x\ty\"}", "raw tab in a string (RFC 8259 7)" },
		{ "{\"a\":\"\\x41\"}", "unknown escape" },
		{ "{\"a\":\"\\u12\"}", "short \\u escape" },
		{ "{\"a\":\"\\u12g4\"}", "non-hex \\u escape" },
		{ "{\"a\":\"\\ud800\"}", "lone high surrogate" },
		{ "{\"a\":\"\\udc00\"}", "lone low surrogate" },
		{ "{\"a\":\"\\ud800\\u0041\"}", "high surrogate and no low one" },
		{ "{\"a\":\"\\ud800x\"}", "high surrogate at the end of an escape run" },
		{ "{\"a\":\"\\\"}", "escaped closing quote leaves it unterminated" },
		{ "{\"a\":\"\xc0\x80\"}", "overlong NUL" },
		{ "{\"a\":\"\xed\xa0\x80\"}", "UTF-8 surrogate" },
		{ "{\"a\":\"\xf5\x80\x80\x80\"}", "beyond U+10FFFF" },
		{ "{\"a\":\"\xe2\x82\"}", "truncated UTF-8" },
		{ "{\"a\":\"\x80\"}", "stray continuation byte" },
		{ "{\"\xff\":1}", "invalid UTF-8 in a key" },
		{ "\xef\xbb\xbf{\"a\":1}", "byte order mark" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(bad); i++) {
		if (aud_jsonl_check(bad[i].line, strlen(bad[i].line)) != SG_ERROR)
			fail_msg("accepted: %s", bad[i].why);
	}
	/* a NUL byte inside the line (not a string escape) */
	assert_int_equal(aud_jsonl_check("{\"a\":1}\0", 8), SG_ERROR);
	assert_int_equal(aud_jsonl_check("{\"a\":\"\0\"}", 8), SG_ERROR);
}

static void test_find_strict(void **state)
{
	struct aud_jval v;

	(void)state;
	/* the key is before the damage, but the line as a whole is not a record */
	assert_int_equal(aud_jsonl_find(L("{\"a\":1,\"b\":{}}"), "a", &v), SG_ERROR);
	/* two "a": two readers could disagree about which counts */
	assert_int_equal(aud_jsonl_find(L("{\"a\":1,\"a\":2}"), "a", &v), SG_ERROR);
	assert_int_equal(aud_jsonl_find(L("{\"a\":1,\"\\u0061\":2}"), "a", &v), SG_ERROR);
	/* duplicates of other keys do not make "b" ambiguous */
	assert_int_equal(aud_jsonl_find(L("{\"a\":1,\"a\":2,\"b\":3}"), "b", &v), 0);
}

static void test_decode_limits(void **state)
{
	struct aud_jval v;
	char buf[16];
	int64_t n;

	(void)state;
	assert_int_equal(aud_jsonl_find(L("{\"s\":\"abcdef\"}"), "s", &v), 0);
	assert_int_equal(aud_jsonl_str(&v, buf, 6), SG_EINVAL);   /* needs raw + 1 */
	assert_int_equal(aud_jsonl_str(&v, buf, 7), 6);
	assert_int_equal(aud_jsonl_find(L("{\"s\":\"a\\u0000b\"}"), "s", &v), 0);
	assert_int_equal(aud_jsonl_str(&v, buf, sizeof(buf)), 3);      /* NUL kept, length says so */
	assert_memory_equal(buf, "a\0b", 4);
	assert_int_equal(aud_jsonl_find(L("{\"s\":1}"), "s", &v), 0);
	assert_int_equal(aud_jsonl_str(&v, buf, sizeof(buf)), SG_EINVAL);

	assert_int_equal(aud_jsonl_find(L("{\"n\":9223372036854775807}"), "n", &v), 0);
	assert_int_equal(aud_jsonl_int(&v, &n), 0);
	assert_true(n == INT64_MAX);
	assert_int_equal(aud_jsonl_find(L("{\"n\":-9223372036854775808}"), "n", &v), 0);
	assert_int_equal(aud_jsonl_int(&v, &n), 0);
	assert_true(n == INT64_MIN);
	assert_int_equal(aud_jsonl_find(L("{\"n\":9223372036854775808}"), "n", &v), 0);
	assert_int_equal(aud_jsonl_int(&v, &n), SG_EINVAL);
	assert_int_equal(aud_jsonl_find(L("{\"n\":1.5}"), "n", &v), 0);
	assert_int_equal(aud_jsonl_int(&v, &n), SG_EINVAL);
	assert_int_equal(aud_jsonl_find(L("{\"n\":1e3}"), "n", &v), 0);
	assert_int_equal(aud_jsonl_int(&v, &n), SG_EINVAL);
	assert_int_equal(aud_jsonl_find(L("{\"n\":-0}"), "n", &v), 0);
	assert_int_equal(aud_jsonl_int(&v, &n), 0);
	assert_true(n == 0);
}

/* ---- record view ------------------------------------------------------------- */

static void test_recv_doc_example(void **state)
{
	struct aud_recv r;
	char scratch[sizeof(rec_doc)];
	const char *why = NULL;

	(void)state;
	assert_int_equal(aud_recv_parse(L(rec_doc), &r, scratch, sizeof(scratch), &why), 0);
	assert_string_equal(r.event.p, "connection");
	assert_string_equal(r.sandbox.p, "local");
	assert_string_equal(r.decision.p, "allow");
	assert_string_equal(r.reason.p, "rule_allow");
	assert_string_equal(r.rule.p, "api");
	assert_string_equal(r.dst_host.p, "api.example.test");
	assert_string_equal(r.dst_ip.p, "127.0.0.1");
	assert_string_equal(r.tls.p, "passthrough");
	assert_int_equal(r.seq, 2);
	assert_int_equal(r.dst_port, 38151);
	assert_int_equal(r.bytes_up, 746);
	assert_int_equal(r.bytes_down, 1525);
	assert_int_equal(r.status, -1);
	assert_null(r.method.p);
	/* 2026-11-30T07:55:19.143297Z */
	assert_true(r.ts_us == INT64_C(1796025319143297));
}

static void test_recv_rejects(void **state)
{
	static const char *const bad[] = {
		"{\"event\":\"connection\"}",                                   /* no ts */
		"{\"ts\":\"2026-11-30T07:55:19Z\"}",                            /* no event */
		"{\"ts\":\"yesterday\",\"event\":\"dns\"}",                     /* ts not a time */
		"{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":1}",                /* event a number */
		"{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"x\",\"dst_port\":\"443\"}",
		"{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"x\",\"dst_port\":443.0}",
		"{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"x\",\"secrets\":\"openai\"}",
		"{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"x\",\"decision\":\"allow\",\"decision\":\"deny\"}",
		"{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"x\",\"dst_host\":[\"a\"]}",
		"{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"x\"",
	};
	struct aud_recv r;
	char scratch[256];
	const char *why;
	size_t i;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(bad); i++) {
		why = NULL;
		if (aud_recv_parse(bad[i], strlen(bad[i]), &r, scratch, sizeof(scratch), &why) != SG_ERROR)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(why);
	}
	/* null known fields and unknown fields of any flat type are fine */
	assert_int_equal(aud_recv_parse(L("{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"x\","
					  "\"sandbox\":null,\"dst_port\":null,\"new\":[\"y\"],\"b\":true}"),
					&r, scratch, sizeof(scratch), &why), 0);
	assert_null(r.sandbox.p);
	assert_int_equal(r.dst_port, -1);
}

static void test_recv_secrets(void **state)
{
	static const char line[] = "{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"request\","
				   "\"secrets\":[\"openai\",\"git\\u0068ub\"]}";
	static const char one[] = "{\"ts\":\"2026-11-30T07:55:19Z\",\"event\":\"secret_violation\","
				  "\"secret\":\"stripe\"}";
	struct aud_recv r;
	char scratch[256];
	const char *why;

	(void)state;
	assert_int_equal(aud_recv_parse(L(line), &r, scratch, sizeof(scratch), &why), 0);
	assert_true(aud_recv_has_secret(&r, "openai"));
	assert_true(aud_recv_has_secret(&r, "github"));
	assert_false(aud_recv_has_secret(&r, "git"));
	assert_false(aud_recv_has_secret(&r, "stripe"));
	assert_int_equal(aud_recv_parse(L(one), &r, scratch, sizeof(scratch), &why), 0);
	assert_true(aud_recv_has_secret(&r, "stripe"));
}

/* ---- time ------------------------------------------------------------------- */

static void test_time_parse(void **state)
{
	int64_t us;

	(void)state;
	assert_int_equal(aud_time_parse(L("1970-01-01T00:00:00Z"), &us), 0);
	assert_true(us == 0);
	assert_int_equal(aud_time_parse(L("2026-11-30T07:00:00Z"), &us), 0);
	assert_true(us == INT64_C(1796022000) * 1000000);
	assert_int_equal(aud_time_parse(L("2026-11-30t08:00:00+01:00"), &us), 0);
	assert_true(us == INT64_C(1796022000) * 1000000);
	assert_int_equal(aud_time_parse(L("2026-11-30 06:30:00.5-00:30"), &us), 0);
	assert_true(us == INT64_C(1796022000) * 1000000 + 500000);
	/* digits past microseconds are cut, not rounded */
	assert_int_equal(aud_time_parse(L("2026-11-30T07:00:00.1234569z"), &us), 0);
	assert_true(us == INT64_C(1796022000) * 1000000 + 123456);
	assert_int_equal(aud_time_parse(L("2028-02-29T00:00:00Z"), &us), 0);
	assert_int_equal(aud_time_parse(L("1969-12-31T23:59:59Z"), &us), 0);
	assert_true(us == -1000000);

	assert_int_equal(aud_time_parse(L("2026-11-30T07:00:00"), &us), SG_EINVAL);    /* no zone */
	assert_int_equal(aud_time_parse(L("2027-02-29T00:00:00Z"), &us), SG_EINVAL);   /* not leap */
	assert_int_equal(aud_time_parse(L("2026-13-01T00:00:00Z"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L("2026-11-31T00:00:00Z"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L("2026-11-30T24:00:00Z"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L("2026-11-30T07:00:00.Z"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L("2026-11-30T07:00:00Zx"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L("2026-11-30T07:00:00+1:00"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L("26-11-30T07:00:00Z"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L("2026-11-30T07:00Z"), &us), SG_EINVAL);
	assert_int_equal(aud_time_parse(L(""), &us), SG_EINVAL);
}

static void test_time_arg(void **state)
{
	const int64_t now = INT64_C(1796022000) * 1000000;
	int64_t us;

	(void)state;
	assert_int_equal(aud_time_arg("90s", now, &us), 0);
	assert_true(us == now - INT64_C(90000000));
	assert_int_equal(aud_time_arg("15m", now, &us), 0);
	assert_true(us == now - INT64_C(900) * 1000000);
	assert_int_equal(aud_time_arg("1h", now, &us), 0);
	assert_true(us == now - INT64_C(3600) * 1000000);
	assert_int_equal(aud_time_arg("2d", now, &us), 0);
	assert_true(us == now - INT64_C(172800) * 1000000);
	assert_int_equal(aud_time_arg("2026-11-30", now, &us), 0);
	assert_true(us == INT64_C(1795996800) * 1000000);
	assert_int_equal(aud_time_arg("2026-11-30T07:00:00Z", now, &us), 0);
	assert_true(us == now);

	assert_int_equal(aud_time_arg("h", now, &us), SG_EINVAL);
	assert_int_equal(aud_time_arg("1x", now, &us), SG_EINVAL);
	assert_int_equal(aud_time_arg("-1h", now, &us), SG_EINVAL);
	assert_int_equal(aud_time_arg("1.5h", now, &us), SG_EINVAL);
	assert_int_equal(aud_time_arg("90", now, &us), SG_EINVAL);      /* no unit: ambiguous */
	assert_int_equal(aud_time_arg("999999999d", now, &us), SG_EINVAL);     /* overflow */
	assert_int_equal(aud_time_arg("99999999999999999999s", now, &us), SG_EINVAL);
	assert_int_equal(aud_time_arg("2026-11-3", now, &us), SG_EINVAL);
	assert_int_equal(aud_time_arg("", now, &us), SG_EINVAL);
}

/* ---- glob ------------------------------------------------------------------- */

static int g(const char *pat, const char *s, int icase)
{
	return aud_glob(pat, s, strlen(s), icase);
}

static void test_glob(void **state)
{
	char big[4096];

	(void)state;
	assert_true(g("*", "", 0));
	assert_true(g("", "", 0));
	assert_false(g("", "a", 0));
	assert_true(g("agent-*", "agent-7", 0));
	assert_true(g("agent-*", "agent-*", 0));        /* the record holds the config glob */
	assert_false(g("agent-*", "agents", 0));
	assert_true(g("*.example.com", "a.b.example.com", 0));      /* '*' spans dots */
	assert_false(g("*.example.com", "example.com", 0));
	assert_true(g("api.?xample.com", "api.example.com", 0));
	assert_false(g("?", "", 0));
	assert_true(g("[ab]c", "bc", 0));
	assert_false(g("[ab]c", "cc", 0));
	assert_true(g("[a-c]x", "bx", 0));
	assert_true(g("[!a-c]x", "dx", 0));
	assert_false(g("[^a-c]x", "bx", 0));
	assert_true(g("[]]", "]", 0));                  /* ']' first is a member */
	assert_true(g("[a", "[a", 0));                  /* no ']': a literal '[' */
	assert_true(g("a\\*", "a*", 0));
	assert_false(g("a\\*", "ab", 0));
	assert_true(g("API.Example.*", "api.example.test", 1));
	assert_false(g("API.Example.*", "api.example.test", 0));
	assert_true(g("[A-Z]pi", "api", 1));
	assert_true(g("*a*b*c", "xxaxxbxxc", 0));
	assert_false(g("*a*b*c", "xxaxxbxxcx", 0));
	assert_true(g("a**b", "ab", 0));

	/* many stars against a long non-match: linear backtracking, not exponential */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_false(g("*a*a*a*a*a*a*a*a*a*a*a*a*b", big, 0));
	assert_true(g("*a*a*a*a*a*a*a*a*a*a*a*a", big, 0));
	/* lengths, not NUL: a decoded \u0000 must not end the subject early */
	assert_false(aud_glob("evil.com", "evil.com\0.good", 14, 0));
	assert_true(aud_glob("evil.com*", "evil.com\0.good", 14, 0));
}

/* ---- filters ------------------------------------------------------------------ */

static int parse_rec(const char *line, struct aud_recv *r, char *scratch, size_t sz)
{
	const char *why;

	return aud_recv_parse(line, strlen(line), r, scratch, sz, &why);
}

static void test_filter_opts(void **state)
{
	struct aud_filter f;
	char err[256];
	const int64_t now = INT64_C(1796022000) * 1000000;
	int i;

	(void)state;
	aud_filter_init(&f);
	assert_int_equal(aud_filter_opt(&f, "--sandbox", "agent-*", now, err, sizeof(err)), 0);
	assert_int_equal(aud_filter_opt(&f, "--decision", "would_deny", now, err, sizeof(err)), 0);
	assert_int_equal(aud_filter_opt(&f, "--decision", "maybe", now, err, sizeof(err)), SG_EINVAL);
	assert_non_null(strstr(err, "maybe"));
	assert_int_equal(aud_filter_opt(&f, "--event", "secret_violation", now, err, sizeof(err)), 0);
	assert_int_equal(aud_filter_opt(&f, "--event", "conection", now, err, sizeof(err)), SG_EINVAL);
	assert_int_equal(aud_filter_opt(&f, "--since", "1h", now, err, sizeof(err)), 0);
	assert_true(f.since_us == now - INT64_C(3600000000));
	assert_int_equal(aud_filter_opt(&f, "--until", "2026-11-30T08:00:00+01:00", now, err,
					sizeof(err)), 0);
	assert_true(f.until_us == now);
	assert_int_equal(aud_filter_opt(&f, "--since", "soon", now, err, sizeof(err)), SG_EINVAL);
	assert_int_equal(aud_filter_opt(&f, "--host", "", now, err, sizeof(err)), SG_EINVAL);
	assert_int_equal(aud_filter_opt(&f, "--json", "x", now, err, sizeof(err)), SG_DECLINED);
	for (i = 0; i < AUD_FILTER_MAX; i++)
		assert_int_equal(aud_filter_opt(&f, "--rule", "r", now, err, sizeof(err)), 0);
	assert_int_equal(aud_filter_opt(&f, "--rule", "r", now, err, sizeof(err)), SG_EINVAL);
}

static void test_filter_match(void **state)
{
	static const char a[] =         /* allowed, by name */
		"{\"ts\":\"2026-11-30T07:00:00Z\",\"event\":\"connection\",\"sandbox\":\"agent-*\","
		"\"decision\":\"allow\",\"reason\":\"rule_allow\",\"rule\":\"openai\","
		"\"dst_host\":\"api.openai.com\",\"dst_ip\":\"203.0.113.5\",\"dst_port\":443}";
	static const char b[] =         /* denied, no name: judged by address */
		"{\"ts\":\"2026-11-30T07:30:00Z\",\"event\":\"connection\",\"sandbox\":\"ci\","
		"\"decision\":\"deny\",\"reason\":\"floor_deny\",\"rule\":\"floor/deny/0\","
		"\"dst_host\":null,\"dst_ip\":\"169.254.169.254\",\"dst_port\":80}";
	static const char c[] =         /* a request that used a secret */
		"{\"ts\":\"2026-11-30T08:00:00Z\",\"event\":\"request\",\"sandbox\":null,"
		"\"decision\":\"would_deny\",\"reason\":\"default_deny\",\"rule\":null,"
		"\"dst_host\":\"API.GitHub.com\",\"secrets\":[\"github\"]}";
	struct aud_recv ra, rb, rc;
	char sa[sizeof(a)], sb[sizeof(b)], sc[sizeof(c)], err[256];
	struct aud_filter f;
	const int64_t now = INT64_C(1796022000) * 1000000;

	(void)state;
	assert_int_equal(parse_rec(a, &ra, sa, sizeof(sa)), 0);
	assert_int_equal(parse_rec(b, &rb, sb, sizeof(sb)), 0);
	assert_int_equal(parse_rec(c, &rc, sc, sizeof(sc)), 0);

	aud_filter_init(&f);            /* no filter: everything */
	assert_true(aud_filter_match(&f, &ra) && aud_filter_match(&f, &rb) &&
		    aud_filter_match(&f, &rc));

	aud_filter_init(&f);
	aud_filter_opt(&f, "--host", "*.openai.com", now, err, sizeof(err));
	assert_true(aud_filter_match(&f, &ra));
	assert_false(aud_filter_match(&f, &rb));
	aud_filter_init(&f);            /* no dst_host: the address is matched */
	aud_filter_opt(&f, "--host", "169.254.*", now, err, sizeof(err));
	assert_false(aud_filter_match(&f, &ra));        /* has a name: its IP is not matched */
	assert_true(aud_filter_match(&f, &rb));
	aud_filter_init(&f);            /* host globs ignore case */
	aud_filter_opt(&f, "--host", "api.github.COM", now, err, sizeof(err));
	assert_true(aud_filter_match(&f, &rc));

	aud_filter_init(&f);            /* repeats OR, kinds AND */
	aud_filter_opt(&f, "--decision", "deny", now, err, sizeof(err));
	aud_filter_opt(&f, "--decision", "would_deny", now, err, sizeof(err));
	assert_false(aud_filter_match(&f, &ra));
	assert_true(aud_filter_match(&f, &rb));
	assert_true(aud_filter_match(&f, &rc));
	aud_filter_opt(&f, "--event", "request", now, err, sizeof(err));
	assert_false(aud_filter_match(&f, &rb));
	assert_true(aud_filter_match(&f, &rc));

	aud_filter_init(&f);            /* a null sandbox matches no glob, not even "*" */
	aud_filter_opt(&f, "--sandbox", "*", now, err, sizeof(err));
	assert_true(aud_filter_match(&f, &ra));
	assert_false(aud_filter_match(&f, &rc));
	aud_filter_init(&f);
	aud_filter_opt(&f, "--sandbox", "agent-*", now, err, sizeof(err));
	assert_true(aud_filter_match(&f, &ra));
	assert_false(aud_filter_match(&f, &rb));

	aud_filter_init(&f);
	aud_filter_opt(&f, "--rule", "openai", now, err, sizeof(err));
	assert_true(aud_filter_match(&f, &ra));
	assert_false(aud_filter_match(&f, &rc));        /* rule null */
	aud_filter_init(&f);
	aud_filter_opt(&f, "--secret", "github", now, err, sizeof(err));
	assert_false(aud_filter_match(&f, &ra));
	assert_true(aud_filter_match(&f, &rc));

	aud_filter_init(&f);            /* since inclusive, until exclusive */
	aud_filter_opt(&f, "--since", "2026-11-30T07:30:00Z", now, err, sizeof(err));
	aud_filter_opt(&f, "--until", "2026-11-30T08:00:00Z", now, err, sizeof(err));
	assert_false(aud_filter_match(&f, &ra));
	assert_true(aud_filter_match(&f, &rb));
	assert_false(aud_filter_match(&f, &rc));
	aud_filter_init(&f);            /* relative: 45 minutes before 08:00 */
	aud_filter_opt(&f, "--since", "45m", now + INT64_C(3600000000), err, sizeof(err));
	assert_false(aud_filter_match(&f, &ra));
	assert_true(aud_filter_match(&f, &rb));
}

/* ---- text cleaning, tally ---------------------------------------------------- */

static void test_text_clean(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(aud_text_clean(L("api.example.test"), 60, out, sizeof(out)), 16);
	assert_string_equal(out, "api.example.test");
	/* ESC [ 31 m: a terminal colour change becomes visible, inert text */
	assert_int_equal(aud_text_clean(L("/\x1b[31mred"), 60, out, sizeof(out)), 9);
	assert_string_equal(out, "/\xef\xbf\xbd[31mred");
	/* C1 CSI (U+009B) and a right-to-left override (U+202E) */
	aud_text_clean(L("a\xc2\x9b" "b\xe2\x80\xae" "c"), 60, out, sizeof(out));
	assert_string_equal(out, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c");
	/* NUL and invalid bytes */
	aud_text_clean("a\0b\xff", 4, 60, out, sizeof(out));
	assert_string_equal(out, "a\xef\xbf\xbd" "b\xef\xbf\xbd");
	/* truncation counts code points and ends in an ellipsis */
	assert_int_equal(aud_text_clean(L("abcdef"), 4, out, sizeof(out)), 4);
	assert_string_equal(out, "abc\xe2\x80\xa6");
	assert_int_equal(aud_text_clean(L("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"), 4, out, sizeof(out)), 4);
	assert_string_equal(out, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
	assert_int_equal(aud_text_clean(L("abcd"), 4, out, sizeof(out)), 4);
	assert_string_equal(out, "abcd");
	/* a small output buffer never overflows */
	aud_text_clean(L("abcdefghijklmnop"), 60, out, 8);
	assert_true(strlen(out) < 8);
}

static void test_tally(void **state)
{
	struct aud_tally t;
	size_t *idx = NULL, i;
	char key[16];
	long k;

	(void)state;
	memset(&t, 0, sizeof(t));
	/* enough keys to grow the index several times: indexes stay stable */
	for (i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "h%zu", i);
		k = aud_tally_add(&t, key, strlen(key), i % 7 + 1);
		assert_int_equal(k, (long)i);
	}
	assert_int_equal(aud_tally_add(&t, L("h3"), 10), 3);
	assert_true(t.ents[3].count == 3 % 7 + 1 + 10);
	assert_int_equal(aud_tally_add(&t, "a\0b", 3, 1), 500);  /* NUL inside a key */
	assert_int_equal(aud_tally_add(&t, "a\0c", 3, 1), 501);
	assert_int_equal(aud_tally_note(&t.ents[0], L("default_deny")), 0);
	assert_int_equal(aud_tally_note(&t.ents[0], L("rule_deny")), 0);
	assert_string_equal(t.ents[0].note, "rule_deny");
	assert_int_equal(aud_tally_sorted(&t, &idx), 0);
	assert_int_equal(idx[0], 3);                    /* the biggest count */
	for (i = 1; i < t.len; i++)
		assert_true(t.ents[idx[i - 1]].count >= t.ents[idx[i]].count);
	free(idx);
	aud_tally_free(&t);
	aud_tally_free(NULL);
}

/* ---- line reader --------------------------------------------------------------- */

struct seen {
	int n;
	char lines[8][32];
	size_t len[8];
	int nl[8], toolong[8];
	uint64_t lineno[8];
};

static int collect(void *ctx, const char *line, size_t len, int nl, uint64_t lineno)
{
	struct seen *s = ctx;

	if (s->n >= 8)
		return -1;
	s->toolong[s->n] = line == NULL;
	if (line)
		memcpy(s->lines[s->n], line, SG_MIN(len, sizeof(s->lines[0]) - 1));
	s->len[s->n] = len;
	s->nl[s->n] = nl;
	s->lineno[s->n] = lineno;
	s->n++;
	return 0;
}

static void test_lines_read(void **state)
{
	char path[] = "/tmp/test_aud_query.XXXXXX", err[256];
	struct seen s;
	FILE *fp;
	int fd;
	size_t i;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	fputs("one\n\nthree\n", fp);
	for (i = 0; i < AUD_JSONL_LINE_MAX * 3; i++)    /* spans several read blocks' worth */
		fputc('x', fp);
	fputs("\nfive\nsix", fp);                       /* the last line has no newline */
	fclose(fp);

	memset(&s, 0, sizeof(s));
	assert_int_equal(aud_lines_read(path, collect, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 6);
	assert_string_equal(s.lines[0], "one");
	assert_int_equal(s.len[1], 0);
	assert_string_equal(s.lines[2], "three");
	assert_true(s.toolong[3]);
	assert_true(s.lineno[3] == 4);
	assert_string_equal(s.lines[4], "five");
	assert_true(s.lineno[4] == 5);
	assert_string_equal(s.lines[5], "six");
	assert_int_equal(s.nl[4], 1);
	assert_int_equal(s.nl[5], 0);
	unlink(path);

	assert_int_equal(aud_lines_read("/nonexistent/x.jsonl", collect, &s, err, sizeof(err)),
			 SG_EIO);
	assert_non_null(strstr(err, "/nonexistent/x.jsonl"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_values),
		cmocka_unit_test(test_array_walk),
		cmocka_unit_test(test_iterator_and_keys),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_find_strict),
		cmocka_unit_test(test_decode_limits),
		cmocka_unit_test(test_recv_doc_example),
		cmocka_unit_test(test_recv_rejects),
		cmocka_unit_test(test_recv_secrets),
		cmocka_unit_test(test_time_parse),
		cmocka_unit_test(test_time_arg),
		cmocka_unit_test(test_glob),
		cmocka_unit_test(test_filter_opts),
		cmocka_unit_test(test_filter_match),
		cmocka_unit_test(test_text_clean),
		cmocka_unit_test(test_tally),
		cmocka_unit_test(test_lines_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
