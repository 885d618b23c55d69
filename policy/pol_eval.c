/*
 * pol_eval.c - policy evaluation over a loaded, compiled struct sg_config.
 *
 * Everything here reads the config, its index (pol_index.c) and the query
 * and allocates nothing, so it can run on every connection of every worker
 * against a shared snapshot. The one exception is PCRE2's match data: one
 * block per thread, made the first time that thread runs a regex and freed
 * when it exits (a pthread key destructor), so callers need not know.
 *
 * Results are those of scanning every rule list in order with the
 * three-valued rule match below (pol_eval's comment has the rules); the
 * indexes only find, per list, the few rules that could match and the
 * first of them that does.
 */
#include <fnmatch.h>
#include <pthread.h>
#include <string.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol_int.h"
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

/* ---- regex: match data per thread ----------------------------------- */

static pthread_once_t md_once = PTHREAD_ONCE_INIT;
static pthread_key_t md_key;
static int md_key_ok;
static __thread pcre2_match_data *md;

static void md_destroy(void *p)
{
	pcre2_match_data_free(p);
}

static void md_init(void)
{
	md_key_ok = pthread_key_create(&md_key, md_destroy) == 0;
}

static pcre2_match_data *md_get(void)
{
	if (md)
		return md;
	pthread_once(&md_once, md_init);
	/* One pair is enough: we ask whether, not where. */
	md = pcre2_match_data_create(1, NULL);
	if (md && md_key_ok)
		pthread_setspecific(md_key, md);
	return md;
}

int pol_regex_match(const struct pol_regex *re, const char *name, size_t len)
{
	pcre2_match_data *m = md_get();
	int rc;

	if (!name)
		return 0;
	if (!m)
		return SG_ERROR;
	if (re->jit)
		rc = pcre2_jit_match(re->code, (PCRE2_SPTR)name, len, 0, 0, m, NULL);
	else
		rc = pcre2_match(re->code, (PCRE2_SPTR)name, len, 0, 0, m, NULL);
	/* 0: matched, the (one-pair) ovector was too small to say more */
	if (rc >= 0)
		return 1;
	return rc == PCRE2_ERROR_NOMATCH ? 0 : SG_ERROR;
}

int pol_rule_port_ok(const struct pol_rule *r, uint16_t port)
{
	size_t i;

	if (r->n_ports == 0)
		return pol_rule_has_name(r) ? port == 443 : 1;
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

/* ---- one query against the index ------------------------------------ */

/* Three-valued match: with no address yet, an address condition is undecided. */
enum pol_m3 { M_NO, M_YES, M_MAYBE };

/* A name has at most 127 labels (253 bytes), plus the root. */
#define POL_MAX_SUFFIXES 128

struct pol_ectx {
	const struct pol_index *ix;
	const struct pol_query *q;
	size_t name_len;
	size_t first_dot;               /* of the name, or SIZE_MAX */
	int guard;                      /* the name resolved to an internal address */
	/* suffix nodes of the name that have refs, and where each starts */
	uint32_t nnode[POL_MAX_SUFFIXES];
	uint32_t noff[POL_MAX_SUFFIXES];
	size_t n_name;
	/* prefixes containing the address, innermost first */
	const struct pol_cfam *fam;
	uint32_t chain[130];
	size_t n_chain;
	int geo_done;
	uint32_t cc, asn;
};

/* The lowest matching rule of one list, its lowest undecided one, and
 * (internal-address guard) its lowest allow that the guard skips. */
struct pol_rsout {
	uint32_t yes, maybe, guarded;
};

static void ectx_init(struct pol_ectx *e, const struct sg_config *cfg,
		      const struct pol_query *q)
{
	const struct pol_index *ix = cfg->index;
	const char *name = q->name;
	uint64_t h = POL_H0;
	struct pol_ckey k;
	const char *dot;
	uint32_t n;
	size_t i;

	e->ix = ix;
	e->q = q;
	e->n_name = e->n_chain = 0;
	e->geo_done = 0;
	e->fam = NULL;
	e->name_len = name ? strlen(name) : 0;
	e->guard = q->name && q->addr && !q->addr_static && sg_addr_is_internal(q->addr);
	/* Hashes of every suffix in one pass from the right; a name longer
	 * than a host name can be is not one and matches no pattern. */
	if (name && e->name_len && e->name_len <= SG_HOST_MAX) {
		dot = memchr(name, '.', e->name_len);
		e->first_dot = dot ? (size_t)(dot - name) : SIZE_MAX;
		for (i = e->name_len; i > 0; i--) {
			h = pol_hstep(h, (unsigned char)name[i - 1]);
			if (i > 1 && name[i - 2] != '.')
				continue;
			n = pol_dindex_find(ix, name + i - 1, e->name_len - i + 1, pol_hfin(h));
			if (n != POL_NONE && ix->dnodes[n].nref && e->n_name < POL_MAX_SUFFIXES - 1) {
				e->nnode[e->n_name] = n;
				e->noff[e->n_name++] = (uint32_t)(i - 1);
			}
		}
		if (ix->dnodes[0].nref) {
			e->nnode[e->n_name] = 0;
			e->noff[e->n_name++] = (uint32_t)e->name_len;
		}
	}
	if (q->addr) {
		e->fam = pol_cfam_of(ix, q->addr, &k);
		for (n = pol_cfam_find(e->fam, &k); n != POL_NONE && e->n_chain < 130;
		     n = e->fam->nodes[n].parent)
			e->chain[e->n_chain++] = n;
	}
}

int pol_u32_in(const uint32_t *a, size_t n, uint32_t v)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && a[lo] == v;
}

