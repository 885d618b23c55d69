/*
 * test_sg_json.c - the JSON record writer (lib/sg_json.c) and the text
 * helpers of lib/sg_str.c other than sg_host_normalize (tested apart).
 *
 * The JSON tests assert the exact bytes of an audit record: what a log
 * reader would parse. The address tests pin the SSRF / DNS-rebinding
 * verdict for each internal range and its public neighbours.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "sg.h"
#include "sg_json.h"
#include "sg_str.h"

/* ---- sg_json ---------------------------------------------------------- */

static void test_json_object(void **state)
{
	char buf[256];
	struct sg_json j;
	int n;

	(void)state;
	sg_json_init(&j, buf, sizeof(buf));
	sg_json_begin(&j);
	sg_json_str(&j, "host", "example.com");
	sg_json_int(&j, "port", 443);
	sg_json_int(&j, "min", INT64_MIN);
	sg_json_int(&j, "max", INT64_MAX);
	sg_json_bool(&j, "tls", 1);
	sg_json_bool(&j, "h2", 0);
	sg_json_null(&j, "rule");
	sg_json_raw(&j, "alpn", "[\"h2\"]", 6);
	n = sg_json_end(&j);
	assert_int_equal(n, (int)strlen(buf));
	assert_string_equal(buf,
		"{\"host\":\"example.com\",\"port\":443,"
		"\"min\":-9223372036854775808,\"max\":9223372036854775807,"
		"\"tls\":true,\"h2\":false,\"rule\":null,\"alpn\":[\"h2\"]}");

	sg_json_init(&j, buf, sizeof(buf));
	sg_json_begin(&j);
	assert_int_equal(sg_json_end(&j), 2);
	assert_string_equal(buf, "{}");
}

static void test_json_null_string(void **state)
{
	char buf[64];
	struct sg_json j;

	(void)state;
	sg_json_init(&j, buf, sizeof(buf));
	sg_json_begin(&j);
	sg_json_str(&j, "sni", NULL);
	sg_json_strn(&j, "alpn", NULL, 5);
	sg_json_str(&j, "e", "");
	assert_true(sg_json_end(&j) > 0);
	assert_string_equal(buf, "{\"sni\":null,\"alpn\":null,\"e\":\"\"}");
}

/* Quote n bytes of v and compare with want (a C string). */
static void expect_quote(const char *v, size_t n, const char *want)
{
	char out[128];
	int rc = sg_json_quote(out, sizeof(out), v, n);

	assert_int_equal(rc, (int)strlen(want));
	assert_string_equal(out, want);
}

