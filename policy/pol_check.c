/*
 * pol_check.c - `sandgate policy check` warnings over a loaded config.
 *
 * A config that loads is valid; these are the things in a valid config
 * that are almost certainly not what its author meant:
 *   - a pattern, CIDR, country, AS number or port written twice in a rule,
 *     and a rule that repeats an earlier rule of its list;
 *   - a rule that can never match because earlier deny rules (the floor,
 *     the sandbox's or profile's own deny list) match everything it does;
 *   - an allowed domain pattern part of which the floor denies (a wildcard
 *     wider than the organisation allows), or all of it;
 *   - a sandbox that is never chosen: an earlier glob matches every name
 *     it does and earlier sources cover its own;
 *   - a profile no sandbox uses.
 *
 * Precise and conservative: a warning is given only when it is certain.
 * "Covers" is decided condition by condition: names (a pattern inside
 * another; an exact name a regex matches; an identical regex), ports,
 * prefixes, countries and AS numbers; anything undecidable (two different
 * regexes) counts as not covered. Each warning carries the line and column
 * of what it is about; they are handed out sorted by position.
 */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

/* Past this many (name x prefix) pairs a rule is not analysed for cover. */
#define CHK_MAX_ATOMS 4096
/* Covering rules named in one message. */
#define CHK_MAX_NAMED 3

struct chk_warn {
	int line, col;
	size_t seq;
	char *msg;              /* owned */
};

/* An earlier list and how much of it comes before the rule in question. */
struct chk_pred {
	const struct pol_ruleset *rs;
	size_t limit;
};

/* A floor pattern that denies by name alone, keyed by its labels reversed. */
struct chk_frev {
	char *rev;              /* owned: "com.example.internal" */
	size_t len;
	const struct pol_rule *r;
	const struct pol_domain *d;
};

struct chk {
	const struct sg_config *cfg;
	const struct pol_index *ix;
	struct chk_warn *w;     /* owned */
	size_t n, cap;
	int oom;
	struct chk_frev *fr;    /* owned */
	size_t n_fr;
};

__attribute__((format(printf, 4, 5)))
static void chk_warn(struct chk *k, int line, int col, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (k->n == k->cap) {
		size_t cap = k->cap ? 2 * k->cap : 32;
		struct chk_warn *w = realloc(k->w, cap * sizeof(*w));

		if (!w) {
			k->oom = 1;
			return;
		}
		k->w = w;
		k->cap = cap;
	}
	k->w[k->n].msg = strdup(msg);
	if (!k->w[k->n].msg) {
		k->oom = 1;
		return;
	}
	k->w[k->n].line = line;
	k->w[k->n].col = col;
	k->w[k->n].seq = k->n;
	k->n++;
}

/* ---- printing what a rule names ------------------------------------- */

static const char *dom_str(const struct pol_domain *d, char *buf, size_t sz)
{
	snprintf(buf, sz, "%s%s", d->kind == POL_DOM_MANY ? "**." :
		 d->kind == POL_DOM_ONE ? "*." : "", d->suffix);
	return buf;
}

static const char *cidr_str(const struct pol_cidr *c, char *buf, size_t sz)
{
	char ip[INET6_ADDRSTRLEN];

	snprintf(buf, sz, "%s/%d", sg_addr_str(&c->addr, ip, sizeof(ip)), c->plen);
	return buf;
}

/* ---- duplicates inside a rule --------------------------------------- */

struct chk_hidx {
	uint64_t h;
	size_t i;
};

static int cmp_hidx(const void *pa, const void *pb)
{
	const struct chk_hidx *a = pa, *b = pb;

	if (a->h != b->h)
		return a->h < b->h ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

static uint64_t bytes_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		h = pol_hstep(h, *b++);
	return h;
}

/* Element i of one kind of list in a rule, as bytes that compare equal
 * exactly when the elements do. */
enum chk_elem { E_DOMAIN, E_REGEX, E_CIDR, E_COUNTRY, E_ASN, E_PORT, E_N };

static size_t elem_count(const struct pol_rule *r, enum chk_elem e)
{
	switch (e) {
	case E_DOMAIN: return r->n_domains;
	case E_REGEX: return r->n_regex;
	case E_CIDR: return r->n_cidrs;
	case E_COUNTRY: return r->n_countries;
	case E_ASN: return r->n_asns;
	default: return r->n_ports;
	}
}