/* Is rule idx of list rs among the prefixes containing the address? */
static int chain_has(const struct pol_ectx *e, uint32_t rs, uint32_t idx)
{
	size_t i, cnt, lo, hi;

	for (i = 0; i < e->n_chain; i++) {
		const struct pol_cnode *c = &e->fam->nodes[e->chain[i]];
		const struct pol_ref *r = pol_refs_of(e->fam->refs + c->ref0, c->nref, rs, &cnt);

		for (lo = 0, hi = cnt; lo < hi;) {
			size_t mid = lo + (hi - lo) / 2;

			if (r[mid].rule < idx)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < cnt && r[lo].rule == idx)
			return 1;
	}
	return 0;
}

static void ectx_geo(struct pol_ectx *e, const struct sg_config *cfg)
{
	if (!e->geo_done) {
		pol_geo_find(cfg->geo, e->q->addr, &e->cc, &e->asn);
		e->geo_done = 1;
	}
}

/* Everything but the name condition (known to hold, or absent). */
static enum pol_m3 rule_rest(struct pol_ectx *e, const struct sg_config *cfg,
			     uint32_t rs, uint32_t idx, const struct pol_rule *r)
{
	if (!pol_rule_port_ok(r, e->q->port))
		return M_NO;
	if (r->n_cidrs) {
		if (!e->q->addr)
			return M_MAYBE;
		if (!chain_has(e, rs, idx))
			return M_NO;
	}
	if (r->n_countries || r->n_asns) {
		if (!e->q->addr)
			return M_MAYBE;
		ectx_geo(e, cfg);
		if (r->n_countries && (!e->cc || !pol_u32_in(r->cc_sorted, r->n_countries, e->cc)))
			return M_NO;
		if (r->n_asns && (!e->asn || !pol_u32_in(r->asn_sorted, r->n_asns, e->asn)))
			return M_NO;
	}
	return M_YES;
}

static void consider(struct pol_ectx *e, const struct sg_config *cfg,
		     const struct pol_ruleset *rs, uint32_t idx, int allow,
		     struct pol_rsout *o)
{
	const struct pol_rule *r = &rs->rules[idx];

	switch (rule_rest(e, cfg, rs->id, idx, r)) {
	case M_NO:
		break;
	case M_MAYBE:
		if (idx < o->maybe)
			o->maybe = idx;
		break;
	case M_YES:
		/* A domain rule never unlocks an internal address: the scan
		 * goes on to a cidrs rule that does (DNS rebinding). */
		if (allow && e->guard && !r->n_cidrs) {
			if (idx < o->guarded)
				o->guarded = idx;
		} else if (idx < o->yes) {
			o->yes = idx;
		}
		break;
	}
}

/* Does a domain ref at suffix node k apply to the name? */
static int dref_applies(const struct pol_ectx *e, const struct pol_ref *r, size_t k)
{
	uint32_t off = e->noff[k];

	switch (r->kind) {
	case POL_REF_EXACT:
		return off == 0;
	case POL_REF_ONE:
		return off > 0 && off - 1 == e->first_dot;
	case POL_REF_MANY:
		return off > 0 && e->nnode[k] != 0;
	default:
		return 0;
	}
}

/*
 * A regex filed at node k: the labels in front of the node must end with
 * the part of its tail before the first dot (at the root: the name must
 * end with the whole tail).
 */
static int regex_candidate(const struct pol_ectx *e, const struct pol_regex *re, size_t k)
{
	const char *name = e->q->name;
	size_t front, hl;

	if (!re->tail)
		return 1;
	if (e->nnode[k] == 0) {
		front = e->name_len;
		hl = re->tail_len;
	} else {
		if (e->noff[k] == 0)
			return 0;
		front = e->noff[k] - 1;
		hl = (size_t)((const char *)memchr(re->tail, '.', re->tail_len) - re->tail);
	}
	return front >= hl && !memcmp(name + front - hl, re->tail, hl);
}