static void test_json_escape(void **state)
{
	(void)state;
	expect_quote("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
	expect_quote("/", 1, "\"/\"");
	/* every control byte as \u00XX, DEL too; a NUL inside the length */
	expect_quote("\n\r\t", 3, "\"\\u000a\\u000d\\u0009\"");
	expect_quote("a\0b", 3, "\"a\\u0000b\"");
	expect_quote("\x1f\x7f", 2, "\"\\u001f\\u007f\"");
	/* a log line cannot be forged through a value */
	expect_quote("x\"}\n{\"a\":1", 10,
		     "\"x\\\"}\\u000a{\\\"a\\\":1\"");
}

static void test_json_utf8(void **state)
{
	(void)state;
	/* valid sequences are copied as they are, 2 to 4 bytes */
	expect_quote("caf\xc3\xa9", 5, "\"caf\xc3\xa9\"");
	expect_quote("\xe2\x82\xac", 3, "\"\xe2\x82\xac\"");
	expect_quote("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");
	expect_quote("\xf4\x8f\xbf\xbf", 4, "\"\xf4\x8f\xbf\xbf\"");
	expect_quote("\xef\xbf\xbd", 3, "\"\xef\xbf\xbd\"");

	/* each byte that does not start a valid sequence is one \ufffd */
	expect_quote("\x80", 1, "\"\\ufffd\"");
	expect_quote("a\xff" "b", 3, "\"a\\ufffdb\"");
	expect_quote("\xc3", 1, "\"\\ufffd\"");                 /* truncated */
	expect_quote("\xc3(", 2, "\"\\ufffd(\"");
	expect_quote("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");      /* overlong */
	expect_quote("\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\"");
	expect_quote("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");   /* D800 */
	expect_quote("\xf0\x80\x80\xaf", 4,
		     "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");       /* overlong */
	expect_quote("\xf4\x90\x80\x80", 4,
		     "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");       /* > 10FFFF */
	expect_quote("\xf5\x80", 2, "\"\\ufffd\\ufffd\"");
	/* a valid sequence right after an invalid byte survives */
	expect_quote("\xe2\xc3\xa9", 3, "\"\\ufffd\xc3\xa9\"");
}

/* sg_json_quote() needs room for the quotes and a NUL, no more. */
static void test_json_quote_cap(void **state)
{
	char out[16];

	(void)state;
	assert_int_equal(sg_json_quote(out, 5, "ab", 2), 4);
	assert_string_equal(out, "\"ab\"");
	assert_int_equal(sg_json_quote(out, 4, "ab", 2), -1);
	assert_int_equal(sg_json_quote(out, 9, "\x01", 1), 8);
	assert_int_equal(sg_json_quote(out, 8, "\x01", 1), -1);
	assert_int_equal(sg_json_quote(out, 9, "\x80", 1), 8);
	assert_int_equal(sg_json_quote(out, 8, "\x80", 1), -1);
	assert_int_equal(sg_json_quote(out, 5, "\xc3\xa9", 2), 4);
	assert_int_equal(sg_json_quote(out, 4, "\xc3\xa9", 2), -1);
	assert_int_equal(sg_json_quote(out, 0, "", 0), -1);
}

static int write_record(char *buf, size_t cap)
{
	struct sg_json j;

	sg_json_init(&j, buf, cap);
	sg_json_begin(&j);
	sg_json_str(&j, "k", "v\"");
	sg_json_int(&j, "n", 12);
	return sg_json_end(&j);
}

static void test_json_overflow(void **state)
{
	static const char want[] = "{\"k\":\"v\\\"\",\"n\":12}";
	char buf[64];
	struct sg_json j;
	size_t need = sizeof(want);     /* with the NUL */

	(void)state;
	assert_int_equal(write_record(buf, need), (int)need - 1);
	assert_string_equal(buf, want);
	/* every shorter buffer fails as a whole, never a truncated record */
	for (size_t cap = 0; cap < need; cap++)
		assert_int_equal(write_record(buf, cap), -1);

	/*
	 * The latch: once a value did not fit, later small writes that would
	 * fit are not made either - else this would end as the invalid
	 * record {"long":,"n":1} with a length.
	 */
	sg_json_init(&j, buf, 24);
	sg_json_begin(&j);
	sg_json_str(&j, "long", "0123456789abcdef");
	assert_int_equal(j.overflow, 1);
	assert_int_equal(j.len, strlen("{\"long\":"));
	sg_json_int(&j, "n", 1);
	assert_int_equal(j.len, strlen("{\"long\":"));
	assert_int_equal(sg_json_end(&j), -1);
}

/* ---- sg_addr ---------------------------------------------------------- */

static struct sg_addr addr(const char *s)
{
	struct sg_addr a;

	if (sg_addr_parse(s, strlen(s), &a) != 0)
		fail_msg("sg_addr_parse(%s) failed", s);
	return a;
}

static void expect_addr(const char *s, int family, const char *printed)
{
	struct sg_addr a = addr(s);
	char out[INET6_ADDRSTRLEN];

	assert_int_equal(a.family, family);
	assert_string_equal(sg_addr_str(&a, out, sizeof(out)), printed);
}

static void test_addr_parse(void **state)
{
	static const char nul[] = "1.2.3.4\0.evil.example";
	static const char *const bad[] = {
		"", "[]", "[", "1.2.3", "1.2.3.256", "1.2.3.4 ", " 1.2.3.4",
		"01.2.3.4", "1.2.3.4.5", "example.com", "[::1", "::1]", ":::1",
		"fe80::1%eth0", "::1:443x", "[1.2.3.4",
		"0000:0000:0000:0000:0000:0000:0000:0000:0000",
	};
	struct sg_addr a;
	size_t i;

	(void)state;
	expect_addr("1.2.3.4", AF_INET, "1.2.3.4");
	expect_addr("::1", AF_INET6, "::1");
	expect_addr("[::1]", AF_INET6, "::1");
	expect_addr("2001:DB8::1", AF_INET6, "2001:db8::1");
	/* v4-mapped folds to v4, so one ACL entry covers both spellings */
	expect_addr("::ffff:1.2.3.4", AF_INET, "1.2.3.4");
	expect_addr("[::FFFF:10.0.0.1]", AF_INET, "10.0.0.1");
	expect_addr("::ffff:7f00:1", AF_INET, "127.0.0.1");
	for (i = 0; i < SG_ARRAY_LEN(bad); i++)
		if (sg_addr_parse(bad[i], strlen(bad[i]), &a) != SG_EINVAL)
			fail_msg("sg_addr_parse(\"%s\") accepted", bad[i]);
	/* the length is the string: a NUL inside it is not an end */
	assert_int_equal(sg_addr_parse(nul, sizeof(nul) - 1, &a), SG_EINVAL);
	assert_int_equal(sg_addr_parse("1.2.3.4xyz", 7, &a), 0);
	assert_int_equal(a.family, AF_INET);
}

static void test_addr_eq_sa(void **state)
{
	struct sg_addr a = addr("10.1.2.3"), b = addr("::ffff:10.1.2.3"),
		       c = addr("10.1.2.4"), d = addr("::1"), e = addr("[::1]"),
		       back;
	struct sockaddr_storage ss;
	struct sockaddr_in6 mapped;
	socklen_t sl;

	(void)state;
	assert_true(sg_addr_eq(&a, &b));
	assert_false(sg_addr_eq(&a, &c));
	assert_true(sg_addr_eq(&d, &e));
	assert_false(sg_addr_eq(&a, &d));

	sl = sg_addr_to_sa(&a, 8080, &ss);
	assert_int_equal(sl, sizeof(struct sockaddr_in));
	assert_int_equal(sg_addr_from_sa((struct sockaddr *)&ss, &back), 8080);
	assert_true(sg_addr_eq(&a, &back));
	sl = sg_addr_to_sa(&d, 443, &ss);
	assert_int_equal(sl, sizeof(struct sockaddr_in6));
	assert_int_equal(sg_addr_from_sa((struct sockaddr *)&ss, &back), 443);
	assert_true(sg_addr_eq(&d, &back));

	/* an accept() on a dual-stack socket gives v4-mapped v6: folded */
	memset(&mapped, 0, sizeof(mapped));
	mapped.sin6_family = AF_INET6;
	mapped.sin6_port = htons(1234);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:10.1.2.3",
				   &mapped.sin6_addr), 1);
	assert_int_equal(sg_addr_from_sa((struct sockaddr *)&mapped, &back),
			 1234);
	assert_int_equal(back.family, AF_INET);
	assert_true(sg_addr_eq(&a, &back));

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_UNIX;
	assert_int_equal(sg_addr_from_sa((struct sockaddr *)&ss, &back), -1);
}