static uint64_t elem_hash(const struct pol_rule *r, enum chk_elem e, size_t i)
{
	uint64_t h = pol_hstep(POL_H0, (unsigned char)e);
	uint32_t v[2];

	switch (e) {
	case E_DOMAIN:
		h = pol_hstep(h, (unsigned char)r->domains[i].kind);
		return pol_hfin(bytes_hash(h, r->domains[i].suffix, r->domains[i].suffix_len));
	case E_REGEX:
		return pol_hfin(bytes_hash(h, r->regex[i].pattern, strlen(r->regex[i].pattern)));
	case E_CIDR:
		h = bytes_hash(h, &r->cidrs[i].plen, sizeof(int));
		h = pol_hstep(h, (unsigned char)r->cidrs[i].addr.family);
		return pol_hfin(r->cidrs[i].addr.family == AF_INET ?
				bytes_hash(h, &r->cidrs[i].addr.u.v4, 4) :
				bytes_hash(h, &r->cidrs[i].addr.u.v6, 16));
	case E_COUNTRY:
		return pol_hfin(bytes_hash(h, &r->countries[i].v, 4));
	case E_ASN:
		return pol_hfin(bytes_hash(h, &r->asns[i].v, 4));
	default:
		v[0] = r->ports[i].lo;
		v[1] = r->ports[i].hi;
		return pol_hfin(bytes_hash(h, v, sizeof(v)));
	}
}

static int elem_eq(const struct pol_rule *r, enum chk_elem e, size_t i, size_t j)
{
	switch (e) {
	case E_DOMAIN:
		return r->domains[i].kind == r->domains[j].kind &&
		       !strcmp(r->domains[i].suffix, r->domains[j].suffix);
	case E_REGEX:
		return !strcmp(r->regex[i].pattern, r->regex[j].pattern);
	case E_CIDR:
		return r->cidrs[i].plen == r->cidrs[j].plen &&
		       sg_addr_eq(&r->cidrs[i].addr, &r->cidrs[j].addr);
	case E_COUNTRY:
		return r->countries[i].v == r->countries[j].v;
	case E_ASN:
		return r->asns[i].v == r->asns[j].v;
	default:
		return r->ports[i].lo == r->ports[j].lo && r->ports[i].hi == r->ports[j].hi;
	}
}

static void elem_where(const struct pol_rule *r, enum chk_elem e, size_t i,
		       int *line, int *col, char *buf, size_t sz)
{
	switch (e) {
	case E_DOMAIN:
		*line = r->domains[i].line, *col = r->domains[i].col;
		snprintf(buf, sz, "domain \"%s%s\"", r->domains[i].kind == POL_DOM_MANY ? "**." :
			 r->domains[i].kind == POL_DOM_ONE ? "*." : "", r->domains[i].suffix);
		break;
	case E_REGEX:
		*line = r->regex[i].line, *col = r->regex[i].col;
		snprintf(buf, sz, "regex \"%s\"", r->regex[i].pattern);
		break;
	case E_CIDR: {
		char c[64];

		*line = r->cidrs[i].line, *col = r->cidrs[i].col;
		snprintf(buf, sz, "CIDR %s", cidr_str(&r->cidrs[i], c, sizeof(c)));
		break;
	}
	case E_COUNTRY:
		*line = r->countries[i].line, *col = r->countries[i].col;
		snprintf(buf, sz, "country %c%c", (char)(r->countries[i].v >> 8),
			 (char)(r->countries[i].v & 0xff));
		break;
	case E_ASN:
		*line = r->asns[i].line, *col = r->asns[i].col;
		snprintf(buf, sz, "AS%u", (unsigned)r->asns[i].v);
		break;
	default:
		*line = r->ports[i].line, *col = r->ports[i].col;
		if (r->ports[i].lo == r->ports[i].hi)
			snprintf(buf, sz, "port %u", r->ports[i].lo);
		else
			snprintf(buf, sz, "ports %u-%u", r->ports[i].lo, r->ports[i].hi);
		break;
	}
}

/* Hash, sort, and compare neighbours: O(n log n) for rules of any size. */
static void chk_rule_dups(struct chk *k, const struct pol_rule *r)
{
	struct chk_hidx *hx;
	enum chk_elem e;
	size_t n, i, j, a, b;
	char what[600];
	int line, col, fl, fc;

	for (e = 0; e < E_N; e++) {
		n = elem_count(r, e);
		if (n < 2)
			continue;
		hx = malloc(n * sizeof(*hx));
		if (!hx) {
			k->oom = 1;
			return;
		}
		for (i = 0; i < n; i++)
			hx[i] = (struct chk_hidx){ elem_hash(r, e, i), i };
		qsort(hx, n, sizeof(*hx), cmp_hidx);
		for (a = 0; a < n; a = b) {
			for (b = a + 1; b < n && hx[b].h == hx[a].h; b++)
				;
			/* within a run of equal hashes (a collision is rare),
			 * each element against the earliest equal one */
			for (j = a + 1; j < b; j++)
				for (i = a; i < j; i++) {
					if (!elem_eq(r, e, hx[i].i, hx[j].i))
						continue;
					elem_where(r, e, hx[i].i, &fl, &fc, what, sizeof(what));
					elem_where(r, e, hx[j].i, &line, &col, what, sizeof(what));
					chk_warn(k, line, col, "duplicate %s in %s (first at line %d)",
						 what, r->id, fl);
					break;
				}
		}
		free(hx);
	}
}

