/*
 * test_pol_match.c - the compiled matchers (domain/regex index, CIDR
 * ranges, port steps) against a naive reference: the rule-by-rule scan
 * pol_eval did before it was compiled, written again here over the public
 * primitives (pol_domain_match, pol_regex_match, pol_cidr_match). Random
 * configs and queries, seeded, so a failure names the seed and case and
 * replays. Also: regex semantics (full match, caseless), the literal tails
 * the index files regexes under, and big lists.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "pol_test_util.h"

#include "sg.h"
#include "sg_str.h"
#include "policy/pol.h"
#include "sg_poison.h"

/* ---- the reference: scan every rule in order ---------------------------- */

enum m3 { M_NO, M_YES, M_MAYBE };

static int ref_geo_in(const struct pol_geo_code *g, size_t n, uint32_t v)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (g[i].v == v)
			return 1;
	return 0;
}

static enum m3 ref_rule(const struct sg_config *cfg, const struct pol_rule *r,
			const struct pol_query *q, int allow)
{
	size_t i, len = q->name ? strlen(q->name) : 0;
	int ok, rc;

	if (!pol_rule_port_ok(r, q->port))
		return M_NO;
	if (r->n_domains || r->n_regex) {
		ok = 0;
		for (i = 0; i < r->n_domains && !ok; i++)
			ok = pol_domain_match(&r->domains[i], q->name, len);
		for (i = 0; i < r->n_regex && !ok && q->name; i++) {
			rc = pol_regex_match(&r->regex[i], q->name, len);
			ok = rc < 0 ? !allow : rc;
		}
		if (!ok)
			return M_NO;
	}
	if (r->n_cidrs) {
		if (!q->addr)
			return M_MAYBE;
		ok = 0;
		for (i = 0; i < r->n_cidrs && !ok; i++)
			ok = pol_cidr_match(&r->cidrs[i], q->addr);
		if (!ok)
			return M_NO;
	}
	if (r->n_countries || r->n_asns) {
		struct pol_geo_info gi;
		uint32_t cc;

		if (!q->addr)
			return M_MAYBE;
		pol_geo_lookup(cfg, q->addr, &gi);
		cc = gi.country[0] ? (uint32_t)gi.country[0] << 8 | (uint32_t)gi.country[1] : 0;
		if (r->n_countries && (!cc || !ref_geo_in(r->countries, r->n_countries, cc)))
			return M_NO;
		if (r->n_asns && (!gi.asn || !ref_geo_in(r->asns, r->n_asns, gi.asn)))
			return M_NO;
	}
	return M_YES;
}

struct ref_scan {
	const struct sg_config *cfg;
	const struct pol_query *q;
	int guard, pending, pending_allow;
	const struct pol_rule *hit, *guarded;
};

static int ref_set(struct ref_scan *s, const struct pol_ruleset *rs, int allow)
{
	size_t i;

	for (i = 0; i < rs->n; i++) {
		const struct pol_rule *r = &rs->rules[i];

		switch (ref_rule(s->cfg, r, s->q, allow)) {
		case M_NO:
			break;
		case M_MAYBE:
			s->pending = 1;
			if (allow)
				s->pending_allow = 1;
			break;
		case M_YES:
			if (allow && s->guard && r->n_cidrs == 0) {
				if (!s->guarded)
					s->guarded = r;
				break;
			}
			s->hit = r;
			return 1;
		}
	}
	return 0;
}

static int ref_sandbox(struct ref_scan *s, const struct pol_sandbox *sbx, int allow)
{
	size_t i;

	if (ref_set(s, allow ? &sbx->allow : &sbx->deny, allow))
		return 1;
	for (i = 0; i < sbx->n_profiles; i++)
		if (ref_set(s, allow ? &sbx->profiles[i]->allow : &sbx->profiles[i]->deny,
			    allow))
			return 1;
	return 0;
}

static void set(struct pol_verdict *v, enum pol_decision d, const char *reason,
		const struct pol_rule *r)
{
	v->name_allowed = d == POL_NEED_ADDR;
	v->decision = d;
	v->reason = reason;
	v->rule = r;
	v->rule_id = r ? r->id : NULL;
}

