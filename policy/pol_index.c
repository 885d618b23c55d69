/*
 * pol_index.c - the compiled matchers, built once per load from the rules
 * and read-only afterwards (shared by every worker with the config).
 *
 * Every rule list (floor deny, each profile's and sandbox's allow and deny)
 * gets an id; an index entry (struct pol_ref) names a list, a rule in it
 * and the pattern that put it there. pol_eval asks each index for the
 * entries of one list at a time, so the cost of a lookup depends on the
 * name or address and on how many rules could match it, not on how many
 * rules there are.
 *
 *   names:   one hash table over every suffix that a domain pattern or a
 *            regex tail names. A name is looked up suffix by suffix, all
 *            hashes from one pass over its bytes right to left. A node's
 *            entries are sorted by (list, rule).
 *   cidrs:   per family, the prefixes as nested ranges: a sorted array of
 *            segment starts, each mapped to the innermost prefix covering
 *            it, and a parent link from each prefix to the one enclosing
 *            it. Lookup: one binary search, then the parent chain.
 *   geo:     rules whose only address condition is countries or asns, by
 *            country code and by AS number, sorted.
 *   ports:   per list, for rules without a name condition, the lowest
 *            rule index by port: with no address yet, that is the first
 *            rule whose answer depends on the address.
 *
 * Errors: only SG_ENOMEM ("FILE: out of memory" in err).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

struct dref {                   /* a name ref while building: with its node */
	uint32_t node;
	struct pol_ref r;
};

struct citem {                  /* a prefix of a rule while building */
	struct pol_ckey start;
	int plen;
	struct pol_ref r;
};

struct build {
	struct sg_config *cfg;
	struct pol_index *ix;
	size_t cap_dnodes;
	struct dref *drefs;
	size_t n_drefs, cap_drefs;
	struct citem *ci[2];            /* v4, v6 */
	size_t n_ci[2], cap_ci[2];
	uint32_t *port_min, *port_next; /* 65536 + 1 scratch, for port steps */
};

