/*
 * test_pol_check.c - `policy check` warnings (pol_check): each kind, at
 * its line and column, and the near misses that must not warn. The config
 * below is numbered by line in the comments; the expected output lists
 * every warning it produces, in order. (GeoIP ones: test_pol_geo.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "pol_test_util.h"

#include "sg.h"
#include "sg_str.h"
#include "policy/pol.h"
#include "sg_poison.h"

struct out {
	char buf[8192];
	size_t len;
	int last_line, sorted;
};

static void collect(void *arg, int line, int col, const char *msg)
{
	struct out *o = arg;

	if (line < o->last_line)
		o->sorted = 0;
	o->last_line = line;
	o->len += (size_t)snprintf(o->buf + o->len, sizeof(o->buf) - o->len, "%d:%d: %s\n",
				   line, col, msg);
}

/* Load text, run the check, compare the warnings with want. */
static void check_warnings(const char *text, const char *want, int count)
{
	struct sg_config *cfg = load_ok(text);
	struct out o = { .sorted = 1 };

	assert_int_equal(pol_check(cfg, collect, &o), count);
	pol_config_free(cfg);
	assert_true(o.sorted);
	assert_string_equal(o.buf, want);
}

static const char warn_yaml[] =
	"version: 1\n"                                                          /* 1 */
	"floor:\n"
	"  deny:\n"
	"    - { name: f-exact, domains: [evil.test] }\n"
	"    - { name: f-internal, domains: [\"**.internal.example.com\", \"*.corp.test\"] }\n"
	"    - { name: f-meta, cidrs: [169.254.0.0/16] }\n"
	"    - { name: f-exact2, domains: [evil.test] }\n"
	"    - { name: f-ssh, domains: [\"**.ssh.test\"], ports: [22] }\n"
	"    - { name: f-geo, domains: [geo.test], cidrs: [192.0.2.0/24] }\n"
	"profiles:\n"                                                           /* 10 */
	"  web:\n"
	"    allow:\n"
	"      - { domains: [blocked.test] }\n"
	"      - { domains: [ok.test, ok.test] }\n"
	"    deny:\n"
	"      - { domains: [blocked.test, \"**.blocked.test\"] }\n"
	"  spare:\n"
	"    allow: [ { domains: [x.test] } ]\n"
	"sandboxes:\n"
	"  \"agent-*\":\n"                                                      /* 20 */
	"    sources: [10.200.0.0/16]\n"
	"    profiles: [web]\n"
	"    allow:\n"
	"      - { domains: [evil.test] }\n"
	"      - { domains: [\"**.example.com\", fine.test] }\n"
	"      - { domains: [\"*.corp.test\"] }\n"
	"      - { domains: [a.internal.example.com, other.test] }\n"
	"      - { cidrs: [169.254.169.254/32], ports: [80] }\n"
	"      - { domains: [pastebin.test], ports: [443, 8443] }\n"
	"      - { domains: [blocked.test, sub.blocked.test] }\n"               /* 30 */
	"      - { regex: '^[a-z]+\\.re\\.test$' }\n"
	"      - { domains: [x.re.test, y.re.test] }\n"
	"      - { cidrs: [10.1.0.0/16, 10.1.0.0/16], ports: [5432, 5432] }\n"
	"      - { cidrs: [10.1.0.0/16], ports: [5432] }\n"
	"      - { domains: [a.ssh.test], ports: [22, 2222] }\n"
	"      - { domains: [geo.test] }\n"
	"      - { regex: ['a\\.b', 'a\\.b'] }\n"
	"    deny:\n"
	"      - { domains: [pastebin.test] }\n"
	"      - { domains: [\"**.pastebin.test\", pastebin.test] }\n"          /* 40 */
	"      - { regex: '^[a-z]+\\.re\\.test$' }\n"
	"      - { domains: [deep.pastebin.test] }\n"
	"      - { cidrs: [10.66.0.0/16] }\n"
	"      - { cidrs: [10.66.1.0/24], ports: [443] }\n"
	"  \"agent-[0-9]\":\n"
	"    sources: [10.200.1.0/24]\n"
	"  \"ci-*\": {}\n"
	"  \"ci-?\":\n"
	"    sources: [10.9.0.0/16]\n"
	"  \"*\": {}\n"                                                         /* 50 */
	"  \"x-?\": {}\n";