static int cmp_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

	return a < b ? -1 : a > b;
}

/*
 * Order-free fingerprint of a rule's conditions: per kind, its sorted
 * distinct element hashes, hashed in turn. Two rules with the same one
 * match the same queries (64-bit hashes: a false "duplicate" would need a
 * collision between two real rules).
 */
static int rule_sig(const struct pol_rule *r, uint64_t *sig)
{
	uint64_t h = POL_H0, *v;
	enum chk_elem e;
	size_t n, i;

	for (e = 0; e < E_N; e++) {
		n = elem_count(r, e);
		v = malloc((n ? n : 1) * sizeof(*v));
		if (!v)
			return SG_ENOMEM;
		for (i = 0; i < n; i++)
			v[i] = elem_hash(r, e, i);
		qsort(v, n, sizeof(*v), cmp_u64);
		h = pol_hstep(h, (unsigned char)(0xf0 | e));
		for (i = 0; i < n; i++)
			if (!i || v[i] != v[i - 1])
				h = bytes_hash(h, &v[i], sizeof(v[i]));
		free(v);
	}
	*sig = pol_hfin(pol_hstep(h, (unsigned char)r->tls));
	return 0;
}

/* dup[i] = 1 for a rule that repeats an earlier one of its list. */
static void chk_list_dups(struct chk *k, const struct pol_ruleset *rs, unsigned char *dup)
{
	struct chk_hidx *hx;
	size_t i, j;

	if (rs->n < 2)
		return;
	hx = malloc(rs->n * sizeof(*hx));
	if (!hx) {
		k->oom = 1;
		return;
	}
	for (i = 0; i < rs->n; i++) {
		hx[i].i = i;
		if (rule_sig(&rs->rules[i], &hx[i].h)) {
			k->oom = 1;
			free(hx);
			return;
		}
	}
	qsort(hx, rs->n, sizeof(*hx), cmp_hidx);
	for (i = 0; i < rs->n; i = j) {
		for (j = i + 1; j < rs->n && hx[j].h == hx[i].h; j++) {
			const struct pol_rule *a = &rs->rules[hx[i].i], *b = &rs->rules[hx[j].i];

			dup[hx[j].i] = 1;
			chk_warn(k, b->line, b->col, "%s repeats %s (line %d) and can never "
				 "match", b->id, a->id, a->line);
		}
	}
	free(hx);
}

/* ---- ports and other conditions ------------------------------------- */

struct chk_range {
	uint32_t lo, hi;
};

/* The ports a rule applies to (pol_rule_port_ok's defaults), as ranges. */
static size_t rule_ports(const struct pol_rule *r, const struct chk_range **out,
			 struct chk_range *one)
{
	if (!r->n_ports) {
		one->lo = pol_rule_has_name(r) ? 443 : 0;
		one->hi = pol_rule_has_name(r) ? 443 : 65535;
		*out = one;
		return 1;
	}
	*out = NULL;
	return r->n_ports;
}

static struct chk_range port_at(const struct pol_rule *r, const struct chk_range *def,
				size_t i)
{
	struct chk_range x;

	if (def)
		return *def;
	x.lo = r->ports[i].lo;
	x.hi = r->ports[i].hi;
	return x;
}

/* Is every port of r also a port of d? */
static int ports_within(const struct pol_rule *r, const struct pol_rule *d)
{
	const struct chk_range *rd, *dd;
	struct chk_range r1, d1, x, y;
	size_t nr = rule_ports(r, &rd, &r1), nd = rule_ports(d, &dd, &d1), i, j;
	uint32_t cur, best;

	for (i = 0; i < nr; i++) {
		x = port_at(r, rd, i);
		/* walk up from x.lo through d's ranges, as far as they reach */
		for (cur = x.lo; cur <= x.hi;) {
			best = 0;
			for (j = 0; j < nd; j++) {
				y = port_at(d, dd, j);
				if (y.lo <= cur && y.hi >= cur && y.hi + 1 > best)
					best = y.hi + 1;
			}
			if (!best)
				return 0;
			cur = best;
		}
	}
	return 1;
}

static int ports_overlap(const struct pol_rule *r, const struct pol_rule *d)
{
	const struct chk_range *rd, *dd;
	struct chk_range r1, d1, x, y;
	size_t nr = rule_ports(r, &rd, &r1), nd = rule_ports(d, &dd, &d1), i, j;

	for (i = 0; i < nr; i++)
		for (j = 0; j < nd; j++) {
			x = port_at(r, rd, i);
			y = port_at(d, dd, j);
			if (x.lo <= y.hi && y.lo <= x.hi)
				return 1;
		}
	return 0;
}

