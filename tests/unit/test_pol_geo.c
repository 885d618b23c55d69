/*
 * test_pol_geo.c - GeoIP rules (countries:, asns:) with a database built
 * for the test by tests/lib/mkmmdb.pl (Debian's libmaxmind-db-writer-perl;
 * no database ships in Debian). Without the Perl module the whole binary
 * is skipped (exit 77) with the reason on its last line.
 *
 * The test data (mkmmdb.pl): 198.18.0.0/24 ZZ AS64500; 198.18.1.0/24 XY;
 * 198.18.2.0/24 AS64501; 198.51.100.0/24 XY AS64501; 192.0.2.0/24 AS64502;
 * 203.0.113.0/24 registered ZZ AS64502; 2001:db8:1::/48 ZZ AS64500;
 * 127.0.0.0/8 XL AS64510 and 127.0.0.2 XQ AS64511 (for policy_gateway.sh).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol.h"
#include "sg_poison.h"

static char tmpdir[64];
static char cfgpath[128];

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static struct sg_config *load_ok(const char *text)
{
	struct sg_config *cfg = NULL;
	char err[512];

	write_file(cfgpath, text, strlen(text));
	if (pol_config_load(cfgpath, &cfg, err, sizeof(err)))
		fail_msg("unexpected load error: %s", err);
	return cfg;
}

/* want: what follows "PATH:" */
static void load_err(const char *text, const char *want)
{
	struct sg_config *cfg = NULL;
	char err[512], full[768];

	write_file(cfgpath, text, strlen(text));
	if (pol_config_load(cfgpath, &cfg, err, sizeof(err)) == 0) {
		pol_config_free(cfg);
		fail_msg("loaded, expected %s", want);
	}
	assert_null(cfg);
	snprintf(full, sizeof(full), "%s:%s", cfgpath, want);
	assert_string_equal(err, full);
}

/* "geoip: {...}" naming the test databases, then the rest */
static char *with_geo(const char *rest)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "version: 1\ngeoip: { country: %s/country.mmdb, "
		 "asn: %s/asn.mmdb }\n%s", tmpdir, tmpdir, rest);
	return buf;
}

static struct sg_addr addr(const char *s)
{
	struct sg_addr a;

	assert_int_equal(sg_addr_parse(s, strlen(s), &a), 0);
	return a;
}

static void check(int line, const struct sg_config *cfg, const char *sbx, const char *name,
		  const char *ip, uint16_t port, enum pol_decision d, const char *reason,
		  const char *rule)
{
	struct pol_query q = { .name = name, .port = port };
	struct pol_verdict v;
	struct sg_addr a;

	if (sbx)
		q.sbx = pol_sandbox_by_name(cfg, sbx);
	if (ip) {
		a = addr(ip);
		q.addr = &a;
	}
	pol_eval(cfg, &q, &v);
	if (v.decision != d || strcmp(v.reason, reason) || (!rule) != (!v.rule_id) ||
	    (rule && strcmp(rule, v.rule_id)))
		fail_msg("line %d: %s %s %s:%u: got %d %s %s, want %d %s %s", line,
			 sbx ? sbx : "-", name ? name : "-", ip ? ip : "-", port,
			 v.decision, v.reason, v.rule_id ? v.rule_id : "-", d, reason,
			 rule ? rule : "-");
}

#define CHECK(cfg, sbx, name, ip, port, d, reason, rule) \
	check(__LINE__, cfg, sbx, name, ip, port, d, reason, rule)

static const char geo_rules[] =
	"floor:\n"
	"  deny:\n"
	"    - { name: no-zz, countries: [ZZ] }\n"
	"sandboxes:\n"
	"  s:\n"
	"    allow:\n"
	"      - { name: web-xy, domains: [web.test], countries: [XY] }\n"
	"      - { name: xy, countries: [xy] }\n"
	"      - { name: as64502, asns: [\"AS64502\", 65000] }\n"
	"      - { name: both, countries: [XY], asns: [64501], ports: [8443] }\n"
	"    deny:\n"
	"      - { name: as64501, asns: [64501], ports: [22] }\n"
	"  a:\n"
	"    mode: audit\n"
	"    deny:\n"
	"      - { name: audit-xy, countries: [XY] }\n";