/* Grow *p (elements of size sz) to hold one more than *n. */
static int grow(void *pp, size_t *cap, size_t n, size_t sz)
{
	void **p = pp, *np;
	size_t nc;

	if (n < *cap)
		return 0;
	nc = *cap ? 2 * *cap : 64;
	np = realloc(*p, nc * sz);
	if (!np)
		return SG_ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

/* ---- names ---------------------------------------------------------- */

uint64_t pol_dhash(const char *s, size_t len)
{
	uint64_t h = POL_H0;

	while (len)
		h = pol_hstep(h, (unsigned char)s[--len]);
	return pol_hfin(h);
}

uint32_t pol_dindex_find(const struct pol_index *ix, const char *s, size_t len,
			 uint64_t h)
{
	size_t i;

	if (!ix->dslots)
		return POL_NONE;
	for (i = h & ix->dmask; ix->dslots[i]; i = (i + 1) & ix->dmask) {
		uint64_t slot = ix->dslots[i];
		const struct pol_dnode *n;

		if (slot >> 32 != h >> 32)
			continue;
		n = &ix->dnodes[(uint32_t)slot - 1];
		if (n->len == len && !memcmp(n->s, s, len))
			return (uint32_t)slot - 1;
	}
	return POL_NONE;
}

static void dslot_put(struct pol_index *ix, uint64_t h, uint32_t node)
{
	size_t i;

	for (i = h & ix->dmask; ix->dslots[i]; i = (i + 1) & ix->dmask)
		;
	ix->dslots[i] = (h >> 32) << 32 | (uint64_t)(node + 1);
}

/* Keep the table at most half full: probes stay short. */
static int dslots_grow(struct pol_index *ix)
{
	size_t cap = ix->dslots ? 2 * (ix->dmask + 1) : 1024, i;
	uint64_t *old = ix->dslots;

	ix->dslots = calloc(cap, sizeof(*ix->dslots));
	if (!ix->dslots) {
		ix->dslots = old;
		return SG_ENOMEM;
	}
	ix->dmask = cap - 1;
	for (i = 1; i < ix->n_dnodes; i++)
		dslot_put(ix, ix->dnodes[i].hash, (uint32_t)i);
	free(old);
	return 0;
}

/* The node of suffix s (borrowed: it lives as long as the config). */
static int dnode_intern(struct build *b, const char *s, size_t len, uint32_t *out)
{
	struct pol_index *ix = b->ix;
	uint64_t h;
	uint32_t n;

	if (len == 0) {
		*out = 0;
		return 0;
	}
	h = pol_dhash(s, len);
	n = pol_dindex_find(ix, s, len, h);
	if (n != POL_NONE) {
		*out = n;
		return 0;
	}
	if (grow(&ix->dnodes, &b->cap_dnodes, ix->n_dnodes, sizeof(*ix->dnodes)))
		return SG_ENOMEM;
	if (2 * (ix->n_dnodes + 1) > ix->dmask + 1 && dslots_grow(ix))
		return SG_ENOMEM;
	n = (uint32_t)ix->n_dnodes++;
	ix->dnodes[n] = (struct pol_dnode){ .s = s, .len = (uint32_t)len, .hash = h };
	dslot_put(ix, h, n);
	*out = n;
	return 0;
}

static int dref_add(struct build *b, uint32_t node, uint32_t rs, uint32_t rule,
		    uint32_t aux, enum pol_ref_kind kind)
{
	if (grow(&b->drefs, &b->cap_drefs, b->n_drefs, sizeof(*b->drefs)))
		return SG_ENOMEM;
	b->drefs[b->n_drefs++] = (struct dref){ node, { rs, rule, aux, kind } };
	return 0;
}

/*
 * A regex is filed under the labels of its tail after the first dot: a
 * name it matches ends with the tail, so it passes that node on its way
 * with the rest of the tail (before the dot) ending the labels in front.
 * A tail without a dot, or none, files it at the root: tried for every
 * name, after a cheap check that the name ends with the tail.
 */
static int dindex_rule(struct build *b, uint32_t rs, uint32_t idx, const struct pol_rule *r)
{
	uint32_t node;
	size_t j;
	int rc;

	for (j = 0; j < r->n_domains; j++) {
		const struct pol_domain *d = &r->domains[j];

		rc = dnode_intern(b, d->suffix, d->suffix_len, &node);
		if (!rc)
			rc = dref_add(b, node, rs, idx, (uint32_t)j,
				      d->kind == POL_DOM_EXACT ? POL_REF_EXACT :
				      d->kind == POL_DOM_ONE ? POL_REF_ONE : POL_REF_MANY);
		if (rc)
			return rc;
	}
	for (j = 0; j < r->n_regex; j++) {
		const struct pol_regex *re = &r->regex[j];
		const char *dot = re->tail ? memchr(re->tail, '.', re->tail_len) : NULL;

		node = 0;
		if (dot) {
			rc = dnode_intern(b, dot + 1, re->tail_len - (size_t)(dot + 1 - re->tail),
					  &node);
			if (rc)
				return rc;
		}
		rc = dref_add(b, node, rs, idx, (uint32_t)j, POL_REF_REGEX);
		if (rc)
			return rc;
	}
	return 0;
}

static int cmp_dref(const void *pa, const void *pb)
{
	const struct dref *a = pa, *b = pb;

	if (a->node != b->node)
		return a->node < b->node ? -1 : 1;
	if (a->r.rs != b->r.rs)
		return a->r.rs < b->r.rs ? -1 : 1;
	if (a->r.rule != b->r.rule)
		return a->r.rule < b->r.rule ? -1 : 1;
	if (a->r.kind != b->r.kind)
		return a->r.kind < b->r.kind ? -1 : 1;
	return a->r.aux < b->r.aux ? -1 : a->r.aux > b->r.aux;
}

static int dindex_finish(struct build *b)
{
	struct pol_index *ix = b->ix;
	size_t i;

	if (!b->n_drefs)
		return 0;
	qsort(b->drefs, b->n_drefs, sizeof(*b->drefs), cmp_dref);
	ix->drefs = malloc(b->n_drefs * sizeof(*ix->drefs));
	if (!ix->drefs)
		return SG_ENOMEM;
	ix->n_drefs = b->n_drefs;
	for (i = 0; i < b->n_drefs; i++) {
		struct pol_dnode *n = &ix->dnodes[b->drefs[i].node];

		if (!n->nref)
			n->ref0 = (uint32_t)i;
		n->nref++;
		ix->drefs[i] = b->drefs[i].r;
	}
	ix->bytes += ix->n_dnodes * sizeof(*ix->dnodes) +
		     (ix->dmask + 1) * sizeof(*ix->dslots) + ix->n_drefs * sizeof(*ix->drefs);
	return 0;
}

const struct pol_ref *pol_refs_of(const struct pol_ref *refs, size_t n, uint32_t rs,
				  size_t *cnt)
{
	size_t lo = 0, hi = n, end;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (refs[mid].rs < rs)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < n && refs[end].rs == rs; end++)
		;
	*cnt = end - lo;
	return refs + lo;
}