/* Does d's set of countries (or AS numbers) contain r's? */
static int geo_within(const struct pol_geo_code *rv, size_t nr, const uint32_t *dsorted,
		      size_t nd)
{
	size_t i;

	if (!nd)
		return 1;
	if (!nr)
		return 0;
	for (i = 0; i < nr; i++)
		if (!pol_u32_in(dsorted, nd, rv[i].v))
			return 0;
	return 1;
}

/* Is prefix a inside one of d's cidrs? Found through the index: d may
 * have a great many. */
static int cidr_within(const struct chk *k, const struct pol_cidr *a, uint32_t rs,
		       uint32_t idx)
{
	const struct pol_cfam *f;
	struct pol_ckey key;
	size_t cnt, i;
	uint32_t n;

	f = pol_cfam_of(k->ix, &a->addr, &key);
	for (n = pol_cfam_find(f, &key); n != POL_NONE; n = f->nodes[n].parent) {
		const struct pol_ref *r;

		if (f->nodes[n].plen > a->plen)
			continue;
		r = pol_refs_of(f->refs + f->nodes[n].ref0, f->nodes[n].nref, rs, &cnt);
		for (i = 0; i < cnt; i++)
			if (r[i].rule == idx)
				return 1;
	}
	return 0;
}

/*
 * Everything of d but its name condition (known to cover, or absent)
 * holds wherever r's atom with prefix a (NULL: r has no cidrs) matches.
 */
static int rest_covers(const struct chk *k, const struct pol_rule *d, uint32_t drs,
		       uint32_t didx, const struct pol_rule *r, const struct pol_cidr *a)
{
	if (!ports_within(r, d))
		return 0;
	if (d->n_cidrs && (!a || !cidr_within(k, a, drs, didx)))
		return 0;
	return geo_within(r->countries, r->n_countries, d->cc_sorted, d->n_countries) &&
	       geo_within(r->asns, r->n_asns, d->asn_sorted, d->n_asns);
}

/* Does pattern q name every name pattern p names? */
static int dom_covers(const struct pol_domain *q, const struct pol_domain *p)
{
	size_t ql = q->suffix_len, pl = p->suffix_len;

	if (p->kind == POL_DOM_EXACT)
		return pol_domain_match(q, p->suffix, pl);
	if (q->kind == POL_DOM_EXACT)
		return 0;
	if (q->kind == POL_DOM_ONE)
		return p->kind == POL_DOM_ONE && pl == ql && !memcmp(p->suffix, q->suffix, ql);
	/* **.q: p's suffix is q's or below it */
	return (pl == ql && !memcmp(p->suffix, q->suffix, ql)) ||
	       (pl > ql && p->suffix[pl - ql - 1] == '.' &&
		!memcmp(p->suffix + pl - ql, q->suffix, ql));
}

/* ---- rules that can never match ------------------------------------- */

static const struct chk_pred *pred_of(const struct chk_pred *pr, size_t np, uint32_t rs,
				      uint32_t rule)
{
	size_t i;

	for (i = 0; i < np; i++)
		if (pr[i].rs->id == rs)
			return rule < pr[i].limit ? &pr[i] : NULL;
	return NULL;
}

/* What covered an atom, for the message. */
struct chk_cover {
	const struct pol_rule *named[CHK_MAX_NAMED];
	size_t n_named;
};

static void cover_note(struct chk_cover *cv, const struct pol_rule *d)
{
	size_t i;

	for (i = 0; i < cv->n_named; i++)
		if (cv->named[i] == d)
			return;
	if (cv->n_named < CHK_MAX_NAMED)
		cv->named[cv->n_named++] = d;
}

/* The suffix nodes (with refs) of a name, like pol_eval's walk. */
static size_t name_nodes(const struct pol_index *ix, const char *s, size_t len,
			 uint32_t *node, uint32_t *off)
{
	uint64_t h = POL_H0;
	size_t i, n = 0;
	uint32_t x;

	for (i = len; i > 0; i--) {
		h = pol_hstep(h, (unsigned char)s[i - 1]);
		if (i > 1 && s[i - 2] != '.')
			continue;
		x = pol_dindex_find(ix, s + i - 1, len - i + 1, pol_hfin(h));
		if (x != POL_NONE && ix->dnodes[x].nref && n < 127) {
			node[n] = x;
			off[n++] = (uint32_t)(i - 1);
		}
	}
	if (ix->dnodes[0].nref) {
		node[n] = 0;
		off[n++] = (uint32_t)len;
	}
	return n;
}