/* The pre-index pol_eval, line for line. */
static void ref_eval(const struct sg_config *cfg, const struct pol_query *q,
		     struct pol_verdict *v)
{
	const struct pol_sandbox *sbx = q->sbx;
	struct ref_scan s = { .cfg = cfg, .q = q };
	int audit = sbx && sbx->mode == POL_MODE_AUDIT;

	memset(v, 0, sizeof(*v));
	s.guard = q->name && q->addr && !q->addr_static && sg_addr_is_internal(q->addr);
	if (ref_set(&s, &cfg->floor_deny, 0)) {
		set(v, POL_DENY, "floor_deny", s.hit);
		return;
	}
	if (!sbx) {
		if (!cfg->default_allow)
			set(v, POL_DENY, "unknown_source", NULL);
		else if (s.pending)
			set(v, POL_NEED_ADDR, "need_addr", NULL);
		else if (s.guard)
			set(v, POL_DENY, "internal_address", NULL);
		else
			set(v, POL_ALLOW, "unknown_source", NULL);
		return;
	}
	if (ref_sandbox(&s, sbx, 0)) {
		if (!audit)
			set(v, POL_DENY, "rule_deny", s.hit);
		else if (s.pending)
			set(v, POL_NEED_ADDR, "need_addr", NULL);
		else if (s.guard)
			set(v, POL_DENY, "internal_address", s.hit);
		else {
			set(v, POL_ALLOW, "rule_deny", s.hit);
			v->would_deny = 1;
		}
		return;
	}
	if (ref_sandbox(&s, sbx, 1)) {
		if (s.pending) {
			set(v, POL_NEED_ADDR, "need_addr", NULL);
		} else {
			set(v, POL_ALLOW, "rule_allow", s.hit);
			v->by_domain = s.hit->n_cidrs == 0;
		}
		return;
	}
	if (s.guarded) {
		set(v, POL_DENY, "internal_address", s.guarded);
		return;
	}
	if (!cfg->default_allow && !audit) {
		set(v, s.pending_allow ? POL_NEED_ADDR : POL_DENY,
		    s.pending_allow ? "need_addr" : "default_deny", NULL);
		/* only an address rule could allow it */
		v->name_allowed = 0;
		return;
	}
	if (s.pending) {
		set(v, POL_NEED_ADDR, "need_addr", NULL);
	} else if (s.guard) {
		set(v, POL_DENY, "internal_address", NULL);
	} else if (!cfg->default_allow) {
		set(v, POL_ALLOW, "default_deny", NULL);
		v->would_deny = 1;
	} else {
		set(v, POL_ALLOW, "default_allow", NULL);
	}
}

/* ---- random configs and queries ----------------------------------------- */

static uint64_t rng_state;

static uint32_t rng(void)
{
	/* xorshift64*: small, seeded, the same sequence everywhere */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}

#define PICK(a) ((a)[rng() % SG_ARRAY_LEN(a)])

static const char *const labels[] = {
	"a", "b", "ab", "ba", "com", "co", "example", "x-y", "_srv", "xn--p1ai", "api",
};

static void rand_name(char *out, size_t outsz, int n)
{
	size_t off = 0;
	int i;

	out[0] = '\0';
	for (i = 0; i < n; i++)
		off += (size_t)snprintf(out + off, outsz - off, "%s%s", i ? "." : "",
					PICK(labels));
}

/* A regex over the same alphabet: with and without literal tails. */
static void rand_regex(char *out, size_t outsz)
{
	static const char *const forms[] = {
		"^[a-z]+\\.%s$", "%s", "^(api|ab)\\.%s$", ".*%s", "^x-?y\\.%s",
		"(a|b)+\\.%s", "^[^.]+\\.%s\\z", "a.*|%s", "^(?:b\\.)?%s$", "%s|ab",
		"[a-z]{2}\\.%s", "^A[B]\\.%s$", "^.*(com|co)$", "^(?=.*ab).*\\.%s$",
	};
	char name[64], esc[128];
	const char *form, *hole;
	size_t i, o = 0;

	rand_name(name, sizeof(name), 1 + (int)(rng() % 2));
	for (i = 0; name[i]; i++) {
		if (name[i] == '.')
			esc[o++] = '\\';
		esc[o++] = name[i];
	}
	esc[o] = '\0';
	form = PICK(forms);
	hole = strstr(form, "%s");
	if (hole)
		snprintf(out, outsz, "%.*s%s%s", (int)(hole - form), form, esc, hole + 2);
	else
		snprintf(out, outsz, "%s", form);
}