/* ---- cidrs ---------------------------------------------------------- */

static int ckey_cmp(const struct pol_ckey *a, const struct pol_ckey *b)
{
	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static uint64_t low_ones(int bits)
{
	return bits >= 64 ? ~0ULL : bits <= 0 ? 0 : (1ULL << bits) - 1;
}

/* Last address of a prefix in a family of width bits (32 or 128). */
static struct pol_ckey ckey_end(const struct pol_ckey *s, int plen, int width)
{
	struct pol_ckey e = *s;
	int host = width - plen;

	if (width == 32) {
		e.lo |= low_ones(host);
	} else {
		e.lo |= low_ones(host);
		e.hi |= low_ones(host - 64);
	}
	return e;
}

static int ckey_is_max(const struct pol_ckey *k, int width)
{
	return width == 32 ? k->lo == 0xffffffffULL : k->hi == ~0ULL && k->lo == ~0ULL;
}

static struct pol_ckey ckey_next(struct pol_ckey k)
{
	if (++k.lo == 0)
		k.hi++;
	return k;
}

const struct pol_cfam *pol_cfam_of(const struct pol_index *ix, const struct sg_addr *a,
				   struct pol_ckey *k)
{
	const uint8_t *b;
	int i;

	k->hi = k->lo = 0;
	if (a->family == AF_INET6 && !IN6_IS_ADDR_V4MAPPED(&a->u.v6)) {
		b = a->u.v6.s6_addr;
		for (i = 0; i < 8; i++) {
			k->hi = k->hi << 8 | b[i];
			k->lo = k->lo << 8 | b[8 + i];
		}
		return &ix->v6;
	}
	/* v4, or v4-mapped from a caller that did not fold it */
	b = a->family == AF_INET ? (const uint8_t *)&a->u.v4 : &a->u.v6.s6_addr[12];
	k->lo = (uint64_t)b[0] << 24 | (uint64_t)b[1] << 16 | (uint64_t)b[2] << 8 | b[3];
	return &ix->v4;
}

uint32_t pol_cfam_find(const struct pol_cfam *f, const struct pol_ckey *k)
{
	size_t lo = 0, hi = f->n_seg;

	/* the last segment starting at or before k */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ckey_cmp(&f->seg_start[mid], k) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? f->seg_node[lo - 1] : POL_NONE;
}

static int citem_add(struct build *b, const struct pol_cidr *c, uint32_t rs,
		     uint32_t rule, uint32_t aux, enum pol_ref_kind kind)
{
	struct pol_ckey k;
	int fam = pol_cfam_of(b->ix, &c->addr, &k) == &b->ix->v6;

	if (grow(&b->ci[fam], &b->cap_ci[fam], b->n_ci[fam], sizeof(*b->ci[fam])))
		return SG_ENOMEM;
	b->ci[fam][b->n_ci[fam]++] = (struct citem){ k, c->plen, { rs, rule, aux, kind } };
	return 0;
}

static int cmp_citem(const void *pa, const void *pb)
{
	const struct citem *a = pa, *b = pb;
	int c = ckey_cmp(&a->start, &b->start);

	if (c)
		return c;
	if (a->plen != b->plen)
		return a->plen < b->plen ? -1 : 1;
	if (a->r.rs != b->r.rs)
		return a->r.rs < b->r.rs ? -1 : 1;
	if (a->r.rule != b->r.rule)
		return a->r.rule < b->r.rule ? -1 : 1;
	return a->r.aux < b->r.aux ? -1 : a->r.aux > b->r.aux;
}

static int seg_emit(struct pol_cfam *f, size_t *cap, struct pol_ckey start, uint32_t node)
{
	size_t c2 = *cap;

	/* a later segment at the same start replaces the earlier one */
	if (f->n_seg && !ckey_cmp(&f->seg_start[f->n_seg - 1], &start)) {
		f->seg_node[f->n_seg - 1] = node;
		return 0;
	}
	if (grow(&f->seg_start, &c2, f->n_seg, sizeof(*f->seg_start)) ||
	    grow(&f->seg_node, cap, f->n_seg, sizeof(*f->seg_node)))
		return SG_ENOMEM;
	f->seg_start[f->n_seg] = start;
	f->seg_node[f->n_seg++] = node;
	return 0;
}

/*
 * Prefixes nest or are disjoint. Sorted by (start, shorter first), a sweep
 * with a stack of the open ones yields each prefix's parent and the
 * segments: where a prefix starts it becomes the innermost; right after it
 * ends its parent (or nothing) is again.
 */
static int cfam_build(struct build *b, int fam)
{
	struct pol_cfam *f = fam ? &b->ix->v6 : &b->ix->v4;
	struct citem *it = b->ci[fam];
	size_t n = b->n_ci[fam], i, sp = 0, segcap = 0;
	int width = fam ? 128 : 32;
	uint32_t stack[130];
	struct pol_ckey end;

	if (!n)
		return 0;
	qsort(it, n, sizeof(*it), cmp_citem);
	f->refs = malloc(n * sizeof(*f->refs));
	f->nodes = malloc(n * sizeof(*f->nodes));
	if (!f->refs || !f->nodes)
		return SG_ENOMEM;
	f->n_refs = n;
	for (i = 0; i < n; i++) {
		struct pol_cnode *u;

		f->refs[i] = it[i].r;
		if (i && !ckey_cmp(&it[i].start, &it[i - 1].start) &&
		    it[i].plen == it[i - 1].plen) {
			f->nodes[f->n_nodes - 1].nref++;
			continue;
		}
		while (sp) {
			u = &f->nodes[stack[sp - 1]];
			end = ckey_end(&u->start, u->plen, width);
			if (ckey_cmp(&end, &it[i].start) >= 0)
				break;
			sp--;
			if (!ckey_is_max(&end, width) &&
			    seg_emit(f, &segcap, ckey_next(end), sp ? stack[sp - 1] : POL_NONE))
				return SG_ENOMEM;
		}
		u = &f->nodes[f->n_nodes];
		*u = (struct pol_cnode){ .parent = sp ? stack[sp - 1] : POL_NONE,
					 .ref0 = (uint32_t)i, .nref = 1,
					 .plen = it[i].plen, .start = it[i].start };
		stack[sp++] = (uint32_t)f->n_nodes;
		if (seg_emit(f, &segcap, it[i].start, (uint32_t)f->n_nodes++))
			return SG_ENOMEM;
	}
	while (sp) {
		struct pol_cnode *u = &f->nodes[stack[--sp]];

		end = ckey_end(&u->start, u->plen, width);
		if (!ckey_is_max(&end, width) &&
		    seg_emit(f, &segcap, ckey_next(end), sp ? stack[sp - 1] : POL_NONE))
			return SG_ENOMEM;
	}
	b->ix->bytes += f->n_refs * sizeof(*f->refs) + n * sizeof(*f->nodes) +
			segcap * (sizeof(*f->seg_start) + sizeof(*f->seg_node));
	return 0;
}

/* ---- geo and ports -------------------------------------------------- */

static int cmp_gref(const void *pa, const void *pb)
{
	const struct pol_gref *a = pa, *b = pb;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->rs != b->rs)
		return a->rs < b->rs ? -1 : 1;
	return a->rule < b->rule ? -1 : a->rule > b->rule;
}