/* Earlier rules with a name pattern covering domain p (and the rest). */
static const struct pol_rule *cover_by_name(const struct chk *k, const struct chk_pred *pr,
					    size_t np, const struct pol_domain *p,
					    const struct pol_rule *r, const struct pol_cidr *a)
{
	const struct pol_index *ix = k->ix;
	uint32_t node[128], off[128];
	size_t nn = name_nodes(ix, p->suffix, p->suffix_len, node, off), i, j;

	for (i = 0; i < nn; i++) {
		const struct pol_dnode *dn = &ix->dnodes[node[i]];

		for (j = 0; j < dn->nref; j++) {
			const struct pol_ref *ref = &ix->drefs[dn->ref0 + j];
			const struct chk_pred *pd = pred_of(pr, np, ref->rs, ref->rule);
			const struct pol_rule *d;
			int hit;

			if (!pd)
				continue;
			d = &pd->rs->rules[ref->rule];
			if (ref->kind == POL_REF_REGEX)
				hit = p->kind == POL_DOM_EXACT &&
				      pol_regex_match(&d->regex[ref->aux], p->suffix,
						      p->suffix_len) == 1;
			else
				hit = dom_covers(&d->domains[ref->aux], p);
			if (hit && rest_covers(k, d, ref->rs, ref->rule, r, a))
				return d;
		}
	}
	return NULL;
}

/* Earlier rules with the very same regex. */
static const struct pol_rule *cover_by_regex(const struct chk *k, const struct chk_pred *pr,
					     size_t np, const struct pol_regex *re,
					     const struct pol_rule *r, const struct pol_cidr *a)
{
	size_t i, j, m;

	for (i = 0; i < np; i++)
		for (j = 0; j < pr[i].limit; j++) {
			const struct pol_rule *d = &pr[i].rs->rules[j];

			for (m = 0; m < d->n_regex; m++)
				if (!strcmp(d->regex[m].pattern, re->pattern) &&
				    rest_covers(k, d, pr[i].rs->id, (uint32_t)j, r, a))
					return d;
		}
	return NULL;
}

/* Earlier rules without a name condition: they cover any name. */
static const struct pol_rule *cover_by_addr(const struct chk *k, const struct chk_pred *pr,
					    size_t np, const struct pol_rule *r,
					    const struct pol_cidr *a)
{
	const struct pol_index *ix = k->ix;
	size_t i, j;

	if (a) {
		const struct pol_cfam *f;
		struct pol_ckey key;
		uint32_t n;

		f = pol_cfam_of(ix, &a->addr, &key);
		for (n = pol_cfam_find(f, &key); n != POL_NONE; n = f->nodes[n].parent) {
			if (f->nodes[n].plen > a->plen)
				continue;
			for (j = 0; j < f->nodes[n].nref; j++) {
				const struct pol_ref *ref = &f->refs[f->nodes[n].ref0 + j];
				const struct chk_pred *pd;

				if (ref->kind != POL_REF_CIDR_DRIVER)
					continue;
				pd = pred_of(pr, np, ref->rs, ref->rule);
				if (pd && rest_covers(k, &pd->rs->rules[ref->rule], ref->rs,
						      ref->rule, r, a))
					return &pd->rs->rules[ref->rule];
			}
		}
	}
	/* geo-only rules: few, scanned */
	for (i = 0; i < np; i++) {
		if (!ix->rsx[pr[i].rs->id].n_geo)
			continue;
		for (j = 0; j < pr[i].limit; j++) {
			const struct pol_rule *d = &pr[i].rs->rules[j];

			if (!pol_rule_has_name(d) && !d->n_cidrs &&
			    rest_covers(k, d, pr[i].rs->id, (uint32_t)j, r, a))
				return d;
		}
	}
	return NULL;
}

/*
 * Can r never match? Every (name pattern, prefix) pair of it must be
 * covered by one earlier rule (different pairs by different rules).
 */
static int chk_shadowed(const struct chk *k, const struct chk_pred *pr, size_t np,
			const struct pol_rule *r, struct chk_cover *cv)
{
	size_t nn = r->n_domains + r->n_regex, na = r->n_cidrs, i, j;
	const struct pol_rule *d;

	cv->n_named = 0;
	if ((nn ? nn : 1) * (na ? na : 1) > CHK_MAX_ATOMS)
		return 0;
	for (i = 0; i < (nn ? nn : 1); i++)
		for (j = 0; j < (na ? na : 1); j++) {
			const struct pol_cidr *a = na ? &r->cidrs[j] : NULL;

			d = cover_by_addr(k, pr, np, r, a);
			if (!d && nn && i < r->n_domains)
				d = cover_by_name(k, pr, np, &r->domains[i], r, a);
			if (!d && nn && i >= r->n_domains)
				d = cover_by_regex(k, pr, np, &r->regex[i - r->n_domains], r, a);
			if (!d)
				return 0;
			cover_note(cv, d);
		}
	return 1;
}

/* ---- allowed patterns the floor narrows ----------------------------- */

/* "a.b.com" -> "com.b.a": a name's descendants then sort right after it. */
static void rev_labels(const char *s, size_t len, char *out)
{
	size_t i = len, o = 0, end = len;

	while (i > 0) {
		i--;
		if (s[i] == '.' || i == 0) {
			size_t st = s[i] == '.' ? i + 1 : i;

			if (o)
				out[o++] = '.';
			memcpy(out + o, s + st, end - st);
			o += end - st;
			end = i;
		}
	}
	out[o] = '\0';
}