static void rand_v4(char *out, size_t outsz, int for_rule)
{
	static const int first[] = { 10, 93, 198, 203 };
	unsigned a = (unsigned)PICK(first), b = rng() % 2, c = rng() % 4, d = rng() % 256;
	int plen = 8 + (int)(rng() % 25);
	uint32_t x = a << 24 | b << 16 | c << 8 | d;

	if (!for_rule) {
		snprintf(out, outsz, "%u.%u.%u.%u", a, b, c, d);
		return;
	}
	x &= plen ? ~0u << (32 - plen) : 0;
	snprintf(out, outsz, "%u.%u.%u.%u/%d", x >> 24, x >> 16 & 255, x >> 8 & 255,
		 x & 255, plen);
}

static void rand_v6(char *out, size_t outsz, int for_rule)
{
	struct in6_addr a;
	char buf[INET6_ADDRSTRLEN];
	int plen = 16 + (int)(rng() % 113), i;

	memset(&a, 0, sizeof(a));
	a.s6_addr[0] = 0x20;
	a.s6_addr[1] = rng() % 2 ? 0x01 : 0x02;
	a.s6_addr[2] = 0x0d;
	a.s6_addr[3] = 0xb8;
	a.s6_addr[4] = (uint8_t)(rng() % 2);
	a.s6_addr[15] = (uint8_t)(rng() % 4);
	if (for_rule)
		for (i = 0; i < 16; i++) {
			int bits = plen - 8 * i;

			if (bits <= 0)
				a.s6_addr[i] = 0;
			else if (bits < 8)
				a.s6_addr[i] &= (uint8_t)(0xff << (8 - bits));
		}
	inet_ntop(AF_INET6, &a, buf, sizeof(buf));
	if (for_rule)
		snprintf(out, outsz, "\"%s/%d\"", buf, plen);
	else
		snprintf(out, outsz, "%s", buf);
}