static const char warn_want[] =
	/* a floor rule repeating another */
	"7:7: f-exact2 repeats f-exact (line 4) and can never match\n"
	/* a profile's own deny list comes before its allow list */
	"13:9: profiles/web/allow/0 can never match: everything it allows is denied "
	"first, by profiles/web/deny/0 (line 16)\n"
	"14:30: duplicate domain \"ok.test\" in profiles/web/allow/1 (first at line 14)\n"
	"17:3: profile \"spare\" is not used by any sandbox\n"
	"24:9: sandboxes/agent-*/allow/0 can never match: everything it allows is denied "
	"first, by f-exact (line 4)\n"
	/* a wildcard wider than the floor */
	"25:21: **.example.com in sandboxes/agent-*/allow/1 is wider than the floor "
	"allows: f-internal (line 5) denies **.internal.example.com\n"
	"26:9: sandboxes/agent-*/allow/2 can never match: everything it allows is denied "
	"first, by f-internal (line 5)\n"
	/* one pattern of a rule, not the whole rule */
	"27:21: a.internal.example.com in sandboxes/agent-*/allow/3 can never match: the "
	"floor denies all of it (f-internal, line 5)\n"
	/* a prefix inside a denied one */
	"28:9: sandboxes/agent-*/allow/4 can never match: everything it allows is denied "
	"first, by f-meta (line 6)\n"
	/* the sandbox's profiles' deny lists come before its allow list */
	"30:9: sandboxes/agent-*/allow/6 can never match: everything it allows is denied "
	"first, by profiles/web/deny/0 (line 16)\n"
	/* the same regex; exact names a deny regex matches */
	"31:9: sandboxes/agent-*/allow/7 can never match: everything it allows is denied "
	"first, by sandboxes/agent-*/deny/2 (line 41)\n"
	"32:9: sandboxes/agent-*/allow/8 can never match: everything it allows is denied "
	"first, by sandboxes/agent-*/deny/2 (line 41)\n"
	"33:32: duplicate CIDR 10.1.0.0/16 in sandboxes/agent-*/allow/9 (first at line 33)\n"
	"33:60: duplicate port 5432 in sandboxes/agent-*/allow/9 (first at line 33)\n"
	/* the same conditions as sets */
	"34:9: sandboxes/agent-*/allow/10 repeats sandboxes/agent-*/allow/9 (line 33) and "
	"can never match\n"
	"37:27: duplicate regex \"a\\.b\" in sandboxes/agent-*/allow/13 (first at line 37)\n"
	/* a deny list shadows itself */
	"42:9: sandboxes/agent-*/deny/3 can never match: everything it denies is denied "
	"first, by sandboxes/agent-*/deny/1 (line 40)\n"
	"44:9: sandboxes/agent-*/deny/5 can never match: everything it denies is denied "
	"first, by sandboxes/agent-*/deny/4 (line 43)\n"
	/* sandboxes never chosen */
	"45:3: sandbox \"agent-[0-9]\" is never chosen: \"agent-*\" (line 20) comes first "
	"and matches every name it does, and earlier sandboxes' sources cover its sources\n"
	"51:3: sandbox \"x-?\" is never chosen: \"*\" (line 50) comes first and matches "
	"every name it does\n";

static void test_warnings(void **state)
{
	SG_UNUSED(state);
	check_warnings(warn_yaml, warn_want, 20);
}

/* Several earlier rules together cover a rule: each is named. */
static void test_cover_by_several(void **state)
{
	SG_UNUSED(state);
	check_warnings("version: 1\n"
		       "floor:\n"
		       "  deny:\n"
		       /* without ports a name rule means 443: list 80 too */
		       "    - { domains: [a.test], ports: [80, 443] }\n"
		       "    - { cidrs: [\"2001:db8::/32\"], ports: [\"1-1024\"] }\n"
		       "sandboxes:\n"
		       "  s:\n"
		       "    deny:\n"
		       "      - { domains: [\"*.b.test\"], ports: [443, 80] }\n"
		       "      - { cidrs: [10.0.0.0/8], ports: [\"1-100\", \"101-200\"] }\n"
		       "    allow:\n"
		       "      - { domains: [a.test, x.b.test], ports: [80, 443] }\n"
		       "      - { domains: [a.test, x.b.test], ports: [80, 443, 8080] }\n"
		       "      - { cidrs: [\"2001:db8:1::/48\", 10.1.0.0/16], ports: [\"50-150\"] }\n"
		       "      - { cidrs: [10.1.0.0/16], ports: [\"50-250\"] }\n",
		       "12:9: sandboxes/s/allow/0 can never match: everything it allows is "
		       "denied first, by floor/deny/0 (line 4) and sandboxes/s/deny/0 (line 9)\n"
		       "14:9: sandboxes/s/allow/2 can never match: everything it allows is "
		       "denied first, by floor/deny/1 (line 5) and sandboxes/s/deny/1 (line 10)\n",
		       2);
}

/* What must not warn. */
static void test_clean(void **state)
{
	SG_UNUSED(state);
	check_warnings("version: 1\n"
		       "floor:\n"
		       "  deny:\n"
		       "    - { cidrs: [169.254.0.0/16] }\n"
		       "    - { domains: [\"**.internal.example.com\"], cidrs: [10.0.0.0/8] }\n"
		       "    - { domains: [\"**.ssh.example.com\"], ports: [22] }\n"
		       "profiles:\n"
		       "  registries:\n"
		       "    allow:\n"
		       "      - { domains: [pypi.org, files.pythonhosted.org] }\n"
		       "sandboxes:\n"
		       "  \"agent-[0-9]\":\n"
		       "    sources: [10.200.1.0/24]\n"
		       "  \"agent-*\":\n"
		       "    sources: [10.200.0.0/16]\n"
		       "    profiles: [registries]\n"
		       "    allow:\n"
		       /* the floor's name rule has cidrs: conditional, not narrowing */
		       "      - { domains: [\"**.example.com\"] }\n"
		       /* port 443 only: the floor's ssh rule is on 22 */
		       "      - { domains: [\"**.ssh.example.com\"] }\n"
		       /* partly on another port than the deny */
		       "      - { domains: [paste.test], ports: [443, 8443] }\n"
		       /* a different regex: undecidable, so no claim */
		       "      - { regex: '^a+\\.re\\.test$' }\n"
		       /* a wildcard is not covered by an exact deny */
		       "      - { domains: [\"*.x.test\"] }\n"
		       /* a prefix wider than the denied one */
		       "      - { cidrs: [10.66.0.0/15] }\n"
		       "    deny:\n"
		       "      - { domains: [paste.test, a.x.test] }\n"
		       "      - { regex: '^b+\\.re\\.test$' }\n"
		       "      - { cidrs: [10.66.0.0/16] }\n"
		       "  \"ci-?\":\n"
		       "    sources: [10.9.0.0/16]\n"
		       "  \"ci-*\": {}\n"
		       "  \"ab*\": {}\n"
		       "  \"a*c\": {}\n"
		       "default: deny\n",
		       "", 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warnings),
		cmocka_unit_test(test_cover_by_several),
		cmocka_unit_test(test_clean),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