static int cmp_frev(const void *pa, const void *pb)
{
	const struct chk_frev *a = pa, *b = pb;

	return strcmp(a->rev, b->rev);
}

/* The floor's deny patterns that deny by name alone, sorted by rev. */
static int chk_floor_index(struct chk *k)
{
	const struct pol_ruleset *fl = &k->cfg->floor_deny;
	size_t i, j, n = 0;

	for (i = 0; i < fl->n; i++)
		if (!pol_rule_has_addr(&fl->rules[i]))
			n += fl->rules[i].n_domains;
	if (!n)
		return 0;
	k->fr = calloc(n, sizeof(*k->fr));
	if (!k->fr)
		return SG_ENOMEM;
	for (i = 0; i < fl->n; i++) {
		const struct pol_rule *r = &fl->rules[i];

		for (j = 0; !pol_rule_has_addr(r) && j < r->n_domains; j++) {
			struct chk_frev *f = &k->fr[k->n_fr++];

			f->rev = malloc(r->domains[j].suffix_len + 1);
			if (!f->rev)
				return SG_ENOMEM;
			rev_labels(r->domains[j].suffix, r->domains[j].suffix_len, f->rev);
			f->len = r->domains[j].suffix_len;
			f->r = r;
			f->d = &r->domains[j];
		}
	}
	qsort(k->fr, k->n_fr, sizeof(*k->fr), cmp_frev);
	return 0;
}

static size_t frev_lower(const struct chk *k, const char *rev)
{
	size_t lo = 0, hi = k->n_fr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(k->fr[mid].rev, rev) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Allowed pattern p of rule r against the floor: a floor pattern at p's
 * suffix or above it may deny all of p (on every port r has); one at or
 * below it may deny part of it (on some port r has): the wildcard is
 * wider than the floor lets any sandbox reach.
 */
static void chk_floor_narrows(struct chk *k, const struct pol_rule *r,
			      const struct pol_domain *p)
{
	char rev[SG_HOST_MAX + 1], pb[SG_HOST_MAX + 8], qb[SG_HOST_MAX + 8];
	size_t len = p->suffix_len, cut, i;

	if (!k->n_fr)
		return;
	rev_labels(p->suffix, len, rev);
	for (cut = 1; cut <= len; cut++) {
		char save;

		if (cut < len && rev[cut] != '.')
			continue;
		save = rev[cut];
		rev[cut] = '\0';
		for (i = frev_lower(k, rev); i < k->n_fr && !strcmp(k->fr[i].rev, rev); i++) {
			const struct chk_frev *f = &k->fr[i];

			if (dom_covers(f->d, p) && ports_within(r, f->r)) {
				chk_warn(k, p->line, p->col, "%s in %s can never match: the floor "
					 "denies all of it (%s, line %d)",
					 dom_str(p, pb, sizeof(pb)), r->id, f->r->id, f->r->line);
				rev[cut] = save;
				return;
			}
		}
		rev[cut] = save;
	}
	for (i = frev_lower(k, rev); i < k->n_fr && !strncmp(k->fr[i].rev, rev, len); i++) {
		const struct chk_frev *f = &k->fr[i];

		if (f->len != len && f->rev[len] != '.')
			continue;
		if (dom_covers(p, f->d) && !dom_covers(f->d, p) && ports_overlap(r, f->r)) {
			chk_warn(k, p->line, p->col, "%s in %s is wider than the floor allows: "
				 "%s (line %d) denies %s", dom_str(p, pb, sizeof(pb)), r->id,
				 f->r->id, f->r->line, dom_str(f->d, qb, sizeof(qb)));
			return;
		}
	}
}

/* ---- one rule list -------------------------------------------------- */

static void chk_list(struct chk *k, const struct pol_ruleset *rs, int allow,
		     struct chk_pred *pr, size_t np)
{
	struct chk_cover cv;
	unsigned char *dup;
	char list[400];
	size_t i, m, off;

	if (!rs->n)
		return;
	dup = calloc(rs->n, 1);
	if (!dup) {
		k->oom = 1;
		return;
	}
	for (i = 0; i < rs->n; i++)
		chk_rule_dups(k, &rs->rules[i]);
	chk_list_dups(k, rs, dup);
	for (i = 0; i < rs->n; i++) {
		const struct pol_rule *r = &rs->rules[i];

		/* a deny list is its own predecessor, up to the rule */
		if (!allow)
			pr[np - 1].limit = i;
		if (dup[i] || !chk_shadowed(k, pr, np, r, &cv))
			continue;
		for (m = 0, off = 0; m < cv.n_named && off < sizeof(list); m++)
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s (line %d)",
						m ? (m + 1 == cv.n_named ? " and " : ", ") : "",
						cv.named[m]->id, cv.named[m]->line);
		chk_warn(k, r->line, r->col, "%s can never match: everything it %s is "
			 "denied first, by %s", r->id, allow ? "allows" : "denies", list);
		dup[i] = 1;
	}
	/* allowed patterns the floor narrows (rules not reported above) */
	for (i = 0; allow && i < rs->n; i++)
		for (m = 0; !dup[i] && m < rs->rules[i].n_domains; m++)
			chk_floor_narrows(k, &rs->rules[i], &rs->rules[i].domains[m]);
	free(dup);
}