struct yb {
	char *p;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
static void yb_add(struct yb *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		assert_true(n >= 0);
		if (b->len + (size_t)n < b->cap)
			break;
		b->cap = 2 * b->cap + (size_t)n + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	b->len += (size_t)n;
}

static void rand_rule(struct yb *b)
{
	static const char *const ports[] = { "443", "80", "\"8000-8100\"", "5432", "\"1-1024\"" };
	static const char *const kinds[] = { "", "*.", "**." };
	char tmp[256];
	unsigned shape = rng() % 10, i, n;

	yb_add(b, "      - {");
	if (shape < 4 || shape >= 8) {          /* domains */
		yb_add(b, " domains: [");
		for (i = 0, n = 1 + rng() % 3; i < n; i++) {
			rand_name(tmp, sizeof(tmp), 1 + (int)(rng() % 3));
			yb_add(b, "%s\"%s%s\"", i ? ", " : "", PICK(kinds), tmp);
		}
		yb_add(b, "],");
	}
	if (shape == 4 || shape == 5 || shape == 9) {   /* regex */
		yb_add(b, " regex: [");
		for (i = 0, n = 1 + rng() % 2; i < n; i++) {
			rand_regex(tmp, sizeof(tmp));
			yb_add(b, "%s'%s'", i ? ", " : "", tmp);
		}
		yb_add(b, "],");
	}
	if (shape >= 6 && shape <= 8) {         /* cidrs */
		yb_add(b, " cidrs: [");
		for (i = 0, n = 1 + rng() % 3; i < n; i++) {
			if (rng() % 3)
				rand_v4(tmp, sizeof(tmp), 1);
			else
				rand_v6(tmp, sizeof(tmp), 1);
			yb_add(b, "%s%s", i ? ", " : "", tmp);
		}
		yb_add(b, "],");
	}
	if (rng() % 2) {
		yb_add(b, " ports: [");
		for (i = 0, n = 1 + rng() % 3; i < n; i++)
			yb_add(b, "%s%s", i ? ", " : "", PICK(ports));
		yb_add(b, "],");
	}
	b->len--;                               /* the last comma */
	yb_add(b, " }\n");
}

static void rand_rules(struct yb *b, const char *key, unsigned max)
{
	unsigned i, n = rng() % (max + 1);

	yb_add(b, "    %s:\n", key);
	if (!n)
		yb_add(b, "      []\n");
	for (i = 0; i < n; i++)
		rand_rule(b);
}

static char *rand_config(unsigned nrules)
{
	struct yb b = { NULL, 0, 0 };
	unsigned i;

	yb_add(&b, "version: 1\nfloor:\n  deny:\n");
	for (i = 0; i < rng() % 3; i++)
		rand_rule(&b);
	if (b.p[b.len - 2] == ':')
		yb_add(&b, "    []\n");
	yb_add(&b, "profiles:\n");
	for (i = 0; i < 2; i++) {
		yb_add(&b, "  p%u:\n", i);
		rand_rules(&b, "allow", nrules / 2);
		rand_rules(&b, "deny", nrules / 4);
	}
	yb_add(&b, "sandboxes:\n");
	for (i = 0; i < 3; i++) {
		yb_add(&b, "  s%u:\n    mode: %s\n    profiles: [%s]\n", i,
		       rng() % 3 ? "enforce" : "audit",
		       i == 0 ? "p0, p1" : i == 1 ? "p1" : "");
		rand_rules(&b, "allow", nrules);
		rand_rules(&b, "deny", nrules / 2);
	}
	yb_add(&b, "default: %s\n", rng() % 4 ? "deny" : "allow");
	return b.p;
}

static void rand_query(const struct sg_config *cfg, struct pol_query *q,
		       char *name, size_t namesz, struct sg_addr *a)
{
	static const uint16_t ports[] = { 443, 443, 80, 5432, 8050, 22, 1, 1024 };
	char buf[SG_HOST_MAX + 1], ip[64];
	unsigned s = rng() % 4;

	memset(q, 0, sizeof(*q));
	q->sbx = s < 3 ? &cfg->sandboxes[s] : NULL;
	if (rng() % 5) {
		rand_name(buf, sizeof(buf), 1 + (int)(rng() % 4));
		if (sg_host_normalize(buf, strlen(buf), name) > 0)
			q->name = name;
	}
	SG_UNUSED(namesz);
	if (rng() % 3) {
		if (rng() % 3)
			rand_v4(ip, sizeof(ip), 0);
		else
			rand_v6(ip, sizeof(ip), 0);
		assert_int_equal(sg_addr_parse(ip, strlen(ip), a), 0);
		/* now and then a v4-mapped address nobody folded */
		if (a->family == AF_INET && rng() % 8 == 0) {
			struct in_addr v4 = a->u.v4;

			memset(a, 0, sizeof(*a));
			a->family = AF_INET6;
			a->u.v6.s6_addr[10] = a->u.v6.s6_addr[11] = 0xff;
			memcpy(&a->u.v6.s6_addr[12], &v4, 4);
		}
		q->addr = a;
		q->addr_static = rng() % 6 == 0;
	}
	q->port = PICK(ports);
}

static void compare(const struct sg_config *cfg, const struct pol_query *q,
		    uint64_t seed, unsigned i, const char *text)
{
	struct pol_verdict v, w;
	char ip[INET6_ADDRSTRLEN] = "-";

	pol_eval(cfg, q, &v);
	ref_eval(cfg, q, &w);
	if (v.decision == w.decision && !strcmp(v.reason, w.reason) && v.rule == w.rule &&
	    v.would_deny == w.would_deny && v.by_domain == w.by_domain &&
	    v.name_allowed == w.name_allowed)
		return;
	if (q->addr)
		sg_addr_str(q->addr, ip, sizeof(ip));
	fail_msg("seed %#llx case %u: sandbox %s name %s addr %s%s port %u:\n"
		 "  index: %d %s %s wd %d bd %d na %d\n  naive: %d %s %s wd %d bd %d na %d\n%s",
		 (unsigned long long)seed, i, q->sbx ? q->sbx->name : "(none)",
		 q->name ? q->name : "-", ip, q->addr_static ? " (static)" : "", q->port,
		 v.decision, v.reason, v.rule_id ? v.rule_id : "-", v.would_deny,
		 v.by_domain, v.name_allowed, w.decision, w.reason,
		 w.rule_id ? w.rule_id : "-", w.would_deny, w.by_domain, w.name_allowed, text);
}

/* Many small random policies, many queries each. */
static void test_random_policies(void **state)
{
	char name[SG_HOST_MAX + 1];
	struct pol_query q;
	struct sg_addr a;
	unsigned c, i, allowed = 0, denied = 0, need = 0;

	SG_UNUSED(state);
	for (c = 0; c < 150; c++) {
		uint64_t seed = 0x9e3779b97f4a7c15ULL * (c + 1);
		struct sg_config *cfg;
		char *text;

		rng_state = seed;
		text = rand_config(12);
		cfg = load_ok(text);
		for (i = 0; i < 400; i++) {
			struct pol_verdict v;

			rand_query(cfg, &q, name, sizeof(name), &a);
			compare(cfg, &q, seed, i, text);
			pol_eval(cfg, &q, &v);
			allowed += v.decision == POL_ALLOW;
			denied += v.decision == POL_DENY;
			need += v.decision == POL_NEED_ADDR;
		}
		pol_config_free(cfg);
		free(text);
	}
	/* every outcome must be common enough to prove something */
	assert_true(allowed > 3000);
	assert_true(denied > 3000);
	assert_true(need > 1000);
}

/*
 * One long allow list of domain patterns and one of prefixes: the first
 * matching rule by index must be the one the scan finds, on thousands of
 * names and addresses that often hit several rules.
 */
static void test_big_lists(void **state)
{
	static const char *const kinds[] = { "", "*.", "**." };
	char tmp[256], name[SG_HOST_MAX + 1], buf[SG_HOST_MAX + 1];
	struct yb b = { NULL, 0, 0 };
	struct sg_config *cfg;
	struct pol_query q;
	struct sg_addr a;
	unsigned i, hits = 0;

	SG_UNUSED(state);
	rng_state = 0xb16b16b16ULL;
	yb_add(&b, "version: 1\nsandboxes:\n  s:\n    allow:\n");
	for (i = 0; i < 3000; i++) {
		rand_name(tmp, sizeof(tmp), 1 + (int)(rng() % 4));
		yb_add(&b, "      - { domains: [\"%s%s\"] }\n", PICK(kinds), tmp);
	}
	for (i = 0; i < 3000; i++) {
		if (i % 3)
			rand_v4(tmp, sizeof(tmp), 1);
		else
			rand_v6(tmp, sizeof(tmp), 1);
		yb_add(&b, "      - { cidrs: [%s], ports: [%u] }\n", tmp, 1 + rng() % 2);
	}
	cfg = load_ok(b.p);
	for (i = 0; i < 20000; i++) {
		struct pol_verdict v;

		memset(&q, 0, sizeof(q));
		q.sbx = &cfg->sandboxes[0];
		if (i % 2) {
			rand_name(buf, sizeof(buf), 1 + (int)(rng() % 5));
			if (sg_host_normalize(buf, strlen(buf), name) < 0)
				continue;
			q.name = name;
			q.port = 443;
		} else {
			if (i % 3)
				rand_v4(tmp, sizeof(tmp), 0);
			else
				rand_v6(tmp, sizeof(tmp), 0);
			assert_int_equal(sg_addr_parse(tmp, strlen(tmp), &a), 0);
			q.addr = &a;
			q.port = (uint16_t)(1 + rng() % 2);
		}
		compare(cfg, &q, 0xb16b16b16ULL, i, "(big lists)");
		pol_eval(cfg, &q, &v);
		hits += v.decision == POL_ALLOW;
	}
	assert_true(hits > 4000);
	pol_config_free(cfg);
	free(b.p);
}

/* ---- regex ------------------------------------------------------------------ */

static int re_eval(const struct sg_config *cfg, const char *name)
{
	struct pol_query q = { .sbx = &cfg->sandboxes[0], .name = name, .port = 443 };
	struct pol_verdict v;

	pol_eval(cfg, &q, &v);
	return v.decision == POL_ALLOW;
}

static void test_regex_semantics(void **state)
{
	struct sg_config *cfg;

	SG_UNUSED(state);
	cfg = load_ok("version: 1\nsandboxes:\n  s:\n    allow:\n"
			"      - { regex: '^[a-z0-9-]+\\.s3\\.amazonaws\\.com$' }\n"
			"      - { regex: 'a.b' }\n"
			"      - { regex: ['exact\\.test', 'API\\.Example\\.(COM|net)'] }\n"
			"      - { regex: 'one|two\\.test' }\n"
			"      - { regex: 'x|xy', ports: [8443] }\n");
	/* full match: anchored at both ends, whether written or not */
	assert_true(re_eval(cfg, "my-bucket.s3.amazonaws.com"));
	assert_false(re_eval(cfg, "my.bucket.s3.amazonaws.com"));
	assert_false(re_eval(cfg, "bucket.s3.amazonaws.com.evil.com"));
	assert_false(re_eval(cfg, "s3.amazonaws.com"));
	assert_true(re_eval(cfg, "axb"));
	assert_true(re_eval(cfg, "a.b"));
	assert_false(re_eval(cfg, "xaxb"));
	assert_false(re_eval(cfg, "axbx"));
	assert_false(re_eval(cfg, "a.b.c"));
	assert_true(re_eval(cfg, "exact.test"));
	assert_false(re_eval(cfg, "inexact.test"));
	assert_false(re_eval(cfg, "exact.test.com"));
	/* caseless, against lower-case names */
	assert_true(re_eval(cfg, "api.example.com"));
	assert_true(re_eval(cfg, "api.example.net"));
	assert_false(re_eval(cfg, "api.example.org"));
	/* alternation: each branch is a full match of its own */
	assert_true(re_eval(cfg, "one"));
	assert_true(re_eval(cfg, "two.test"));
	assert_false(re_eval(cfg, "one.test"));
	assert_false(re_eval(cfg, "two"));
	/* a regex rule without ports means 443, like a domain rule */
	{
		struct pol_query q = { .sbx = &cfg->sandboxes[0], .name = "axb", .port = 80 };
		struct pol_verdict v;

		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_DENY);
		q.name = "xy";
		q.port = 8443;
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_ALLOW);
		assert_string_equal(v.rule_id, "sandboxes/s/allow/4");
		assert_true(v.by_domain);
		/* no name: a regex matches nothing */
		q.name = NULL;
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_DENY);
	}
	pol_config_free(cfg);

	/* catastrophic backtracking hits the match limit: an allow fails
	 * closed (no match), a deny fails closed (match) */
	cfg = load_ok("version: 1\nsandboxes:\n  s:\n    allow:\n"
			"      - { regex: '(a|aa)+b' }\n"
			"  d:\n    deny:\n      - { regex: '(a|aa)+b' }\n"
			"default: allow\n");
	{
		char name[64];
		struct pol_query q = { .sbx = &cfg->sandboxes[0], .port = 443 };
		struct pol_verdict v;

		/* a 'b' is there (PCRE2 checks for a required byte first), but
		 * not where the pattern could use it */
		memset(name, 'a', 58);
		memcpy(name + 58, "cb", 3);
		q.name = name;
		assert_int_equal(pol_regex_match(&cfg->sandboxes[0].allow.rules[0].regex[0],
						 name, 60), SG_ERROR);
		pol_eval(cfg, &q, &v);
		assert_string_equal(v.reason, "default_allow");
		q.sbx = &cfg->sandboxes[1];
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_DENY);
		assert_string_equal(v.reason, "rule_deny");
		/* and an ordinary name is not matched */
		q.name = "aab";
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_DENY);
		q.name = "ab.com";
		pol_eval(cfg, &q, &v);
		assert_int_equal(v.decision, POL_ALLOW);
	}
	pol_config_free(cfg);
}