static void test_addr_internal(void **state)
{
	static const char *const internal[] = {
		"0.0.0.0", "0.255.255.255", "10.0.0.1", "10.255.255.255",
		"127.0.0.1", "127.255.255.254",
		"100.64.0.0", "100.127.255.255",                /* CGNAT */
		"169.254.0.1", "169.254.169.254",               /* metadata */
		"172.16.0.1", "172.31.255.255",
		"192.168.0.1", "192.168.255.255",
		"192.0.0.8", "198.18.0.1", "198.19.255.255",
		"224.0.0.1", "239.255.255.255", "240.0.0.1", "255.255.255.255",
		"::", "::1", "fe80::1", "febf:ffff::1", "fec0::1",
		"fc00::1", "fd12:3456::1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:169.254.169.254",   /* folded */
		"64:ff9b::10.0.0.1", "64:ff9b::7f00:1",         /* NAT64 */
		"2002:a00:1::1", "2002:c0a8:101::",             /* 6to4 */
		"::2", "::10.0.0.1",                            /* IPv4-compatible */
		"64:ff9b:1::1", "100::1",                       /* local NAT64, discard */
	};
	static const char *const public[] = {
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "9.255.255.255",
		"11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
		"128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255",
		"172.32.0.0", "192.167.255.255", "192.169.0.0", "192.0.1.0",
		"198.17.255.255", "198.20.0.0", "223.255.255.255",
		"2606:4700::1", "2001:4860:4860::8888", "::8.8.8.8",
		"fbff::1",                                      /* below fc00::/7 */
		"fe00::1",                                      /* below fe80::/10 */
		"::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1",
		"64:ff9b:0:0:1::a00:1",                         /* not /96 */
	};
	struct sg_addr a, mapped = { .family = AF_INET6 };
	size_t i;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(internal); i++) {
		a = addr(internal[i]);
		if (!sg_addr_is_internal(&a))
			fail_msg("%s should be internal", internal[i]);
	}
	for (i = 0; i < SG_ARRAY_LEN(public); i++) {
		a = addr(public[i]);
		if (sg_addr_is_internal(&a))
			fail_msg("%s should be public", public[i]);
	}
	a = addr("::ffff:127.0.0.1");
	assert_int_equal(a.family, AF_INET);
	/* built by hand, not folded: the embedded v4 is still judged */
	assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.1",
				   &mapped.u.v6), 1);
	assert_true(sg_addr_is_internal(&mapped));
	assert_int_equal(inet_pton(AF_INET6, "::ffff:8.8.4.4",
				   &mapped.u.v6), 1);
	assert_false(sg_addr_is_internal(&mapped));
}

