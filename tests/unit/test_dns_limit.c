/*
 * test_dns_limit.c - the DNS responder's shared stores: per-sandbox limits
 * and audit aggregation (gateway/dns_limit.c), and what each sandbox
 * learned (gateway/dns_learn.c). Time is passed in, so windows and bursts
 * are tested without sleeping; emitted records are captured.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sg.h"
#include "gateway/dns_learn.h"
#include "gateway/dns_limit.h"
#include "gateway/registry.h"
#include "sg_poison.h"

struct seen {
	int n;
	struct dns_rec last;
	char qname[256];
	uint64_t total;
};

static void capture(void *arg, const struct dns_rec *r)
{
	struct seen *s = arg;

	s->n++;
	s->last = *r;
	snprintf(s->qname, sizeof(s->qname), "%s", r->qname ? r->qname : "");
	s->last.qname = s->qname;
	s->total += r->count;
}

static struct dns_ident ident(const char *ip)
{
	struct dns_ident id;
	struct sg_addr a;

	assert_int_equal(sg_addr_parse(ip, strlen(ip), &a), 0);
	assert_null(dns_ident_of(&id, NULL, &a));
	return id;
}

static struct dns_rec query(const char *name)
{
	struct dns_rec r = {
		.kind = DNS_REC_QUERY, .sandbox = "sb", .src = "10.0.0.2:5353", .proto = "udp",
		.qname = name, .qtype = 1, .rcode = 0, .decision = "allow",
		.reason = "rule_allow", .rule = "web", .answers = 1, .count = 1,
	};

	return r;
}

static void test_rate(void **state)
{
	struct seen s = { 0 };
	struct dns_limits *L = dns_limits_new(capture, &s);
	struct dns_limit_cfg cfg = { .rate = 10, .burst = 5, .max_names = 1000 };
	struct dns_ident id = ident("10.0.0.2"), other = ident("10.0.0.3");
	struct dns_rec r = query("a.test");
	int i;

	SG_UNUSED(state);
	for (i = 0; i < 5; i++)
		assert_int_equal(dns_limits_admit(L, &id, &r, &cfg, 1000), DNS_ADMIT_OK);
	assert_int_equal(dns_limits_admit(L, &id, &r, &cfg, 1000), DNS_ADMIT_RATE);
	assert_int_equal(dns_limits_admit(L, &id, &r, &cfg, 1050), DNS_ADMIT_RATE);
	/* another sandbox has its own bucket */
	assert_int_equal(dns_limits_admit(L, &other, &r, &cfg, 1050), DNS_ADMIT_OK);
	/* 10/s: one token after 100 ms */
	assert_int_equal(dns_limits_admit(L, &id, &r, &cfg, 1100), DNS_ADMIT_OK);
	assert_int_equal(dns_limits_admit(L, &id, &r, &cfg, 1100), DNS_ADMIT_RATE);
	/* the burst goes into ONE record, once the refusals have stopped */
	dns_limits_sweep(L, 1500, 0);
	assert_int_equal(s.n, 0);
	dns_limits_sweep(L, 2100, 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.last.kind, DNS_REC_BURST);
	assert_string_equal(s.last.reason, "dns_rate_limited");
	assert_string_equal(s.last.decision, "deny");
	assert_int_equal(s.last.count, 3);
	assert_int_equal(s.last.span_ms, 100);
	assert_string_equal(s.last.sandbox, "sb");
	dns_limits_sweep(L, 5000, 1);
	assert_int_equal(s.n, 1);
	dns_limits_free(L);
}