static uint32_t port_find(uint32_t *next, uint32_t p)
{
	uint32_t root = p, t;

	while (next[root] != root)
		root = next[root];
	while (next[p] != root) {       /* path compression */
		t = next[p];
		next[p] = root;
		p = t;
	}
	return root;
}

/*
 * Lowest index by port among the rules without a name condition: rules
 * are taken in order and each paints the ports nobody painted yet, with
 * "next unpainted port" links so every port is painted once.
 */
static int port_steps(struct build *b, struct pol_rsx *x)
{
	const struct pol_ruleset *rs = x->rs;
	uint32_t *minr = b->port_min, *next = b->port_next, p, last;
	size_t i, j, n = 0;

	for (i = 0; i < rs->n && pol_rule_has_name(&rs->rules[i]); i++)
		;
	if (i == rs->n)
		return 0;
	for (p = 0; p <= 65536; p++)
		next[p] = p;
	for (p = 0; p < 65536; p++)
		minr[p] = POL_NONE;
	for (; i < rs->n; i++) {
		const struct pol_rule *r = &rs->rules[i];

		if (pol_rule_has_name(r))
			continue;
		for (j = 0; j < (r->n_ports ? r->n_ports : 1); j++) {
			uint32_t lo = r->n_ports ? r->ports[j].lo : 0;
			uint32_t hi = r->n_ports ? r->ports[j].hi : 65535;

			for (p = port_find(next, lo); p <= hi; p = port_find(next, p + 1)) {
				minr[p] = (uint32_t)i;
				next[p] = p + 1;
			}
		}
	}
	for (p = 0, last = POL_NONE - 1; p < 65536; p++)
		if (minr[p] != last)
			n++, last = minr[p];
	x->steps = malloc(n * sizeof(*x->steps));
	if (!x->steps)
		return SG_ENOMEM;
	for (p = 0, last = POL_NONE - 1; p < 65536; p++)
		if (minr[p] != last) {
			x->steps[x->n_steps++] = (struct pol_pstep){ p, minr[p] };
			last = minr[p];
		}
	b->ix->bytes += n * sizeof(*x->steps);
	return 0;
}