/* ---- sg_hostport_split ------------------------------------------------ */

static void expect_hostport(const char *s, int defport, const char *host,
			    int port)
{
	char hb[SG_HOST_MAX + 1];
	int p = -7;

	if (sg_hostport_split(s, strlen(s), hb, sizeof(hb), defport, &p) != 0)
		fail_msg("sg_hostport_split(\"%s\") failed", s);
	assert_string_equal(hb, host);
	assert_int_equal(p, port);
}

static void test_hostport(void **state)
{
	static const char *const bad[] = {
		"", "host:", ":443", "host:0", "host:65536", "host:99999",
		"host:123456", "host:-1", "host:+80", "host:8x", "host: 80",
		"::1:443", "::1", "a:b:c", "[::1]x", "[::1]:", "[::1", "[]:443",
		"[]", "[::1]443",
	};
	char hb[SG_HOST_MAX + 1], small[4];
	int p;
	size_t i;

	(void)state;
	expect_hostport("[::1]:443", 80, "::1", 443);
	expect_hostport("[2001:db8::1]", 443, "2001:db8::1", 443);
	expect_hostport("example.com:8080", 443, "example.com", 8080);
	expect_hostport("example.com", 443, "example.com", 443);
	expect_hostport("1.2.3.4:1", 80, "1.2.3.4", 1);
	expect_hostport("h:65535", 80, "h", 65535);
	for (i = 0; i < SG_ARRAY_LEN(bad); i++)
		if (sg_hostport_split(bad[i], strlen(bad[i]), hb, sizeof(hb),
				      443, &p) == 0)
			fail_msg("sg_hostport_split(\"%s\") accepted", bad[i]);
	/* no port and no default: a CONNECT target must name one */
	assert_int_equal(sg_hostport_split("h", 1, hb, sizeof(hb), -1, &p),
			 SG_EINVAL);
	/* the host must fit with its NUL */
	assert_int_equal(sg_hostport_split("abc:1", 5, small, sizeof(small),
					   80, &p), 0);
	assert_int_equal(sg_hostport_split("abcd:1", 6, small, sizeof(small),
					   80, &p), SG_EINVAL);
	/* the length bounds the input, not a NUL */
	assert_int_equal(sg_hostport_split("h:443junk", 5, hb, sizeof(hb),
					   80, &p), 0);
	assert_int_equal(p, 443);
}