static void test_names(void **state)
{
	struct seen s = { 0 };
	struct dns_limits *L = dns_limits_new(capture, &s);
	struct dns_limit_cfg cfg = { .rate = 1000, .burst = 1000, .max_names = 3 };
	struct dns_ident id = ident("fd00::2");
	struct dns_rec a = query("a.test"), b = query("b.test"), c = query("c.test"),
		       d = query("d.test"), e = query("e.test"), none = query(NULL);

	SG_UNUSED(state);
	assert_int_equal(dns_limits_admit(L, &id, &a, &cfg, 0), DNS_ADMIT_OK);
	assert_int_equal(dns_limits_admit(L, &id, &b, &cfg, 1), DNS_ADMIT_OK);
	assert_int_equal(dns_limits_admit(L, &id, &c, &cfg, 2), DNS_ADMIT_OK);
	assert_int_equal(dns_limits_admit(L, &id, &d, &cfg, 3), DNS_ADMIT_NAMES);
	assert_int_equal(dns_limits_admit(L, &id, &e, &cfg, 4), DNS_ADMIT_NAMES);
	/* names already asked still work; nameless queries are not counted */
	assert_int_equal(dns_limits_admit(L, &id, &a, &cfg, 5), DNS_ADMIT_OK);
	assert_int_equal(dns_limits_admit(L, &id, &none, &cfg, 5), DNS_ADMIT_OK);
	dns_limits_sweep(L, 1004, 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.last.reason, "dns_name_burst");
	assert_int_equal(s.last.count, 2);
	assert_string_equal(s.last.qname, "d.test");        /* the first refused */
	/* a new window forgets the names */
	assert_int_equal(dns_limits_admit(L, &id, &d, &cfg, DNS_WINDOW_MS + 10), DNS_ADMIT_OK);
	dns_limits_free(L);
}

/* A long burst is written every window while it lasts, not only at its end. */
static void test_long_burst(void **state)
{
	struct seen s = { 0 };
	struct dns_limits *L = dns_limits_new(capture, &s);
	struct dns_limit_cfg cfg = { .rate = 1, .burst = 1, .max_names = 100 };
	struct dns_ident id = ident("10.0.0.9");
	struct dns_rec r = query(NULL);
	int64_t t;

	SG_UNUSED(state);
	assert_int_equal(dns_limits_admit(L, &id, &r, &cfg, 0), DNS_ADMIT_OK);
	/* 20 refused queries every 500 ms for 70 s: one record at 60 s */
	for (t = 1; t < 70000; t += 500) {
		int i;

		for (i = 0; i < 20; i++)
			dns_limits_admit(L, &id, &r, &cfg, t);
		dns_limits_sweep(L, t, 0);
	}
	assert_int_equal(s.n, 1);
	dns_limits_sweep(L, 80000, 0);
	assert_int_equal(s.n, 2);
	/* every refusal is in exactly one record: 1 token a second was spent */
	assert_int_equal(s.total, 140 * 20 - 69);
	dns_limits_free(L);
}

static void test_aggregate(void **state)
{
	struct seen s = { 0 };
	struct dns_limits *L = dns_limits_new(capture, &s);
	struct dns_ident id = ident("10.0.0.2");
	struct dns_rec a = query("a.test"), a6 = query("a.test");
	int i;

	SG_UNUSED(state);
	a6.qtype = 28;
	assert_int_equal(dns_limits_count(L, &id, &a, 100), 1);       /* recorded by caller */
	assert_int_equal(dns_limits_count(L, &id, &a6, 100), 1);      /* another type */
	for (i = 0; i < 4; i++)
		assert_int_equal(dns_limits_count(L, &id, &a, 200 + i), 0);
	dns_limits_sweep(L, 30000, 0);
	assert_int_equal(s.n, 0);
	/* the window ends: one record with the four counted */
	dns_limits_sweep(L, 100 + DNS_WINDOW_MS, 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.last.kind, DNS_REC_AGGREGATE);
	assert_int_equal(s.last.count, 4);
	assert_int_equal(s.last.span_ms, 3);
	assert_string_equal(s.last.qname, "a.test");
	assert_string_equal(s.last.rule, "web");
	/* a new window records the first again */
	assert_int_equal(dns_limits_count(L, &id, &a, 200 + DNS_WINDOW_MS), 1);
	assert_int_equal(dns_limits_count(L, &id, &a, 201 + DNS_WINDOW_MS), 0);
	/* shutdown writes what is pending */
	dns_limits_sweep(L, 300 + DNS_WINDOW_MS, 1);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.last.count, 1);
	dns_limits_free(L);
}