/* ---- sandboxes and profiles ----------------------------------------- */

enum { G_STAR, G_QM, G_CLASS, G_LIT };

struct chk_gtok {
	int kind;
	char c;                 /* G_LIT */
	const char *cls;        /* G_CLASS: "[...]" in the glob, borrowed */
	size_t cls_len;
};

/*
 * fnmatch(3) tokens (flags 0: '\' escapes, '*' spans '/'). Returns the
 * count, or SIZE_MAX for a class we do not model ([:alpha:], escapes
 * inside): then nothing is claimed about the glob.
 */
static size_t glob_tokens(const char *g, struct chk_gtok *t)
{
	size_t n = 0, i = 0, j;

	while (g[i]) {
		if (g[i] == '\\' && g[i + 1]) {
			t[n++] = (struct chk_gtok){ .kind = G_LIT, .c = g[i + 1] };
			i += 2;
		} else if (g[i] == '*') {
			if (!n || t[n - 1].kind != G_STAR)
				t[n++] = (struct chk_gtok){ .kind = G_STAR };
			i++;
		} else if (g[i] == '?') {
			t[n++] = (struct chk_gtok){ .kind = G_QM };
			i++;
		} else if (g[i] == '[') {
			j = i + 1;
			if (g[j] == '!' || g[j] == '^')
				j++;
			if (g[j] == ']')
				j++;
			while (g[j] && g[j] != ']') {
				if (g[j] == '\\' || (g[j] == '[' && g[j + 1] == ':'))
					return SIZE_MAX;
				j++;
			}
			if (g[j] == ']') {
				t[n++] = (struct chk_gtok){ .kind = G_CLASS, .cls = g + i,
							    .cls_len = j - i + 1 };
				i = j + 1;
			} else {
				t[n++] = (struct chk_gtok){ .kind = G_LIT, .c = '[' };
				i++;
			}
		} else {
			t[n++] = (struct chk_gtok){ .kind = G_LIT, .c = g[i] };
			i++;
		}
	}
	return n;
}

/* Does token a match every character token b can? */
static int glob_single(const struct chk_gtok *a, const struct chk_gtok *b)
{
	char cls[CFG_MAX_NAME + 2], ch[2];

	switch (a->kind) {
	case G_QM:
		return 1;
	case G_LIT:
		return b->kind == G_LIT && b->c == a->c;
	default:
		if (b->kind == G_CLASS)
			return b->cls_len == a->cls_len && !memcmp(a->cls, b->cls, a->cls_len);
		if (b->kind != G_LIT || a->cls_len >= sizeof(cls))
			return 0;
		memcpy(cls, a->cls, a->cls_len);
		cls[a->cls_len] = '\0';
		ch[0] = b->c;
		ch[1] = '\0';
		return fnmatch(cls, ch, 0) == 0;
	}
}

/*
 * Does glob 1 match every name glob 2 matches? Sound, not complete: a
 * '*' of glob 1 may swallow any run of glob 2's tokens, glob 2's '*' only
 * by one of glob 1's, other tokens one for one. memo: -1 unknown.
 */
static int glob_cov(const struct chk_gtok *t1, size_t n1, const struct chk_gtok *t2,
		    size_t n2, size_t i, size_t j, signed char *memo)
{
	signed char *m = &memo[i * (n2 + 1) + j];
	size_t x;
	int r = 0;

	if (*m >= 0)
		return *m;
	if (i == n1) {
		r = j == n2;
	} else if (t1[i].kind == G_STAR) {
		for (x = j; x <= n2 && !r; x++)
			r = glob_cov(t1, n1, t2, n2, i + 1, x, memo);
	} else if (j < n2 && t2[j].kind != G_STAR && glob_single(&t1[i], &t2[j])) {
		r = glob_cov(t1, n1, t2, n2, i + 1, j + 1, memo);
	}
	*m = (signed char)r;
	return r;
}

static int glob_covers(const char *g1, const char *g2)
{
	struct chk_gtok t1[CFG_MAX_NAME + 1], t2[CFG_MAX_NAME + 1];
	size_t n1 = glob_tokens(g1, t1), n2 = glob_tokens(g2, t2);
	signed char *memo;
	int r;

	if (n1 == SIZE_MAX || n2 == SIZE_MAX)
		return 0;
	memo = malloc((n1 + 1) * (n2 + 1));
	if (!memo)
		return 0;
	memset(memo, -1, (n1 + 1) * (n2 + 1));
	r = glob_cov(t1, n1, t2, n2, 0, 0, memo);
	free(memo);
	return r;
}