static void test_geo_allow_deny(void **state)
{
	struct sg_config *cfg;
	struct pol_geo_info gi;
	struct sg_addr a;

	SG_UNUSED(state);
	cfg = load_ok(with_geo(geo_rules));
	/* lookups as the databases have them */
	a = addr("198.51.100.7");
	pol_geo_lookup(cfg, &a, &gi);
	assert_string_equal(gi.country, "XY");
	assert_int_equal(gi.asn, 64501);
	a = addr("203.0.113.9");        /* registered_country only */
	pol_geo_lookup(cfg, &a, &gi);
	assert_string_equal(gi.country, "ZZ");
	assert_int_equal(gi.asn, 64502);
	a = addr("93.184.216.34");      /* not in the databases */
	pol_geo_lookup(cfg, &a, &gi);
	assert_string_equal(gi.country, "");
	assert_int_equal(gi.asn, 0);

	/* the floor denies a country in every sandbox, on every port */
	CHECK(cfg, "s", NULL, "198.18.0.5", 443, POL_DENY, "floor_deny", "no-zz");
	CHECK(cfg, "s", NULL, "198.18.0.5", 22, POL_DENY, "floor_deny", "no-zz");
	CHECK(cfg, "s", "web.test", "2001:db8:1::7", 443, POL_DENY, "floor_deny", "no-zz");
	CHECK(cfg, NULL, NULL, "203.0.113.9", 443, POL_DENY, "floor_deny", "no-zz");
	/* allow by country, any port (an address rule) */
	CHECK(cfg, "s", NULL, "198.51.100.7", 443, POL_ALLOW, "rule_allow", "xy");
	CHECK(cfg, "s", NULL, "198.51.100.7", 5432, POL_ALLOW, "rule_allow", "xy");
	/* deny by AS number on its port, before the allows */
	CHECK(cfg, "s", NULL, "198.51.100.7", 22, POL_DENY, "rule_deny", "as64501");
	CHECK(cfg, "s", NULL, "198.18.2.9", 22, POL_DENY, "rule_deny", "as64501");
	/* allow by AS number ("AS64502" and 65000 forms) */
	CHECK(cfg, "s", NULL, "192.0.2.5", 8080, POL_ALLOW, "rule_allow", "as64502");
	/* no country, wrong AS: the default */
	CHECK(cfg, "s", NULL, "198.18.2.9", 443, POL_DENY, "default_deny", NULL);
	CHECK(cfg, "s", NULL, "93.184.216.34", 443, POL_DENY, "default_deny", NULL);
	/* a name with a country: both must hold */
	CHECK(cfg, "s", "web.test", "198.51.100.7", 443, POL_ALLOW, "rule_allow", "web-xy");
	CHECK(cfg, "s", "other.test", "198.51.100.7", 443, POL_ALLOW, "rule_allow", "xy");
	/* countries and asns in one rule: both */
	CHECK(cfg, "s", NULL, "198.51.100.7", 8443, POL_ALLOW, "rule_allow", "xy");
	/* without an address, a geo rule is undecided */
	CHECK(cfg, "s", "web.test", NULL, 443, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, "s", NULL, NULL, 443, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, NULL, "web.test", NULL, 443, POL_DENY, "unknown_source", NULL);
	/* a country does not unlock an internal address for a name:
	 * 198.18.1.0/24 is XY but inside 198.18.0.0/15 (benchmarking) */
	CHECK(cfg, "s", "web.test", "198.18.1.5", 443, POL_DENY, "internal_address", "web-xy");
	CHECK(cfg, "s", NULL, "198.18.1.5", 443, POL_ALLOW, "rule_allow", "xy");
	/* an unfolded v4-mapped address is the IPv4 one */
	{
		struct pol_query q = { .sbx = pol_sandbox_by_name(cfg, "s"), .port = 443 };
		struct pol_verdict v;

		memset(&a, 0, sizeof(a));
		a.family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, "::ffff:198.51.100.7", &a.u.v6), 1);
		q.addr = &a;
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_ALLOW);
		assert_string_equal(v.rule_id, "xy");
	}
	/* audit mode: a country deny becomes would_deny; the floor holds */
	{
		struct pol_query q = { .sbx = pol_sandbox_by_name(cfg, "a"), .port = 443 };
		struct pol_verdict v;

		a = addr("198.51.100.7");
		q.addr = &a;
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_ALLOW);
		assert_true(v.would_deny);
		assert_string_equal(v.rule_id, "audit-xy");
		a = addr("198.18.0.1");
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_DENY);
		assert_string_equal(v.reason, "floor_deny");
	}
	pol_config_free(cfg);
}