/* The literal tail a regex is filed under: never one some match lacks. */
static void test_regex_tails(void **state)
{
	static const struct {
		const char *re, *tail;
	} cases[] = {
		{ "^[a-z0-9-]+\\.s3\\.amazonaws\\.com$", ".s3.amazonaws.com" },
		{ "exact\\.test", "exact.test" },
		{ "API\\.Example\\.COM\\z", "api.example.com" },
		{ "(foo|bar)\\.example\\.com", ".example.com" },
		{ "a{2}\\.b", ".b" },
		{ "a{2,}x\\.b{1,3}", NULL },
		{ "[.]com$", "com" },
		{ "[a\\]]x", "x" },
		{ "[[:alpha:]]+\\.io", ".io" },
		{ "(?:www\\.)?site\\.org", "site.org" },
		{ "(?<!evil)\\.corp\\.net", ".corp.net" },
		{ "x\\.com+", NULL },
		{ "x\\.com?", NULL },
		{ "x\\.com*?", NULL },
		{ "a|b\\.com", NULL },
		{ "x\\x2ecom", NULL },
		{ "(a)\\1\\.com", NULL },
		{ "(?i)a\\.com", NULL },
		{ "\\Qa.com\\E", NULL },
		{ "(*UTF)a\\.com", NULL },
		{ "a\\.com\\d", NULL },
		{ "a\\.(com)", NULL },
		{ "a\\.c(?=o)om", "om" },
		{ ".*", NULL },
		{ "a\\.com$$", "a.com" },
		{ "a-b_c\\.x-y", "a-b_c.x-y" },
	};
	char yaml[256];
	struct sg_config *cfg;
	size_t i;

	SG_UNUSED(state);
	for (i = 0; i < SG_ARRAY_LEN(cases); i++) {
		const struct pol_regex *re;

		snprintf(yaml, sizeof(yaml), "version: 1\nfloor:\n  deny:\n"
			 "    - regex: '%s'\n", cases[i].re);
		cfg = load_ok(yaml);
		re = &cfg->floor_deny.rules[0].regex[0];
		if (!cases[i].tail && re->tail)
			fail_msg("%s: tail \"%s\", want none", cases[i].re, re->tail);
		if (cases[i].tail && (!re->tail || strcmp(re->tail, cases[i].tail)))
			fail_msg("%s: tail \"%s\", want \"%s\"", cases[i].re,
				 re->tail ? re->tail : "(none)", cases[i].tail);
		assert_true(re->jit);
		pol_config_free(cfg);
	}
}