static uint32_t pstep_find(const struct pol_rsx *x, uint16_t port)
{
	size_t lo = 0, hi = x->n_steps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->steps[mid].lo <= port)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? x->steps[lo - 1].rule : POL_NONE;
}

static void geo_candidates(struct pol_ectx *e, const struct sg_config *cfg,
			   const struct pol_ruleset *rs, int allow, struct pol_rsout *o)
{
	const struct pol_index *ix = e->ix;
	size_t part, lo, hi, base, n;
	uint32_t key;

	ectx_geo(e, cfg);
	for (part = 0; part < 2; part++) {
		key = part ? e->asn : e->cc;
		base = part ? ix->n_gcc : 0;
		n = part ? ix->n_gasn : ix->n_gcc;
		if (!key)
			continue;
		for (lo = 0, hi = n; lo < hi;) {
			size_t mid = lo + (hi - lo) / 2;
			const struct pol_gref *g = &ix->grefs[base + mid];

			if (g->key < key || (g->key == key && g->rs < rs->id))
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < n && ix->grefs[base + lo].key == key &&
		       ix->grefs[base + lo].rs == rs->id; lo++)
			if (ix->grefs[base + lo].rule < o->yes)
				consider(e, cfg, rs, ix->grefs[base + lo].rule, allow, o);
	}
}

/*
 * One rule list: cheap candidates first (domain patterns, the address's
 * prefixes, its country and AS), then regexes, and those only for rules
 * before the best match so far: a regex after it cannot change anything.
 */
static void rs_eval(struct pol_ectx *e, const struct sg_config *cfg,
		    const struct pol_ruleset *rs, int allow, struct pol_rsout *o)
{
	const struct pol_index *ix = e->ix;
	const struct pol_rsx *x;
	const struct pol_ref *r;
	size_t k, i, cnt;
	uint32_t m;
	int rc;

	o->yes = o->maybe = o->guarded = POL_NONE;
	if (!rs->n)
		return;
	x = &ix->rsx[rs->id];
	for (k = 0; k < e->n_name; k++) {
		const struct pol_dnode *dn = &ix->dnodes[e->nnode[k]];

		r = pol_refs_of(ix->drefs + dn->ref0, dn->nref, rs->id, &cnt);
		for (i = 0; i < cnt && r[i].rule < o->yes; i++)
			if (dref_applies(e, &r[i], k))
				consider(e, cfg, rs, r[i].rule, allow, o);
	}
	if (e->q->addr) {
		for (k = 0; k < e->n_chain; k++) {
			const struct pol_cnode *c = &e->fam->nodes[e->chain[k]];

			r = pol_refs_of(e->fam->refs + c->ref0, c->nref, rs->id, &cnt);
			for (i = 0; i < cnt && r[i].rule < o->yes; i++)
				if (r[i].kind == POL_REF_CIDR_DRIVER)
					consider(e, cfg, rs, r[i].rule, allow, o);
		}
		if (x->n_geo)
			geo_candidates(e, cfg, rs, allow, o);
	} else if (x->steps) {
		m = pstep_find(x, e->q->port);
		if (m < o->maybe)
			o->maybe = m;
	}
	for (k = 0; k < e->n_name; k++) {
		const struct pol_dnode *dn = &ix->dnodes[e->nnode[k]];

		r = pol_refs_of(ix->drefs + dn->ref0, dn->nref, rs->id, &cnt);
		for (i = 0; i < cnt && r[i].rule < o->yes; i++) {
			const struct pol_rule *rule = &rs->rules[r[i].rule];
			const struct pol_regex *re;

			if (r[i].kind != POL_REF_REGEX || !pol_rule_port_ok(rule, e->q->port))
				continue;
			re = &rule->regex[r[i].aux];
			if (!regex_candidate(e, re, k))
				continue;
			rc = pol_regex_match(re, e->q->name, e->name_len);
			/* PCRE2 gave up: fail closed, a deny matches, an allow not */
			if (rc < 0)
				rc = !allow;
			if (rc)
				consider(e, cfg, rs, r[i].rule, allow, o);
		}
	}
}

struct pol_scan {
	int pending;    /* an undecided rule was passed on the way */
	int pending_allow;
	const struct pol_rule *hit;     /* first definite match */
	const struct pol_rule *guarded; /* first domain-only allow the guard skipped */
};

/* Fold one list into the scan; 1 when a rule of it stops the scan. */
static int scan_set(struct pol_ectx *e, const struct sg_config *cfg,
		    struct pol_scan *s, const struct pol_ruleset *rs, int allow)
{
	struct pol_rsout o;

