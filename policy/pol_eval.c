/*
 * pol_eval.c - policy evaluation over a loaded struct sg_config.
 *
 * Everything here reads the config and the query and allocates nothing, so
 * it can run on every connection of every worker against a shared snapshot.
 * Domain rules are scanned in file order for now; a compiled trie replaces
 * the scan later without changing the results.
 */
#include <fnmatch.h>
#include <string.h>

#include "sg.h"
#include "sg_str.h"
#include "pol.h"
#include "sg_poison.h"

/*
 * The bytes of an address, with v4-mapped IPv6 seen as the IPv4 address it
 * carries: the config folds mapped networks at load, so a mapped address
 * from a caller that did not fold it must compare as IPv4 too.
 */
static const uint8_t *addr_bytes(const struct sg_addr *a, int *family)
{
	if (a->family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->u.v6)) {
		*family = AF_INET;
		return &a->u.v6.s6_addr[12];
	}
	*family = a->family;
	if (a->family == AF_INET)
		return (const uint8_t *)&a->u.v4;
	return a->u.v6.s6_addr;
}

int pol_cidr_match(const struct pol_cidr *c, const struct sg_addr *a)
{
	const uint8_t *net, *b;
	int fam_net, fam, full, rest;

	if (!a)
		return 0;
	net = addr_bytes(&c->addr, &fam_net);
	b = addr_bytes(a, &fam);
	if (fam != fam_net)
		return 0;
	full = c->plen / 8;
	rest = c->plen % 8;
	if (memcmp(net, b, (size_t)full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	return ((net[full] ^ b[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/*
 * name is normalised by the caller (lower case, no trailing dot, a valid
 * host name). "*." wants exactly one label in front of the suffix, "**."
 * one or more; neither matches the suffix itself.
 */
int pol_domain_match(const struct pol_domain *d, const char *name, size_t len)
{
	size_t sl = d->suffix_len, pl;

	if (!name)
		return 0;
	if (d->kind == POL_DOM_EXACT)
		return len == sl && memcmp(name, d->suffix, sl) == 0;
	/* at least "x." in front of the suffix */
	if (len < sl + 2)
		return 0;
	pl = len - sl - 1;
	if (name[pl] != '.' || memcmp(name + pl + 1, d->suffix, sl) != 0)
		return 0;
	if (d->kind == POL_DOM_ONE)
		return memchr(name, '.', pl) == NULL;
	return 1;
}

int pol_rule_port_ok(const struct pol_rule *r, uint16_t port)
{
	size_t i;

	if (r->n_ports == 0)
		return r->n_domains ? port == 443 : 1;
	for (i = 0; i < r->n_ports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return 1;
	return 0;
}

const struct pol_sandbox *pol_sandbox_by_addr(const struct sg_config *cfg,
					      const struct sg_addr *src)
{
	size_t i, j;

	for (i = 0; i < cfg->n_sandboxes; i++) {
		const struct pol_sandbox *s = &cfg->sandboxes[i];

		for (j = 0; j < s->n_sources; j++)
			if (pol_cidr_match(&s->sources[j], src))
				return s;
	}
	return NULL;
}

const struct pol_sandbox *pol_sandbox_by_name(const struct sg_config *cfg,
					      const char *name)
{
	size_t i;

	/* No FNM_PATHNAME: sandbox names are not paths, '*' spans anything. */
	for (i = 0; i < cfg->n_sandboxes; i++)
		if (fnmatch(cfg->sandboxes[i].name, name, 0) == 0)
			return &cfg->sandboxes[i];
	return NULL;
}

/* Three-valued match: with no address yet, a rule with cidrs is undecided. */
enum pol_m3 { M_NO, M_YES, M_MAYBE };

struct pol_scan {
	const struct pol_query *q;
	size_t name_len;
	int guard;      /* the name resolved to an internal address */
	int pending;    /* an undecided rule was passed on the way */
	int pending_allow;
	const struct pol_rule *hit;     /* first definite match */
	const struct pol_rule *guarded; /* first domain-only allow the guard skipped */
};

static enum pol_m3 pol_rule_match(const struct pol_rule *r, const struct pol_scan *s)
{
	const struct pol_query *q = s->q;
	size_t i;
	int ok;

	if (!pol_rule_port_ok(r, q->port))
		return M_NO;
	if (r->n_domains) {
		ok = 0;
		for (i = 0; i < r->n_domains && !ok; i++)
			ok = pol_domain_match(&r->domains[i], q->name, s->name_len);
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
	return M_YES;
}

/* Scan one rule list; returns 1 and sets s->hit on the first definite match. */
static int pol_scan_set(struct pol_scan *s, const struct pol_ruleset *rs, int allow)
{
	size_t i;

	for (i = 0; i < rs->n; i++) {
		const struct pol_rule *r = &rs->rules[i];

		switch (pol_rule_match(r, s)) {
		case M_NO:
			break;
		case M_MAYBE:
			s->pending = 1;
			if (allow)
				s->pending_allow = 1;
			break;
		case M_YES:
			/* A domain rule never unlocks an internal address: keep
			 * looking for a cidrs rule that does (DNS rebinding). */
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

/* The sandbox's own rules, then each of its profiles' in listed order. */
static int pol_scan_sandbox(struct pol_scan *s, const struct pol_sandbox *sbx, int allow)
{
	size_t i;

	if (pol_scan_set(s, allow ? &sbx->allow : &sbx->deny, allow))
		return 1;
	for (i = 0; i < sbx->n_profiles; i++) {
		const struct pol_profile *p = sbx->profiles[i];

		if (pol_scan_set(s, allow ? &p->allow : &p->deny, allow))
			return 1;
	}
	return 0;
}

static void pol_verdict_set(struct pol_verdict *v, enum pol_decision d,
			    const char *reason, const struct pol_rule *r)
{
	v->decision = d;
	v->reason = reason;
	v->rule = r;
	v->rule_id = r ? r->id : NULL;
}

/*
 * pol_eval() as documented in pol.h, with these precise rules:
 *
 * Matching is three-valued. With q->addr NULL, a rule whose port and
 * domain conditions hold but which has cidrs is "undecided". The scan goes
 * floor deny, sandbox deny (own, profiles'), allow (own, profiles'), then
 * the default, and stops at the first definite match; undecided rules
 * passed on the way are "pending".
 *
 * POL_NEED_ADDR (q->addr NULL only): the scan ended in an outcome that some
 * address could change, and a rule is pending. Outcomes no address can
 * change are returned as they are, pending rules or not:
 *   - a floor deny (every mode);
 *   - a sandbox deny in enforce mode;
 *   - the default deny in enforce mode, or for an unknown source, when no
 *     allow rule is pending (pending deny rules can only deny too).
 * Everything else with a pending rule - an allow, an audit-mode would_deny,
 * a default allow - is POL_NEED_ADDR: resolve, then ask again per address.
 *
 * POL_ALLOW with q->addr NULL means "the name is allowed": the caller must
 * still resolve and call again with each address it would connect to, so
 * that the floor's cidrs and the internal-address guard see it.
 *
 * The internal-address guard applies when q->name and q->addr are both set,
 * the address is internal (sg_addr_is_internal) and not q->addr_static: the
 * only allow that may then stand is one by a rule with cidrs (which contain
 * the address, or the rule would not match). A domain-only allow rule is
 * skipped, the scan goes on to later allow rules, and if none with cidrs
 * allows, the verdict is POL_DENY "internal_address" with the skipped rule.
 * A default allow or an audit-mode would_deny for such a query is likewise
 * POL_DENY "internal_address" (rule: the sandbox deny rule, or NULL). It is
 * enforced in every mode. A query without a name (an IP the sandbox chose)
 * is judged by cidr rules and the default only; the guard is about names.
 *
 * Unknown source (q->sbx NULL): the floor, then the default with reason
 * "unknown_source". by_domain is set for an allow by a rule without cidrs.
 * NEED_ADDR carries reason "need_addr" and no rule.
 */
void pol_eval(const struct sg_config *cfg, const struct pol_query *q,
	      struct pol_verdict *v)
{
	const struct pol_sandbox *sbx = q->sbx;
	struct pol_scan s;
	int audit = sbx && sbx->mode == POL_MODE_AUDIT;

	memset(v, 0, sizeof(*v));
	memset(&s, 0, sizeof(s));
	s.q = q;
	s.name_len = q->name ? strlen(q->name) : 0;
	s.guard = q->name && q->addr && !q->addr_static &&
		  sg_addr_is_internal(q->addr);

	if (pol_scan_set(&s, &cfg->floor_deny, 0)) {
		pol_verdict_set(v, POL_DENY, "floor_deny", s.hit);
		return;
	}

	if (!sbx) {
		if (!cfg->default_allow)
			pol_verdict_set(v, POL_DENY, "unknown_source", NULL);
		else if (s.pending)
			pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
		else if (s.guard)
			pol_verdict_set(v, POL_DENY, "internal_address", NULL);
		else
			pol_verdict_set(v, POL_ALLOW, "unknown_source", NULL);
		return;
	}

	if (pol_scan_sandbox(&s, sbx, 0)) {
		if (!audit)
			pol_verdict_set(v, POL_DENY, "rule_deny", s.hit);
		else if (s.pending)
			pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
		else if (s.guard)
			pol_verdict_set(v, POL_DENY, "internal_address", s.hit);
		else {
			pol_verdict_set(v, POL_ALLOW, "rule_deny", s.hit);
			v->would_deny = 1;
		}
		return;
	}

	if (pol_scan_sandbox(&s, sbx, 1)) {
		if (s.pending) {
			pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
		} else {
			pol_verdict_set(v, POL_ALLOW, "rule_allow", s.hit);
			v->by_domain = s.hit->n_cidrs == 0;
		}
		return;
	}

	/* No allow rule matched; s.guarded implies an address, so no pending. */
	if (s.guarded) {
		pol_verdict_set(v, POL_DENY, "internal_address", s.guarded);
		return;
	}
	if (!cfg->default_allow && !audit) {
		if (s.pending_allow)
			pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
		else
			pol_verdict_set(v, POL_DENY, "default_deny", NULL);
		return;
	}
	if (s.pending) {
		pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
	} else if (s.guard) {
		pol_verdict_set(v, POL_DENY, "internal_address", NULL);
	} else if (!cfg->default_allow) {
		pol_verdict_set(v, POL_ALLOW, "default_deny", NULL);
		v->would_deny = 1;
	} else {
		pol_verdict_set(v, POL_ALLOW, "default_allow", NULL);
	}
}