/* Is every source of sandbox j inside a source of an earlier sandbox? */
static int sources_covered(const struct sg_config *cfg, size_t j)
{
	const struct pol_sandbox *s = &cfg->sandboxes[j];
	size_t i, a, b;

	for (a = 0; a < s->n_sources; a++) {
		int found = 0;

		for (i = 0; i < j && !found; i++)
			for (b = 0; b < cfg->sandboxes[i].n_sources && !found; b++) {
				const struct pol_cidr *t = &cfg->sandboxes[i].sources[b];

				found = t->addr.family == s->sources[a].addr.family &&
					t->plen <= s->sources[a].plen &&
					pol_cidr_match(t, &s->sources[a].addr);
			}
		if (!found)
			return 0;
	}
	return 1;
}

static void chk_sandboxes(struct chk *k)
{
	const struct sg_config *cfg = k->cfg;
	size_t i, j, p;

	for (j = 0; j < cfg->n_sandboxes; j++) {
		const struct pol_sandbox *s = &cfg->sandboxes[j];

		for (i = 0; i < j; i++) {
			const struct pol_sandbox *e = &cfg->sandboxes[i];

			if (!glob_covers(e->name, s->name) || !sources_covered(cfg, j))
				continue;
			chk_warn(k, s->line, s->col, "sandbox \"%s\" is never chosen: \"%s\" "
				 "(line %d) comes first and matches every name it does%s",
				 s->name, e->name, e->line, s->n_sources ?
				 ", and earlier sandboxes' sources cover its sources" : "");
			break;
		}
	}
	for (p = 0; p < cfg->n_profiles; p++) {
		int used = 0;

		for (j = 0; j < cfg->n_sandboxes && !used; j++)
			for (i = 0; i < cfg->sandboxes[j].n_profiles && !used; i++)
				used = cfg->sandboxes[j].profiles[i] == &cfg->profiles[p];
		if (!used)
			chk_warn(k, cfg->profiles[p].line, cfg->profiles[p].col,
				 "profile \"%s\" is not used by any sandbox",
				 cfg->profiles[p].name);
	}
}

/* ---- all of it ------------------------------------------------------ */

static int cmp_warn(const void *pa, const void *pb)
{
	const struct chk_warn *a = pa, *b = pb;

	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	if (a->col != b->col)
		return a->col < b->col ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * Lists in the order a sandbox meets them. What comes before each list,
 * for every sandbox that can use it: the floor; for a deny list its own
 * earlier rules; for an allow list every deny list of its owner (a
 * profile's allow rules: that profile's deny list only, since other
 * sandboxes' denies narrowing a shared profile is what they are for).
 */
int pol_check(const struct sg_config *cfg, pol_warn_fn *fn, void *arg)
{
	struct chk k = { .cfg = cfg, .ix = cfg->index };
	struct chk_pred *pr;
	size_t i, j, np;
	int rc;

	pr = malloc((3 + cfg->n_profiles) * sizeof(*pr));
	if (!pr || chk_floor_index(&k)) {
		k.oom = 1;
		goto out;
	}
	pr[0] = (struct chk_pred){ &cfg->floor_deny, 0 };
	chk_list(&k, &cfg->floor_deny, 0, pr, 1);
	pr[0].limit = cfg->floor_deny.n;
	for (i = 0; i < cfg->n_profiles; i++) {
		const struct pol_profile *p = &cfg->profiles[i];

		pr[1] = (struct chk_pred){ &p->deny, 0 };
		chk_list(&k, &p->deny, 0, pr, 2);
		pr[1].limit = p->deny.n;
		chk_list(&k, &p->allow, 1, pr, 2);
	}
	for (i = 0; i < cfg->n_sandboxes; i++) {
		const struct pol_sandbox *s = &cfg->sandboxes[i];

		pr[1] = (struct chk_pred){ &s->deny, 0 };
		chk_list(&k, &s->deny, 0, pr, 2);
		pr[1].limit = s->deny.n;
		for (j = 0, np = 2; j < s->n_profiles; j++)
			pr[np++] = (struct chk_pred){ &s->profiles[j]->deny,
						      s->profiles[j]->deny.n };
		chk_list(&k, &s->allow, 1, pr, np);
	}
	chk_sandboxes(&k);
	if (!k.oom && k.n) {
		qsort(k.w, k.n, sizeof(*k.w), cmp_warn);
		for (i = 0; i < k.n; i++)
			fn(arg, k.w[i].line, k.w[i].col, k.w[i].msg);
	}
out:
	rc = k.oom ? SG_ENOMEM : (int)k.n;
	for (i = 0; i < k.n; i++)
		free(k.w[i].msg);
	free(k.w);
	for (i = 0; i < k.n_fr; i++)
		free(k.fr[i].rev);
	free(k.fr);
	free(pr);
	return rc;
}