/* ---- the whole config ----------------------------------------------- */

static int index_ruleset(struct build *b, struct pol_ruleset *rs)
{
	struct pol_index *ix = b->ix;
	struct pol_rsx *x = &ix->rsx[ix->n_rs];
	size_t i, j;
	int rc;

	rs->id = (uint32_t)ix->n_rs++;
	x->rs = rs;
	for (i = 0; i < rs->n; i++) {
		const struct pol_rule *r = &rs->rules[i];
		int named = pol_rule_has_name(r);

		rc = dindex_rule(b, rs->id, (uint32_t)i, r);
		for (j = 0; !rc && j < r->n_cidrs; j++)
			rc = citem_add(b, &r->cidrs[j], rs->id, (uint32_t)i, (uint32_t)j,
				       named ? POL_REF_CIDR : POL_REF_CIDR_DRIVER);
		if (rc)
			return rc;
		if (!named && !r->n_cidrs)
			x->n_geo++;
	}
	return port_steps(b, x);
}

/* Geo-driven rules, by their first kind of geo condition. */
static int gindex_build(struct pol_index *ix)
{
	size_t i, j, n_cc = 0, n_asn = 0, k;

	for (i = 0; i < ix->n_rs; i++) {
		const struct pol_ruleset *rs = ix->rsx[i].rs;

		for (j = 0; ix->rsx[i].n_geo && j < rs->n; j++) {
			const struct pol_rule *r = &rs->rules[j];

			if (pol_rule_has_name(r) || r->n_cidrs)
				continue;
			if (r->n_countries)
				n_cc += r->n_countries;
			else
				n_asn += r->n_asns;
		}
	}
	if (!n_cc && !n_asn)
		return 0;
	ix->grefs = malloc((n_cc + n_asn) * sizeof(*ix->grefs));
	if (!ix->grefs)
		return SG_ENOMEM;
	for (i = 0; i < ix->n_rs; i++) {
		const struct pol_ruleset *rs = ix->rsx[i].rs;

		for (j = 0; ix->rsx[i].n_geo && j < rs->n; j++) {
			const struct pol_rule *r = &rs->rules[j];

			if (pol_rule_has_name(r) || r->n_cidrs)
				continue;
			if (r->n_countries)
				for (k = 0; k < r->n_countries; k++)
					ix->grefs[ix->n_gcc++] = (struct pol_gref){
						r->countries[k].v, rs->id, (uint32_t)j };
			else
				for (k = 0; k < r->n_asns; k++)
					ix->grefs[n_cc + ix->n_gasn++] = (struct pol_gref){
						r->asns[k].v, rs->id, (uint32_t)j };
		}
	}
	qsort(ix->grefs, n_cc, sizeof(*ix->grefs), cmp_gref);
	qsort(ix->grefs + n_cc, n_asn, sizeof(*ix->grefs), cmp_gref);
	ix->bytes += (n_cc + n_asn) * sizeof(*ix->grefs);
	return 0;
}