/* Ports: lists and ranges for every kind of rule, and the defaults. */
static void test_port_steps(void **state)
{
	struct sg_config *cfg;
	struct pol_query q;
	struct pol_verdict v;
	struct sg_addr a;

	SG_UNUSED(state);
	cfg = load_ok("version: 1\nsandboxes:\n  s:\n    allow:\n"
			"      - { cidrs: [10.0.0.0/8], ports: [\"8000-8100\", 22] }\n"
			"      - { cidrs: [10.1.0.0/16] }\n"
			"      - { cidrs: [\"2001:db8::/32\"], ports: [65535] }\n");
	memset(&q, 0, sizeof(q));
	q.sbx = &cfg->sandboxes[0];
	q.name = "db.example";
	/* no address yet: which ports an address could decide */
	q.port = 8050;
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_NEED_ADDR);
	/* only an address rule could allow this name */
	assert_false(v.name_allowed);
	q.port = 443;
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_NEED_ADDR);    /* rule 1: any port */
	a = (struct sg_addr){ .family = AF_INET };
	assert_int_equal(sg_addr_parse("10.1.2.3", 8, &a), 0);
	q.addr = &a;
	q.name = NULL;
	q.port = 8100;
	pol_eval(cfg, &q, &v);
	assert_string_equal(v.rule_id, "sandboxes/s/allow/0");
	q.port = 8101;
	pol_eval(cfg, &q, &v);
	assert_string_equal(v.rule_id, "sandboxes/s/allow/1");
	assert_int_equal(sg_addr_parse("10.2.2.3", 8, &a), 0);
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_DENY);
	assert_int_equal(sg_addr_parse("2001:db8::5", 11, &a), 0);
	q.port = 65535;
	pol_eval(cfg, &q, &v);
	assert_string_equal(v.rule_id, "sandboxes/s/allow/2");
	q.port = 65534;
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_DENY);
	pol_config_free(cfg);
}

