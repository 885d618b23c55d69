/* Unit tests for lib/sg_jsonp.c: the control API's request-body parser. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sg.h"
#include "sg_jsonp.h"

static int parse(const char *s, struct sg_jsonp_tok *t, size_t n)
{
	size_t off;

	return sg_jsonp_parse(s, strlen(s), t, n, &off);
}

static void test_valid(void **state)
{
	static const char *const ok[] = {
		"{}", "[]", "0", "-0", "1.5e10", "-2E-3", "\"\"", "true", "false", "null",
		" { \"a\" : [1, 2, {\"b\": null}] , \"c\": \"\\u00e9\\n\" } ",
		"\"caf\xc3\xa9\"", "\"\\ud83d\\ude00\"", "[[[[[]]]]]",
	};
	struct sg_jsonp_tok t[32];
	size_t i;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(ok); i++)
		assert_true(parse(ok[i], t, 32) > 0);
}

static void test_invalid(void **state)
{
	static const char *const bad[] = {
		"", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "1.",
		".5", "+1", "1e", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12g4\"",
		"\"a\x01\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "[1] [2]", "{\"a\":1}}",
		"'a'", "NaN", "[1 2]",
	};
	struct sg_jsonp_tok t[32];
	size_t i;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(bad); i++) {
		int rc = parse(bad[i], t, 32);

		if (rc != SG_ERROR)
			fail_msg("accepted: %s", bad[i]);
	}
}

static void nest(char *out, int levels)
{
	int i;

	for (i = 0; i < levels; i++) {
		out[i] = '[';
		out[2 * levels - 1 - i] = ']';
	}
	out[2 * levels] = '\0';
}

static void test_depth_and_tokens(void **state)
{
	char deep[2 * (SG_JSONP_DEPTH + 1) + 1];
	struct sg_jsonp_tok t[64];

	(void)state;
	nest(deep, SG_JSONP_DEPTH + 1);
	assert_int_equal(parse(deep, t, 64), SG_ERROR);
	nest(deep, SG_JSONP_DEPTH);
	assert_int_equal(parse(deep, t, 64), SG_JSONP_DEPTH);
	assert_int_equal(parse("[1,2,3,4]", t, 3), SG_ENOMEM);
}

static void test_structure(void **state)
{
	const char *s = "{\"name\":\"agent-1\",\"addresses\":[\"10.0.0.2\",\"fd00::2\"],\"labels\":{\"team\":\"x\"}}";
	struct sg_jsonp_tok t[16];
	char buf[64];
	int n = parse(s, t, 16);

	(void)state;
	assert_int_equal(n, 11);
	assert_int_equal(t[0].type, SG_JSON_OBJECT);
	assert_int_equal(t[0].size, 3);
	assert_int_equal(t[0].next, 11);
	assert_true(sg_jsonp_eq(s, &t[1], "name"));
	assert_int_equal(sg_jsonp_str(s, &t[2], buf, sizeof(buf)), 7);
	assert_string_equal(buf, "agent-1");
	assert_true(sg_jsonp_eq(s, &t[3], "addresses"));
	assert_int_equal(t[4].type, SG_JSON_ARRAY);
	assert_int_equal(t[4].size, 2);
	assert_int_equal(t[4].next, 7);
	assert_true(sg_jsonp_eq(s, &t[7], "labels"));
	assert_int_equal(t[8].next, 11);
}

static void test_decode(void **state)
{
	const char *s = "[\"a\\\"b\\\\c\\/\\t\\u00e9\\ud83d\\ude00\\ud800x\", \"\\u0000\", \"toolong\"]";
	struct sg_jsonp_tok t[8];
	char buf[64];

	(void)state;
	assert_int_equal(parse(s, t, 8), 4);
	assert_true(sg_jsonp_str(s, &t[1], buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "a\"b\\c/\t\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbdx");
	assert_int_equal(sg_jsonp_str(s, &t[2], buf, sizeof(buf)), SG_ERROR);
	assert_int_equal(sg_jsonp_str(s, &t[3], buf, 4), SG_ENOMEM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_depth_and_tokens),
		cmocka_unit_test(test_structure),
		cmocka_unit_test(test_decode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