int pol_index_build(struct sg_config *cfg, char *err, size_t errsz)
{
	struct build b = { .cfg = cfg };
	struct pol_index *ix;
	size_t i, n_rs = 1 + 2 * (cfg->n_profiles + cfg->n_sandboxes);
	int rc = SG_ENOMEM;

	ix = cfg->index = calloc(1, sizeof(*ix));
	if (!ix)
		goto out;
	b.ix = ix;
	ix->rsx = calloc(n_rs, sizeof(*ix->rsx));
	b.port_min = malloc(65536 * sizeof(*b.port_min));
	b.port_next = malloc(65537 * sizeof(*b.port_next));
	if (!ix->rsx || !b.port_min || !b.port_next ||
	    grow(&ix->dnodes, &b.cap_dnodes, 0, sizeof(*ix->dnodes)))
		goto out;
	/* node 0: the root, the suffix every name has */
	ix->dnodes[0] = (struct pol_dnode){ .s = "" };
	ix->n_dnodes = 1;
	/* Ids in evaluation order of a sandbox: the floor first. */
	rc = index_ruleset(&b, &cfg->floor_deny);
	for (i = 0; !rc && i < cfg->n_profiles; i++) {
		rc = index_ruleset(&b, &cfg->profiles[i].deny);
		if (!rc)
			rc = index_ruleset(&b, &cfg->profiles[i].allow);
	}
	for (i = 0; !rc && i < cfg->n_sandboxes; i++) {
		rc = index_ruleset(&b, &cfg->sandboxes[i].deny);
		if (!rc)
			rc = index_ruleset(&b, &cfg->sandboxes[i].allow);
	}
	if (!rc)
		rc = dindex_finish(&b);
	if (!rc)
		rc = cfam_build(&b, 0);
	if (!rc)
		rc = cfam_build(&b, 1);
	if (!rc)
		rc = gindex_build(ix);
	ix->bytes += sizeof(*ix) + n_rs * sizeof(*ix->rsx);
out:
	free(b.drefs);
	free(b.ci[0]);
	free(b.ci[1]);
	free(b.port_min);
	free(b.port_next);
	if (rc && errsz)
		snprintf(err, errsz, "%s: out of memory", cfg->path);
	return rc;
}

static void cfam_free(struct pol_cfam *f)
{
	free(f->seg_start);
	free(f->seg_node);
	free(f->nodes);
	free(f->refs);
}

void pol_index_free(struct pol_index *ix)
{
	size_t i;

	if (!ix)
		return;
	free(ix->dnodes);
	free(ix->dslots);
	free(ix->drefs);
	cfam_free(&ix->v4);
	cfam_free(&ix->v6);
	free(ix->grefs);
	for (i = 0; i < ix->n_rs; i++)
		free(ix->rsx[i].steps);
	free(ix->rsx);
	free(ix);
}
