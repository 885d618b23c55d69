/*
 * test_dns_pol.c - the port-independent policy questions of the DNS
 * responder (policy/pol_dns.c): could a name, or one of its addresses, be
 * allowed on SOME port? Configs are loaded from files, as the daemon does.
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

static struct sg_addr addr(const char *s)
{
	struct sg_addr a;

	assert_int_equal(sg_addr_parse(s, strlen(s), &a), 0);
	return a;
}

/* pol_eval_name with a prebuilt port set and without (must agree). */
static int name_ok(const struct sg_config *cfg, const char *sbx, const char *name,
		   struct pol_verdict *v, uint16_t *port)
{
	const struct pol_sandbox *s = sbx ? pol_sandbox_by_name(cfg, sbx) : NULL;
	struct pol_ports *ps = pol_ports_new(cfg, s);
	struct pol_verdict v2;
	uint16_t p1 = 0, p2 = 0;
	int r1, r2;

	assert_non_null(ps);
	r1 = pol_eval_name(cfg, s, ps, name, v, &p1);
	r2 = pol_eval_name(cfg, s, NULL, name, &v2, &p2);
	assert_int_equal(r1, r2);
	assert_int_equal(p1, p2);
	assert_string_equal(v->reason, v2.reason);
	pol_ports_free(ps);
	if (port)
		*port = p1;
	return r1;
}

static int addr_ok(const struct sg_config *cfg, const char *sbx, const char *name,
		   const char *ip, int is_static, struct pol_verdict *v)
{
	const struct pol_sandbox *s = sbx ? pol_sandbox_by_name(cfg, sbx) : NULL;
	struct sg_addr a = addr(ip);

	return pol_eval_name_addr(cfg, s, NULL, name, &a, is_static, 443, v);
}

static const char *const base =
	"version: 1\n"
	"floor:\n"
	"  deny:\n"
	"    - { name: f-paste, domains: [\"**.paste.test\"], ports: [\"1-65535\"] }\n"
	"    - { name: f-meta, cidrs: [169.254.0.0/16] }\n"
	"sandboxes:\n"
	"  sb:\n"
	"    sources: [10.0.0.0/8]\n"
	"    allow:\n"
	"      - { name: web, domains: [web.test] }\n"
	"      - { name: alt, domains: [alt.test], ports: [8080] }\n"
	"      - { name: ranged, domains: [\"*.range.test\"], ports: [\"8000-8100\"] }\n"
	"      - { name: both, domains: [both.test], ports: [80, 443] }\n"
	"      - { name: db, domains: [db.corp.test], cidrs: [10.20.0.0/16], ports: [5432] }\n"
	"      - { name: lan, cidrs: [10.30.0.0/16], ports: [22] }\n"
	"      - { name: re, regex: '^[a-z]+\\.re\\.test$', ports: [443] }\n"
	"      - { name: wild, domains: [\"**.wild.test\"] }\n"
	"    deny:\n"
	"      - { name: no-www, domains: [www.web.test, www.alt.test] }\n"
	"      - { name: no-443, domains: [both.test], ports: [443] }\n"
	"      - { name: no-8050, domains: [x.range.test], ports: [8050] }\n"
	"      - { name: all-ports, domains: [y.range.test], ports: [\"1-65535\"] }\n"
	"  aud:\n"
	"    sources: [10.99.0.0/16]\n"
	"    mode: audit\n"
	"default: deny\n";

