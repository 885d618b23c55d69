/*
 * pol_dns.c - port-independent questions for the DNS responder: could a
 * name, or a name's address, be allowed on SOME port? (pol.h has the
 * contract.)
 *
 * Built only on pol_eval(): the verdict depends on the port through
 * pol_rule_port_ok() alone, so it is constant between the points where
 * some rule's port set starts or ends. Evaluating one port of each such
 * range answers "is there a port" exactly, whatever the rule kinds,
 * profiles, audit mode or default. 443 and 80 go first: most names are
 * allowed there and the answer comes after one evaluation.
 */
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

struct pol_ports {
	uint16_t *ports;                        /* owned; trial order */
	size_t n;
	const struct pol_rule **named_addr;     /* owned array of borrowed rules */
	size_t n_named_addr;
};

/* Where a rule's port set starts and stops: a growable list of points. */
struct pts {
	uint32_t *p;
	size_t n, cap;
	int oom;
};

static void pts_add(struct pts *s, uint32_t v)
{
	/* No connection goes to port 0 (sg_hostport_split refuses it, and
	 * no TCP destination has it): ranges start at 1. */
	if (v == 0)
		v = 1;
	if (v > 65535 || s->oom)
		return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		uint32_t *np = realloc(s->p, cap * sizeof(*np));

		if (!np) {
			s->oom = 1;
			return;
		}
		s->p = np;
		s->cap = cap;
	}
	s->p[s->n++] = v;
}

static void pts_rules(struct pts *s, const struct pol_ruleset *rs)
{
	size_t i, j;

	for (i = 0; i < rs->n; i++) {
		const struct pol_rule *r = &rs->rules[i];

		if (r->n_ports == 0) {
			/* pol_rule_port_ok: 443 for a name rule, any port otherwise */
			if (pol_rule_has_name(r)) {
				pts_add(s, 443);
				pts_add(s, 444);
			}
			continue;
		}
		for (j = 0; j < r->n_ports; j++) {
			pts_add(s, r->ports[j].lo);
			pts_add(s, (uint32_t)r->ports[j].hi + 1);
		}
	}
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int named_addr_add(struct pol_ports *ps, const struct pol_ruleset *rs, size_t *cap)
{
	size_t i;

	for (i = 0; i < rs->n; i++) {
		const struct pol_rule *r = &rs->rules[i];

		if (!pol_rule_has_name(r) || !pol_rule_has_addr(r))
			continue;
		if (ps->n_named_addr == *cap) {
			size_t nc = *cap ? *cap * 2 : 8;
			const struct pol_rule **np = realloc(ps->named_addr, nc * sizeof(*np));

			if (!np)
				return SG_ENOMEM;
			ps->named_addr = np;
			*cap = nc;
		}
		ps->named_addr[ps->n_named_addr++] = r;
	}
	return 0;
}

struct pol_ports *pol_ports_new(const struct sg_config *cfg, const struct pol_sandbox *sbx)
{
	struct pol_ports *ps = calloc(1, sizeof(*ps));
	struct pts s = { 0 };
	size_t i, j, n, cap = 0, at443 = 0, at80 = 0;

	if (!ps)
		return NULL;
	pts_add(&s, 1);
	pts_rules(&s, &cfg->floor_deny);
	if (sbx) {
		pts_rules(&s, &sbx->deny);
		pts_rules(&s, &sbx->allow);
		for (i = 0; i < sbx->n_profiles; i++) {
			pts_rules(&s, &sbx->profiles[i]->deny);
			pts_rules(&s, &sbx->profiles[i]->allow);
		}
		if (named_addr_add(ps, &sbx->allow, &cap) < 0)
			goto fail;
		for (i = 0; i < sbx->n_profiles; i++)
			if (named_addr_add(ps, &sbx->profiles[i]->allow, &cap) < 0)
				goto fail;
	}
	if (s.oom)
		goto fail;
	qsort(s.p, s.n, sizeof(*s.p), u32_cmp);
	for (i = 0, n = 0; i < s.n; i++)
		if (n == 0 || s.p[n - 1] != s.p[i])
			s.p[n++] = s.p[i];
	ps->ports = malloc(n * sizeof(*ps->ports));
	if (!ps->ports)
		goto fail;
	/* The ranges holding 443 and 80 are represented by those ports and
	 * tried first; every other range by its first port. */
	for (i = 0; i < n; i++) {
		if (s.p[i] <= 443)
			at443 = i;
		if (s.p[i] <= 80)
			at80 = i;
	}
	ps->ports[ps->n++] = 443;
	if (at80 != at443)
		ps->ports[ps->n++] = 80;
	for (j = 0; j < n; j++)
		if (j != at443 && j != at80)
			ps->ports[ps->n++] = (uint16_t)s.p[j];
	free(s.p);
	return ps;
fail:
	free(s.p);
	pol_ports_free(ps);
	return NULL;
}

void pol_ports_free(struct pol_ports *ps)
{
	if (!ps)
		return;
	free(ps->ports);
	free(ps->named_addr);
	free(ps);
}

size_t pol_ports_count(const struct pol_ports *ps)
{
	return ps ? ps->n : 0;
}

static int name_cond_matches(const struct pol_rule *r, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < r->n_domains; i++)
		if (pol_domain_match(&r->domains[i], name, len))
			return 1;
	/* PCRE2 giving up (negative) is no match: this is an allow */
	for (i = 0; i < r->n_regex; i++)
		if (pol_regex_match(&r->regex[i], name, len) == 1)
			return 1;
	return 0;
}