/* NEED_ADDR: allowed by name unless an address denies it, or not. */
static void test_name_allowed(void **state)
{
	struct sg_config *cfg;
	struct pol_query q;
	struct pol_verdict v;

	SG_UNUSED(state);
	cfg = load_ok("version: 1\nfloor: {deny: [{cidrs: [169.254.0.0/16]}]}\n"
			"sandboxes:\n  s:\n    allow: [{domains: [a.test]}, {cidrs: [10.0.0.0/8]}]\n"
			"  d: {}\n  au: {mode: audit}\n");
	memset(&q, 0, sizeof(q));
	q.port = 443;
	q.name = "a.test";
	q.sbx = pol_sandbox_by_name(cfg, "s");
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_NEED_ADDR);
	assert_true(v.name_allowed);            /* the floor could still deny */
	q.name = "b.test";
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_NEED_ADDR);
	assert_false(v.name_allowed);           /* only 10/8 could allow */
	q.sbx = pol_sandbox_by_name(cfg, "d");
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_DENY);
	assert_false(v.name_allowed);
	q.sbx = pol_sandbox_by_name(cfg, "au");
	pol_eval(cfg, &q, &v);
	assert_int_equal(v.decision, POL_NEED_ADDR);
	assert_true(v.name_allowed);            /* audit: would_deny, flows */
	pol_config_free(cfg);
}