/* ---- numbers and durations -------------------------------------------- */

static void expect_ms(const char *s, int64_t want)
{
	int64_t ms = -7;

	if (sg_duration_parse(s, &ms) != 0)
		fail_msg("sg_duration_parse(\"%s\") failed", s);
	assert_int_equal(ms, want);
}

static void test_duration(void **state)
{
	static const char *const bad[] = {
		"", "s", "ms", "10x", "10 s", " 10s", "10s ", "-1s", "-0", "+5s",
		"10S", "5M", "10sec", "1.2.3s", ".", "nan", "NaN", "nanms", "inf",
		"infinity", "1e3", "1e3ms", "0x10", "0x10s", "99999999999h",
		"1e400",
	};
	int64_t ms;
	size_t i;

	(void)state;
	expect_ms("10s", 10000);
	expect_ms("250ms", 250);
	expect_ms("5m", 300000);
	expect_ms("1h", 3600000);
	expect_ms("7", 7000);
	expect_ms("0", 0);
	expect_ms("1.5s", 1500);
	expect_ms("0.25", 250);
	expect_ms(".5s", 500);
	for (i = 0; i < SG_ARRAY_LEN(bad); i++) {
		ms = -7;
		if (sg_duration_parse(bad[i], &ms) != SG_EINVAL)
			fail_msg("sg_duration_parse(\"%s\") accepted: %lld",
				 bad[i], (long long)ms);
		assert_int_equal(ms, -7);
	}
	assert_int_equal(sg_duration_parse(NULL, &ms), SG_EINVAL);
}

static void test_int_parse(void **state)
{
	long long v = -7;

	(void)state;
	assert_int_equal(sg_int_parse("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(sg_int_parse("-5", -10, 10, &v), 0);
	assert_int_equal(v, -5);
	assert_int_equal(sg_int_parse("100", 0, 100, &v), 0);
	assert_int_equal(sg_int_parse("101", 0, 100, &v), SG_EINVAL);
	assert_int_equal(sg_int_parse("-1", 0, 100, &v), SG_EINVAL);
	assert_int_equal(sg_int_parse("", 0, 100, &v), SG_EINVAL);
	assert_int_equal(sg_int_parse(NULL, 0, 100, &v), SG_EINVAL);
	assert_int_equal(sg_int_parse("1x", 0, 100, &v), SG_EINVAL);
	assert_int_equal(sg_int_parse("99999999999999999999", 0, INT64_MAX,
				      &v), SG_EINVAL);
	assert_int_equal(v, 100);
}

static void test_strncaseeq(void **state)
{
	(void)state;
	assert_true(sg_strncaseeq("Content-Length", "content-LENGTH", 14));
	assert_false(sg_strncaseeq("abc", "abd", 3));
	assert_true(sg_strncaseeq("abc", "abd", 2));
	assert_true(sg_strncaseeq("x", "y", 0));
	/* ASCII only: '@' and '`' are not case pairs of anything */
	assert_false(sg_strncaseeq("@", "`", 1));
	assert_false(sg_strncaseeq("[", "{", 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_object),
		cmocka_unit_test(test_json_null_string),
		cmocka_unit_test(test_json_escape),
		cmocka_unit_test(test_json_utf8),
		cmocka_unit_test(test_json_quote_cap),
		cmocka_unit_test(test_json_overflow),
		cmocka_unit_test(test_addr_parse),
		cmocka_unit_test(test_addr_eq_sa),
		cmocka_unit_test(test_addr_internal),
		cmocka_unit_test(test_hostport),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_int_parse),
		cmocka_unit_test(test_strncaseeq),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