/* A deny verdict to report for a name that no port allows. */
static void deny_report(struct pol_verdict *v, const struct pol_sandbox *sbx)
{
	if (v->decision == POL_DENY)
		return;
	/* NEED_ADDR without a name rule behind it: nothing but the default. */
	v->decision = POL_DENY;
	v->name_allowed = 0;
	v->would_deny = 0;
	v->by_domain = 0;
	v->reason = sbx ? "default_deny" : "unknown_source";
	v->rule = NULL;
	v->rule_id = NULL;
}

int pol_eval_name(const struct sg_config *cfg, const struct pol_sandbox *sbx,
		  const struct pol_ports *ps, const char *name, struct pol_verdict *v,
		  uint16_t *port)
{
	struct pol_ports *own = NULL;
	struct pol_query q = { .sbx = sbx, .name = name };
	struct pol_verdict t, by_rule = { .decision = POL_ALLOW };
	size_t i, j, len = strlen(name);
	int found = 0;

	if (!ps) {
		ps = own = pol_ports_new(cfg, sbx);
		if (!ps) {
			/* Out of memory: fail closed, but still say why. */
			q.port = 443;
			pol_eval(cfg, &q, v);
			deny_report(v, sbx);
			return 0;
		}
	}
	for (i = 0; i < ps->n && !found; i++) {
		q.port = ps->ports[i];
		pol_eval(cfg, &q, &t);
		if (t.decision == POL_ALLOW || (t.decision == POL_NEED_ADDR && t.name_allowed)) {
			found = 1;
		} else if (t.decision == POL_NEED_ADDR) {
			/* Only an address rule could allow here: one that also
			 * names this name makes it worth resolving. */
			for (j = 0; j < ps->n_named_addr && !found; j++) {
				const struct pol_rule *r = ps->named_addr[j];

				if (pol_rule_port_ok(r, q.port) && name_cond_matches(r, name, len)) {
					t.name_allowed = 1;
					t.rule = r;
					t.rule_id = r->id;
					found = 1;
				}
			}
		}
		if (found) {
			*v = t;
			if (port)
				*port = q.port;
			break;
		}
		if (i == 0)
			*v = t;         /* port 443 */
		if (t.decision == POL_DENY && t.rule && by_rule.decision != POL_DENY)
			by_rule = t;
	}
	pol_ports_free(own);
	if (found)
		return 1;
	if (by_rule.decision == POL_DENY)
		*v = by_rule;
	deny_report(v, sbx);
	return 0;
}

int pol_eval_name_addr(const struct sg_config *cfg, const struct pol_sandbox *sbx,
		       const struct pol_ports *ps, const char *name,
		       const struct sg_addr *addr, int addr_static, uint16_t hint_port,
		       struct pol_verdict *v)
{
	struct pol_ports *own = NULL;
	struct pol_query q = { .sbx = sbx, .name = name, .addr = addr,
			       .addr_static = addr_static, .port = hint_port };
	struct pol_verdict t;
	size_t i;
	int found = 0;

	/* With an address pol_eval never answers NEED_ADDR. */
	pol_eval(cfg, &q, v);
	if (v->decision == POL_ALLOW)
		return 1;
	if (!ps) {
		ps = own = pol_ports_new(cfg, sbx);
		if (!ps)
			return 0;
	}
	for (i = 0; i < ps->n; i++) {
		if (ps->ports[i] == hint_port)
			continue;
		q.port = ps->ports[i];
		pol_eval(cfg, &q, &t);
		if (t.decision == POL_ALLOW) {
			*v = t;
			found = 1;
			break;
		}
	}
	pol_ports_free(own);
	return found;
}