/*
 * Several threads on one config at once, as the workers do: same answers
 * as one thread. Each thread gets its own PCRE2 match data, freed when it
 * exits (ASan's leak check runs over this binary in the SAN build).
 */
#define TH_N 4
#define TH_Q 3000

struct th_arg {
	const struct sg_config *cfg;
	const struct pol_query *qs;
	const struct pol_verdict *want;
	int bad;
};

static void *th_run(void *p)
{
	struct th_arg *a = p;
	struct pol_verdict v;
	int round, i;

	for (round = 0; round < 5; round++)
		for (i = 0; i < TH_Q; i++) {
			pol_eval(a->cfg, &a->qs[i], &v);
			if (v.decision != a->want[i].decision || v.rule != a->want[i].rule)
				a->bad++;
		}
	return NULL;
}

static void test_threads(void **state)
{
	static struct pol_query qs[TH_Q];
	static struct pol_verdict want[TH_Q];
	static char names[TH_Q][SG_HOST_MAX + 1];
	static struct sg_addr addrs[TH_Q];
	struct th_arg args[TH_N];
	pthread_t th[TH_N];
	struct sg_config *cfg;
	char *text;
	int i, matched = 0;

	SG_UNUSED(state);
	rng_state = 0x7417ead5ULL;
	text = rand_config(20);
	cfg = load_ok(text);
	for (i = 0; i < TH_Q; i++) {
		rand_query(cfg, &qs[i], names[i], sizeof(names[i]), &addrs[i]);
		if (qs[i].name)
			qs[i].name = names[i];
		pol_eval(cfg, &qs[i], &want[i]);
		matched += want[i].rule != NULL;
	}
	assert_true(matched > TH_Q / 10);
	for (i = 0; i < TH_N; i++) {
		args[i] = (struct th_arg){ cfg, qs, want, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, th_run, &args[i]), 0);
	}
	for (i = 0; i < TH_N; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(args[i].bad, 0);
	}
	pol_config_free(cfg);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_policies),
		cmocka_unit_test(test_big_lists),
		cmocka_unit_test(test_regex_semantics),
		cmocka_unit_test(test_regex_tails),
		cmocka_unit_test(test_port_steps),
		cmocka_unit_test(test_name_allowed),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