static void test_names(void **state)
{
	struct sg_config *cfg = load_ok(base);
	struct pol_verdict v;
	uint16_t port;

	SG_UNUSED(state);
	/* a domain rule without ports: 443. The floor has a CIDR rule, so
	 * the name alone is "allowed unless the address is denied". */
	assert_true(name_ok(cfg, "sb", "web.test", &v, &port));
	assert_int_equal(port, 443);
	assert_int_equal(v.decision, POL_NEED_ADDR);
	assert_true(v.name_allowed);
	/* only on 8080 */
	assert_true(name_ok(cfg, "sb", "alt.test", &v, &port));
	assert_int_equal(port, 8080);
	/* 443 denied, 80 allowed: still a name the sandbox may reach */
	assert_true(name_ok(cfg, "sb", "both.test", &v, &port));
	assert_int_equal(port, 80);
	/* a deny on one port of a range leaves the rest */
	assert_true(name_ok(cfg, "sb", "x.range.test", &v, &port));
	assert_true(port >= 8000 && port <= 8100 && port != 8050);
	/* a deny on every port */
	assert_false(name_ok(cfg, "sb", "y.range.test", &v, NULL));
	assert_string_equal(v.reason, "rule_deny");
	assert_string_equal(v.rule_id, "all-ports");
	assert_false(name_ok(cfg, "sb", "www.web.test", &v, NULL));
	assert_string_equal(v.reason, "rule_deny");
	assert_string_equal(v.rule_id, "no-www");
	/* the floor */
	assert_false(name_ok(cfg, "sb", "a.paste.test", &v, NULL));
	assert_string_equal(v.reason, "floor_deny");
	assert_string_equal(v.rule_id, "f-paste");
	/* regex and wildcard */
	assert_true(name_ok(cfg, "sb", "abc.re.test", &v, NULL));
	assert_false(name_ok(cfg, "sb", "a1.re.test", &v, NULL));
	assert_true(name_ok(cfg, "sb", "a.b.c.wild.test", &v, NULL));
	assert_false(name_ok(cfg, "sb", "wild.test", &v, NULL));
	pol_config_free(cfg);
}

/*
 * The exfiltration guard: an address-only rule (lan: cidrs) makes every
 * name "possibly allowed" to pol_eval; here it must not, or any name would
 * be resolved upstream. A rule naming the name with an address condition
 * (db) does make it worth resolving.
 */
static void test_address_rules(void **state)
{
	struct sg_config *cfg = load_ok(base);
	struct pol_verdict v;
	uint16_t port;

	SG_UNUSED(state);
	assert_false(name_ok(cfg, "sb", "random-label-1234.example", &v, NULL));
	assert_int_equal(v.decision, POL_DENY);
	assert_string_equal(v.reason, "default_deny");
	assert_null(v.rule_id);
	assert_true(name_ok(cfg, "sb", "db.corp.test", &v, &port));
	assert_int_equal(v.decision, POL_NEED_ADDR);
	assert_int_equal(port, 5432);
	assert_string_equal(v.rule_id, "db");
	pol_config_free(cfg);
}

static void test_modes_and_sources(void **state)
{
	struct sg_config *cfg = load_ok(base);
	struct sg_config *open = load_ok("version: 1\nsandboxes:\n  s: { sources: [10.0.0.0/8] }\n"
				      "default: allow\n");
	struct pol_verdict v;

	SG_UNUSED(state);
	/* audit mode: resolved (the address decides: would_deny then) */
	assert_true(name_ok(cfg, "aud", "anything.test", &v, NULL));
	assert_int_equal(v.decision, POL_NEED_ADDR);
	assert_true(addr_ok(cfg, "aud", "anything.test", "203.0.113.1", 0, &v));
	assert_true(v.would_deny);
	assert_false(addr_ok(cfg, "aud", "anything.test", "10.1.1.1", 0, &v));
	assert_string_equal(v.reason, "internal_address");
	/* ... but never past the floor */
	assert_false(name_ok(cfg, "aud", "x.paste.test", &v, NULL));
	assert_string_equal(v.reason, "floor_deny");
	/* unknown source */
	assert_false(name_ok(cfg, NULL, "web.test", &v, NULL));
	assert_string_equal(v.reason, "unknown_source");
	/* default allow, no floor: allowed by the name alone */
	assert_true(name_ok(open, "s", "anything.test", &v, NULL));
	assert_int_equal(v.decision, POL_ALLOW);
	assert_string_equal(v.reason, "default_allow");
	pol_config_free(cfg);
	pol_config_free(open);
}