	rs_eval(e, cfg, rs, allow, &o);
	if (o.maybe < o.yes) {
		s->pending = 1;
		if (allow)
			s->pending_allow = 1;
	}
	if (o.guarded < o.yes && !s->guarded)
		s->guarded = &rs->rules[o.guarded];
	if (o.yes == POL_NONE)
		return 0;
	s->hit = &rs->rules[o.yes];
	return 1;
}

/* The sandbox's own rules, then each of its profiles' in listed order. */
static int scan_sandbox(struct pol_ectx *e, const struct sg_config *cfg,
			struct pol_scan *s, const struct pol_sandbox *sbx, int allow)
{
	size_t i;

	if (scan_set(e, cfg, s, allow ? &sbx->allow : &sbx->deny, allow))
		return 1;
	for (i = 0; i < sbx->n_profiles; i++) {
		const struct pol_profile *p = sbx->profiles[i];

		if (scan_set(e, cfg, s, allow ? &p->allow : &p->deny, allow))
			return 1;
	}
	return 0;
}

static void pol_verdict_set(struct pol_verdict *v, enum pol_decision d,
			    const char *reason, const struct pol_rule *r)
{
	/* every NEED_ADDR but one (the default deny, below) is an allow an
	 * address rule could still turn */
	v->name_allowed = d == POL_NEED_ADDR;
	v->decision = d;
	v->reason = reason;
	v->rule = r;
	v->rule_id = r ? r->id : NULL;
}

/*
 * pol_eval() as documented in pol.h, with these precise rules:
 *
 * Matching is three-valued. With q->addr NULL, a rule whose port and
 * name conditions hold but which has cidrs, countries or asns is
 * "undecided". The scan goes floor deny, sandbox deny (own, profiles'),
 * allow (own, profiles'), then the default, and stops at the first
 * definite match; undecided rules passed on the way are "pending".
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
 * the address, or the rule would not match). An allow rule without cidrs
 * is skipped, the scan goes on to later allow rules, and if none with cidrs
 * allows, the verdict is POL_DENY "internal_address" with the skipped rule.
 * A default allow or an audit-mode would_deny for such a query is likewise
 * POL_DENY "internal_address" (rule: the sandbox deny rule, or NULL). It is
 * enforced in every mode. A query without a name (an IP the sandbox chose)
 * is judged by address rules and the default only; the guard is about names.
 *
 * A regex that PCRE2 gives up on (match limit) matches in a deny list and
 * not in an allow list: fail closed either way.
 *
 * Unknown source (q->sbx NULL): the floor, then the default with reason
 * "unknown_source". by_domain is set for an allow by a rule without cidrs.
 * NEED_ADDR carries reason "need_addr" and no rule.
 */
void pol_eval(const struct sg_config *cfg, const struct pol_query *q,
	      struct pol_verdict *v)
{
	const struct pol_sandbox *sbx = q->sbx;
	struct pol_ectx e;
	struct pol_scan s;
	int audit = sbx && sbx->mode == POL_MODE_AUDIT;

	memset(v, 0, sizeof(*v));
	memset(&s, 0, sizeof(s));
	ectx_init(&e, cfg, q);

	if (scan_set(&e, cfg, &s, &cfg->floor_deny, 0)) {
		pol_verdict_set(v, POL_DENY, "floor_deny", s.hit);
		return;
	}

	if (!sbx) {
		if (!cfg->default_allow)
			pol_verdict_set(v, POL_DENY, "unknown_source", NULL);
		else if (s.pending)
			pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
		else if (e.guard)
			pol_verdict_set(v, POL_DENY, "internal_address", NULL);
		else
			pol_verdict_set(v, POL_ALLOW, "unknown_source", NULL);
		return;
	}

	if (scan_sandbox(&e, cfg, &s, sbx, 0)) {
		if (!audit)
			pol_verdict_set(v, POL_DENY, "rule_deny", s.hit);
		else if (s.pending)
			pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
		else if (e.guard)
			pol_verdict_set(v, POL_DENY, "internal_address", s.hit);
		else {
			pol_verdict_set(v, POL_ALLOW, "rule_deny", s.hit);
			v->would_deny = 1;
		}
		return;
	}

	if (scan_sandbox(&e, cfg, &s, sbx, 1)) {
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
		if (s.pending_allow) {
			pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
			v->name_allowed = 0;
		} else
			pol_verdict_set(v, POL_DENY, "default_deny", NULL);
		return;
	}
	if (s.pending) {
		pol_verdict_set(v, POL_NEED_ADDR, "need_addr", NULL);
	} else if (e.guard) {
		pol_verdict_set(v, POL_DENY, "internal_address", NULL);
	} else if (!cfg->default_allow) {
		pol_verdict_set(v, POL_ALLOW, "default_deny", NULL);
		v->would_deny = 1;
	} else {
		pol_verdict_set(v, POL_ALLOW, "default_allow", NULL);
	}
}