static void test_geo_errors(void **state)
{
	char yaml[1024], want[1024], path[256], bad[256];
	static const char junk[] = "this is not a maxmind database\n";
	FILE *f, *g;
	char buf[8192];
	size_t n;

	SG_UNUSED(state);
	/* missing */
	snprintf(yaml, sizeof(yaml), "version: 1\ngeoip:\n  country: %s/nope.mmdb\n", tmpdir);
	snprintf(want, sizeof(want), "3:12: geoip.country: cannot open %s/nope.mmdb: %s",
		 tmpdir, strerror(ENOENT));
	load_err(yaml, want);
	/* not a database at all */
	snprintf(bad, sizeof(bad), "%s/junk.mmdb", tmpdir);
	write_file(bad, junk, sizeof(junk) - 1);
	snprintf(yaml, sizeof(yaml), "version: 1\ngeoip:\n  asn: %s\n", bad);
	snprintf(want, sizeof(want), "3:8: geoip.asn: %s is not a readable MaxMind DB "
		 "file: The MaxMind DB file contains invalid metadata", bad);
	load_err(yaml, want);
	/* a real one cut short: the metadata at its end is gone */
	snprintf(path, sizeof(path), "%s/country.mmdb", tmpdir);
	snprintf(bad, sizeof(bad), "%s/cut.mmdb", tmpdir);
	f = fopen(path, "rb");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	g = fopen(bad, "wb");
	assert_non_null(g);
	assert_int_equal(fwrite(buf, 1, n / 2, g), n / 2);
	fclose(g);
	snprintf(yaml, sizeof(yaml), "version: 1\ngeoip: {country: %s}\n", bad);
	snprintf(want, sizeof(want), "2:18: geoip.country: %s is not a readable MaxMind DB "
		 "file: The MaxMind DB file contains invalid metadata", bad);
	load_err(yaml, want);
	/* the two swapped: an ASN file is no country database */
	snprintf(yaml, sizeof(yaml), "version: 1\ngeoip: {country: %s/asn.mmdb}\n", tmpdir);
	snprintf(want, sizeof(want), "2:18: geoip.country: %s/asn.mmdb: database type "
		 "\"sandgate-test-ASN\" is not a country (or city) database", tmpdir);
	load_err(yaml, want);
	snprintf(yaml, sizeof(yaml), "version: 1\ngeoip: {asn: %s/country.mmdb}\n", tmpdir);
	snprintf(want, sizeof(want), "2:14: geoip.asn: %s/country.mmdb: database type "
		 "\"sandgate-test-Country\" is not an ASN (or ISP) database", tmpdir);
	load_err(yaml, want);
	/* country codes and AS numbers are validated */
	load_err(with_geo("floor:\n  deny:\n    - countries: [KP, UK]\n"),
		 "5:23: countries in floor/deny/0: \"UK\" is not an ISO 3166-1 code (the "
		 "United Kingdom is GB)");
	load_err(with_geo("floor:\n  deny:\n    - countries: [AB]\n"),
		 "5:19: countries in floor/deny/0: \"AB\" is not an ISO 3166-1 alpha-2 "
		 "country code (e.g. KP, IR)");
	load_err(with_geo("floor:\n  deny:\n    - countries: [KPR]\n"),
		 "5:19: countries in floor/deny/0: \"KPR\" is not an ISO 3166-1 alpha-2 "
		 "country code (e.g. KP, IR)");
	load_err(with_geo("floor:\n  deny:\n    - countries: []\n"),
		 "5:18: countries in floor/deny/0: the list is empty");
	load_err(with_geo("floor:\n  deny:\n    - asns: [AS]\n"),
		 "5:14: asns in floor/deny/0: expected an AS number like 64512 or "
		 "\"AS64512\", got \"AS\"");
	load_err(with_geo("floor:\n  deny:\n    - asns: [0]\n"),
		 "5:14: asns in floor/deny/0: expected an AS number like 64512 or "
		 "\"AS64512\", got \"0\"");
	load_err(with_geo("floor:\n  deny:\n    - asns: [4294967295]\n"),
		 "5:14: asns in floor/deny/0: expected an AS number like 64512 or "
		 "\"AS64512\", got \"4294967295\"");
	load_err(with_geo("floor:\n  deny:\n    - asns: [\"-5\"]\n"),
		 "5:14: asns in floor/deny/0: expected an AS number like 64512 or "
		 "\"AS64512\", got \"-5\"");
	/* only the database a rule needs must be there */
	snprintf(yaml, sizeof(yaml), "version: 1\ngeoip: {country: %s/country.mmdb}\n"
		 "floor: {deny: [{asns: [1]}]}\n", tmpdir);
	load_err(yaml, "3:23: asns in floor/deny/0: needs an ASN database (geoip.asn)");
	snprintf(yaml, sizeof(yaml), "version: 1\ngeoip: {asn: %s/asn.mmdb}\n"
		 "floor: {deny: [{asns: [1]}]}\n", tmpdir);
	pol_config_free(load_ok(yaml));
}