static void test_addresses(void **state)
{
	struct sg_config *cfg = load_ok(base);
	struct pol_verdict v;

	SG_UNUSED(state);
	/* public: kept */
	assert_true(addr_ok(cfg, "sb", "web.test", "203.0.113.9", 0, &v));
	assert_string_equal(v.rule_id, "web");
	/* internal, domain rule only: rebinding */
	assert_false(addr_ok(cfg, "sb", "web.test", "127.0.0.1", 0, &v));
	assert_string_equal(v.reason, "internal_address");
	assert_false(addr_ok(cfg, "sb", "web.test", "::ffff:10.1.2.3", 0, &v));
	/* ... unless it is the operator's static answer */
	assert_true(addr_ok(cfg, "sb", "web.test", "127.0.0.1", 1, &v));
	/* a cidrs rule unlocks an internal address, on its own port */
	assert_true(addr_ok(cfg, "sb", "db.corp.test", "10.20.1.2", 0, &v));
	assert_string_equal(v.rule_id, "db");
	assert_false(addr_ok(cfg, "sb", "db.corp.test", "10.21.1.2", 0, &v));
	/* the address-only rule allows the address for any name it names */
	assert_true(addr_ok(cfg, "sb", "web.test", "10.30.0.5", 0, &v));
	assert_string_equal(v.rule_id, "lan");
	/* the floor's CIDRs, even for a static answer */
	assert_false(addr_ok(cfg, "sb", "web.test", "169.254.169.254", 1, &v));
	assert_string_equal(v.reason, "floor_deny");
	pol_config_free(cfg);
}

static void test_port_set(void **state)
{
	struct sg_config *cfg = load_ok(base);
	const struct pol_sandbox *s = pol_sandbox_by_name(cfg, "sb");
	struct pol_ports *ps = pol_ports_new(cfg, s), *pu = pol_ports_new(cfg, NULL);

	SG_UNUSED(state);
	assert_non_null(ps);
	assert_non_null(pu);
	/* sb: 1, 22/23, 80/81, 443/444, 5432/5433, 8000, 8050/8051, 8080/8081,
	 * 8101, 1, 65535: every range once, fewer than the rules' ports x 2 */
	assert_true(pol_ports_count(ps) >= 10 && pol_ports_count(ps) <= 20);
	/* unknown source: only the floor (no ports): 443 and the rest */
	assert_true(pol_ports_count(pu) <= 3);
	pol_ports_free(ps);
	pol_ports_free(pu);
	pol_ports_free(NULL);
	pol_config_free(cfg);
}

static void test_dns_config(void **state)
{
	struct sg_config *cfg;
	char err[512];

	SG_UNUSED(state);
	cfg = load_ok("version: 1\ngateway:\n  listen: { proxy: \"127.0.0.1:0\", dns: \"[::]:0\" }\n");
	assert_int_equal(cfg->dns_rate, 200);
	assert_int_equal(cfg->dns_burst, 400);
	assert_int_equal(cfg->dns_max_names, 300);
	assert_int_equal(cfg->dns_max_ttl_ms, 60000);
	assert_int_equal(cfg->dns_tcp_idle_ms, 10000);
	assert_string_equal(cfg->listen_dns, "[::]:0");
	pol_config_free(cfg);
	cfg = load_ok("version: 1\ngateway:\n  dns: { rate: 10, burst: 20, max_names_per_minute: 5,"
		   " max_ttl: 30s, tcp_idle_timeout: 2s }\n");
	assert_int_equal(cfg->dns_rate, 10);
	assert_int_equal(cfg->dns_burst, 20);
	assert_int_equal(cfg->dns_max_names, 5);
	assert_int_equal(cfg->dns_max_ttl_ms, 30000);
	assert_int_equal(cfg->dns_tcp_idle_ms, 2000);
	pol_config_free(cfg);
	/* a typo is an error, not a silently unlimited responder */
	{
		FILE *f = fopen(cfgpath, "wb");
		const char *t = "version: 1\ngateway:\n  dns: { rates: 10 }\n";

		assert_non_null(f);
		fwrite(t, 1, strlen(t), f);
		fclose(f);
		cfg = NULL;
		assert_int_equal(pol_config_load(cfgpath, &cfg, err, sizeof(err)), SG_EINVAL);
		assert_non_null(strstr(err, "rates"));
		f = fopen(cfgpath, "wb");
		t = "version: 1\ngateway:\n  dns: { rate: 0 }\n";
		fwrite(t, 1, strlen(t), f);
		fclose(f);
		assert_int_equal(pol_config_load(cfgpath, &cfg, err, sizeof(err)), SG_EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_address_rules),
		cmocka_unit_test(test_modes_and_sources),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_port_set),
		cmocka_unit_test(test_dns_config),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