static void test_learn(void **state)
{
	struct dns_learn *l = dns_learn_new();
	struct dns_ident a = ident("10.0.0.2"), b = ident("10.0.0.3"), r1, r2;
	struct sg_addr ip, ip2, src;
	struct gw_registry *reg = gw_registry_new(), *reg2;
	struct gw_reg_entry e = { .name = "agent-7", .n_addrs = 2 };
	const char *conflict = NULL;
	char out[SG_HOST_MAX + 1];

	SG_UNUSED(state);
	assert_non_null(l);
	sg_addr_parse("203.0.113.5", 11, &ip);
	sg_addr_parse("2001:db8::5", 11, &ip2);
	dns_learn_put(l, &a, &ip, "api.example.test", 1000);
	assert_int_equal(dns_learn_get(l, &a, &ip, 999, out), 1);
	assert_string_equal(out, "api.example.test");
	assert_int_equal(dns_learn_get(l, &a, &ip, 1000, out), 0);     /* expired */
	assert_int_equal(dns_learn_get(l, &b, &ip, 999, out), 0);      /* another sandbox */
	assert_int_equal(dns_learn_get(l, &a, &ip2, 999, out), 0);
	dns_learn_put(l, &a, &ip, "other.example.test", 2000);         /* newest wins */
	assert_int_equal(dns_learn_get(l, &a, &ip, 1500, out), 1);
	assert_string_equal(out, "other.example.test");
	assert_int_equal(dns_learn_count(l), 1);

	/* a registered sandbox is one identity across its addresses */
	sg_addr_parse("10.9.0.2", 8, &e.addrs[0]);
	sg_addr_parse("fd09::2", 7, &e.addrs[1]);
	reg2 = gw_registry_with(reg, &e, &conflict);
	assert_non_null(reg2);
	assert_non_null(dns_ident_of(&r1, reg2, &e.addrs[0]));
	assert_non_null(dns_ident_of(&r2, reg2, &e.addrs[1]));
	assert_int_equal(r1.hash, r2.hash);
	dns_learn_put(l, &r1, &ip, "reg.example.test", 1000);
	assert_int_equal(dns_learn_get(l, &r2, &ip, 10, out), 1);
	sg_addr_parse("10.9.0.3", 8, &src);
	assert_null(dns_ident_of(&r2, reg2, &src));
	assert_int_not_equal(r1.hash, r2.hash);
	gw_registry_put(reg);
	gw_registry_put(reg2);
	dns_learn_free(l);
}

/* The store is bounded: many more entries than slots, lookups still right. */
static void test_learn_bounded(void **state)
{
	struct dns_learn *l = dns_learn_new();
	struct dns_ident a = ident("10.0.0.2");
	char out[SG_HOST_MAX + 1], name[32];
	uint32_t i;

	SG_UNUSED(state);
	for (i = 0; i < 4 * DNS_LEARN_SLOTS; i++) {
		struct sg_addr ip = { .family = AF_INET };

		ip.u.v4.s_addr = htonl(0xcb000000u + i);
		snprintf(name, sizeof(name), "n%u.test", i);
		dns_learn_put(l, &a, &ip, name, 100000 + i);
	}
	assert_true(dns_learn_count(l) <= DNS_LEARN_SLOTS);
	{
		struct sg_addr ip = { .family = AF_INET };

		/* the newest is there, with its own name */
		ip.u.v4.s_addr = htonl(0xcb000000u + 4 * DNS_LEARN_SLOTS - 1);
		assert_int_equal(dns_learn_get(l, &a, &ip, 0, out), 1);
		snprintf(name, sizeof(name), "n%u.test", 4 * DNS_LEARN_SLOTS - 1);
		assert_string_equal(out, name);
	}
	dns_learn_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_long_burst),
		cmocka_unit_test(test_aggregate),
		cmocka_unit_test(test_learn),
		cmocka_unit_test(test_learn_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