static void warn_collect(void *arg, int line, int col, const char *msg)
{
	char *out = arg;
	size_t len = strlen(out);

	snprintf(out + len, 4096 - len, "%d:%d: %s\n", line, col, msg);
}

/* policy check: duplicates and cover with geo conditions */
static void test_geo_check(void **state)
{
	struct sg_config *cfg;
	char out[4096] = "";

	SG_UNUSED(state);
	cfg = load_ok(with_geo("floor:\n"
			       "  deny:\n"
			       "    - { countries: [KP, IR] }\n"
			       "sandboxes:\n"
			       "  s:\n"
			       "    allow:\n"
			       "      - { countries: [IR] }\n"
			       "      - { countries: [KP, FR], asns: [64500, AS64500] }\n"
			       "      - { cidrs: [10.0.0.0/8], countries: [ir] }\n"));
	assert_int_equal(pol_check(cfg, warn_collect, out), 3);
	assert_string_equal(out,
		"9:9: sandboxes/s/allow/0 can never match: everything it allows is "
		"denied first, by floor/deny/0 (line 5)\n"
		"10:46: duplicate AS64500 in sandboxes/s/allow/1 (first at line 10)\n"
		"11:9: sandboxes/s/allow/2 can never match: everything it allows is "
		"denied first, by floor/deny/0 (line 5)\n");
	pol_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geo_allow_deny),
		cmocka_unit_test(test_geo_errors),
		cmocka_unit_test(test_geo_check),
	};
	char cmd[512], script[256];
	const char *top = getenv("SG_TOP");
	int rc, st;

	/* tests/run starts us from the top of the tree; SG_TOP overrides */
	snprintf(script, sizeof(script), "%s/tests/lib/mkmmdb.pl", top ? top : ".");
	if (access(script, R_OK)) {
		printf("cannot find %s (run from the top of the tree or set SG_TOP)\n", script);
		return 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_pol_geo.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	snprintf(cfgpath, sizeof(cfgpath), "%s/sandgate.yaml", tmpdir);
	snprintf(cmd, sizeof(cmd), "perl %s %s", script, tmpdir);
	st = system(cmd);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			return 1;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			return 77;      /* mkmmdb.pl printed why */
		printf("tests/lib/mkmmdb.pl failed\n");
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		return 1;
	return rc;
}
