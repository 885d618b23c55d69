/*
 * pol_rule.c - one rule of sandgate.yaml (floor/profiles/sandboxes deny
 * and allow lists): its keys, their values, and the compiled form of the
 * parts that compile on their own (PCRE2 code, sorted geo codes).
 *
 * Contract as for the rest of the loader (pol_int.h): the first error is
 * reported as "FILE:LINE:COL: message" and ends the load; everything a
 * rule owns is reachable from it as soon as it is allocated, so
 * pol_ruleset_free() can free a rule an error left half built.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

/*
 * Every regex starts with this: a pattern that backtracks without end
 * (`(a+)+$`) gives up after this many steps instead of stalling a worker.
 * A name is at most 253 bytes; sane patterns need a few hundred steps.
 */
#define POL_RE_PREFIX   "(*LIMIT_MATCH=100000)"
/* Longest regex we look into for a literal tail (longer ones still work). */
#define POL_RE_SCAN_MAX 1024

static int cfg_domain(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *where,
		      struct pol_domain *d)
{
	char buf[SG_HOST_MAX + 1];
	const char *s, *rest;
	int len, rc = pol_cfg_str(c, n, "domains", where, &s);

	if (rc)
		return rc;
	/* positions of every pattern: `policy check` points at the one
	 * that is duplicated or shadowed, not just its rule */
	pol_cfg_pos(n, &d->line, &d->col);
	if (!strncmp(s, "**.", 3)) {
		d->kind = POL_DOM_MANY;
		rest = s + 3;
	} else if (!strncmp(s, "*.", 2)) {
		d->kind = POL_DOM_ONE;
		rest = s + 2;
	} else {
		d->kind = POL_DOM_EXACT;
		rest = s;
	}
	/* A wildcard is a whole leading label; the suffix is a host name. */
	if (strchr(rest, '*') ||
	    (len = sg_host_normalize(rest, strlen(rest), buf)) < 0)
		return pol_cfg_err(c, n, "invalid domain pattern \"%s\" in %s "
				   "(expected example.com, *.example.com or "
				   "**.example.com)", s, where);
	d->suffix = pol_cfg_strdup(c, buf, (size_t)len);
	if (!d->suffix)
		return SG_ENOMEM;
	d->suffix_len = (size_t)len;
	return 0;
}

static void cfg_mask(struct sg_addr *a, int plen)
{
	uint8_t *b = a->family == AF_INET ? (uint8_t *)&a->u.v4 : a->u.v6.s6_addr;
	int i, n = a->family == AF_INET ? 4 : 16;

	for (i = 0; i < n; i++) {
		int bits = plen - 8 * i;

		if (bits <= 0)
			b[i] = 0;
		else if (bits < 8)
			b[i] &= (uint8_t)(0xff << (8 - bits));
	}
}

/*
 * "10.0.0.0/8", "fd00::/8", or a bare address (/32, /128). Strict like Go's
 * netip.ParsePrefix: host bits set is an error, not silently masked, since
 * "10.1.2.3/8" usually means the author meant something narrower. A
 * v4-mapped network (::ffff:a.b.c.d/96+) is folded to IPv4.
 */
int pol_cfg_cidr(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		 const char *where, struct pol_cidr *out)
{
	char buf[INET6_ADDRSTRLEN];
	struct sg_addr a, m;
	const char *s, *slash, *p;
	size_t alen;
	int max, plen, rc = pol_cfg_str(c, n, key, where, &s);

	if (rc)
		return rc;
	slash = strchr(s, '/');
	alen = slash ? (size_t)(slash - s) : strlen(s);
	if (alen == 0 || alen >= sizeof(buf))
		goto bad;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET, buf, &a.u.v4) == 1) {
		a.family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, &a.u.v6) == 1) {
		a.family = AF_INET6;
		max = 128;
	} else {
		goto bad;
	}
	plen = max;
	if (slash) {
		p = slash + 1;
		/* 1-3 digits, no sign, no leading zero */
		if (!*p || strlen(p) > 3 || (p[0] == '0' && p[1]))
			goto bad;
		for (plen = 0; *p; p++) {
			if (*p < '0' || *p > '9')
				goto bad;
			plen = plen * 10 + (*p - '0');
		}
		if (plen > max)
			goto bad;
	}
	if (a.family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a.u.v6) && plen >= 96) {
		struct in_addr v4;

		memcpy(&v4, &a.u.v6.s6_addr[12], 4);
		a.family = AF_INET;
		a.u.v4 = v4;
		plen -= 96;
	}
	m = a;
	cfg_mask(&m, plen);
	if (!sg_addr_eq(&a, &m))
		return pol_cfg_err(c, n, "%s%s%s: host bits set in %s", key,
				   pol_cfg_in(where), where, s);
	out->addr = m;
	out->plen = plen;
	pol_cfg_pos(n, &out->line, &out->col);
	return 0;
bad:
	return pol_cfg_err(c, n, "%s%s%s: invalid CIDR \"%s\" (expected 10.0.0.0/8, "
			   "fd00::/8 or an address)", key, pol_cfg_in(where), where, s);
}

/* 1..65535 in decimal, no sign, no leading zero. */
static int cfg_port_num(const char *s, size_t len, uint16_t *out)
{
	unsigned v = 0;
	size_t i;

	if (len == 0 || len > 5 || s[0] == '0')
		return SG_EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return SG_EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return SG_EINVAL;
	*out = (uint16_t)v;
	return 0;
}

static int cfg_port(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *where,
		    struct pol_port_range *out)
{
	const char *s, *dash;
	int rc = pol_cfg_str(c, n, "ports", where, &s);

	if (rc)
		return rc;
	pol_cfg_pos(n, &out->line, &out->col);
	dash = strchr(s, '-');
	if (!dash) {
		if (cfg_port_num(s, strlen(s), &out->lo))
			goto bad;
		out->hi = out->lo;
		return 0;
	}
	if (cfg_port_num(s, (size_t)(dash - s), &out->lo) ||
	    cfg_port_num(dash + 1, strlen(dash + 1), &out->hi))
		goto bad;
	if (out->lo > out->hi)
		return pol_cfg_err(c, n, "invalid port range \"%s\" in %s: the low end "
				   "is above the high end", s, where);
	return 0;
bad:
	return pol_cfg_err(c, n, "invalid port \"%s\" in %s (expected 1..65535 or "
			   "LOW-HIGH)", s, where);
}

/* ---- regex ---------------------------------------------------------- */

enum { RE_OTHER = -1, RE_END = -2 };

/* Just past the ']' closing the class that opens at p[i], or 0. */
static size_t re_class_end(const char *p, size_t n, size_t i)
{
	i++;
	if (i < n && p[i] == '^')
		i++;
	if (i < n && p[i] == ']')       /* a ']' first is a literal */
		i++;
	while (i < n) {
		if (p[i] == '\\') {
			i += 2;
		} else if (p[i] == '[' && i + 1 < n &&
			   (p[i + 1] == ':' || p[i + 1] == '.' || p[i + 1] == '=')) {
			/* [:alpha:] and friends end with the same char and ']' */
			char t = p[i + 1];

			for (i += 2; i + 1 < n && !(p[i] == t && p[i + 1] == ']'); i++)
				;
			if (i + 1 >= n)
				return 0;
			i += 2;
		} else if (p[i] == ']') {
			return i + 1;
		} else {
			i++;
		}
	}
	return 0;
}

/* Just past a {n}, {n,} or {n,m} quantifier at p[i], or 0. */
static size_t re_brace_end(const char *p, size_t n, size_t i)
{
	size_t j = i + 1, d;

	for (d = j; j < n && isdigit((unsigned char)p[j]); j++)
		;
	if (j == d)
		return 0;
	if (j < n && p[j] == ',')
		for (j++; j < n && isdigit((unsigned char)p[j]); j++)
			;
	return j < n && p[j] == '}' ? j + 1 : 0;
}

/*
 * The literal text every full match of the pattern must end with,
 * lower-cased into out (outsz bytes); returns its length, 0 for none.
 *
 * Only a prefilter, so it must never name a tail some match lacks; when a
 * construct could bend that (alternation at the top, options, \Q, back-
 * references, verbs, escapes that take arguments) it gives up and returns
 * 0. Otherwise the pattern is a sequence of atoms, and the unquantified
 * single-byte atoms at its end, before any $ or \z, are a suffix of every
 * match: the match is anchored at the end. Case: the match is caseless
 * and names are lower case, so the lower-cased tail is what a name shows.
 */
static size_t re_tail(const char *p, size_t n, char *out, size_t outsz)
{
	int atoms[POL_RE_SCAN_MAX];
	size_t na = 0, i = 0, j, len;
	int depth = 0;

	if (n > POL_RE_SCAN_MAX)
		return 0;
	while (i < n) {
		unsigned char ch = (unsigned char)p[i];

		if (ch == '\\') {
			unsigned char e = i + 1 < n ? (unsigned char)p[i + 1] : 0;

			if (!e)
				return 0;
			if (isalnum(e) && !strchr("dDwWsShHvVbBzZAG", e))
				return 0;       /* \x41, \1, \Q, \p{..}: not worth it */
			if (depth == 0)
				atoms[na++] = isalnum(e) ? (e == 'z' || e == 'Z' ? RE_END : RE_OTHER)
							 : tolower(e);
			i += 2;
		} else if (ch == '[') {
			j = re_class_end(p, n, i);
			if (!j)
				return 0;
			if (depth == 0)
				atoms[na++] = RE_OTHER;
			i = j;
		} else if (ch == '(') {
			if (i + 1 < n && p[i + 1] == '*')
				return 0;       /* (*VERB) */
			if (i + 1 < n && p[i + 1] == '?') {
				const char *t = p + i + 2;
				size_t left = n - i - 2;

				/* non-capturing, atomic, branch reset, lookaround */
				if (!left || !(strchr(":=!>|", *t) ||
					       (left > 1 && *t == '<' && (t[1] == '=' || t[1] == '!'))))
					return 0;
			}
			depth++;
			i++;
		} else if (ch == ')') {
			if (depth == 0)
				return 0;
			if (--depth == 0)
				atoms[na++] = RE_OTHER;
			i++;
		} else if (ch == '|') {
			if (depth == 0)
				return 0;
			i++;
		} else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
			if (ch == '{') {
				j = re_brace_end(p, n, i);
				if (!j)
					return 0;
				i = j;
			} else {
				i++;
			}
			if (i < n && (p[i] == '?' || p[i] == '+'))
				i++;            /* lazy, possessive */
			if (depth == 0) {
				if (!na)
					return 0;
				atoms[na - 1] = RE_OTHER;
			}
		} else {
			if (depth == 0)
				atoms[na++] = ch == '$' ? RE_END :
					      ch == '^' || ch == '.' ? RE_OTHER : tolower(ch);
			i++;
		}
	}
	if (depth)
		return 0;
	while (na && atoms[na - 1] == RE_END)
		na--;
	for (j = na; j > 0 && atoms[j - 1] >= 0; j--)
		;
	len = na - j;
	if (len >= outsz)               /* keep the end: it is what is indexed */
		j = na - (len = outsz - 1);
	for (i = 0; i < len; i++)
		out[i] = (char)atoms[j + i];
	out[len] = '\0';
	return len;
}

static int cfg_regex_one(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *where,
			 struct pol_regex *re)
{
	char msg[256], tail[SG_HOST_MAX + 1], *full = NULL;
	size_t len, plen = strlen(POL_RE_PREFIX), tlen;
	PCRE2_SIZE off;
	const char *s;
	int rc, ec;

	rc = pol_cfg_str(c, n, "regex", where, &s);
	if (rc)
		return rc;
	pol_cfg_pos(n, &re->line, &re->col);
	len = strlen(s);
	re->pattern = pol_cfg_strdup(c, s, len);
	full = malloc(plen + len + 1);
	if (!re->pattern || !full) {
		rc = pol_cfg_nomem(c);
		goto out;
	}
	/* the limit goes in front of the user's pattern: it can only lower
	 * it with its own (*LIMIT_MATCH=), never raise it */
	memcpy(full, POL_RE_PREFIX, plen);
	memcpy(full + plen, s, len + 1);
	/* Anchored at both ends: a full match, whatever ^ and $ say. */
	re->code = pcre2_compile((PCRE2_SPTR)full, plen + len,
				 PCRE2_CASELESS | PCRE2_ANCHORED | PCRE2_ENDANCHORED,
				 &ec, &off, NULL);
	if (!re->code) {
		/* the offset is into what the user wrote, not our prefix */
		pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof(msg));
		rc = pol_cfg_err(c, n, "regex \"%s\" in %s: %s at offset %zu", s, where,
				 msg, (size_t)(off > plen ? off - plen : 0));
		goto out;
	}
	/* Without JIT (an exotic CPU, or W^X forbids it) the interpreter
	 * gives the same answers, slower. */
	re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
	tlen = re_tail(s, len, tail, sizeof(tail));
	if (tlen) {
		re->tail = pol_cfg_strdup(c, tail, tlen);
		if (!re->tail) {
			rc = SG_ENOMEM;
			goto out;
		}
		re->tail_len = tlen;
	}
out:
	free(full);
	return rc;
}

/* regex: 'PATTERN' or a list of them. */
static int cfg_regex(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *where,
		     struct pol_rule *r)
{
	size_t i, cnt = 1;
	int rc;

	if (n->type == YAML_SEQUENCE_NODE) {
		rc = pol_cfg_expect_list(c, n, "regex", where);
		if (rc)
			return rc;
		cnt = pol_cfg_seq_len(n);
	}
	r->regex = pol_cfg_calloc(c, cnt, sizeof(*r->regex));
	if (!r->regex)
		return SG_ENOMEM;
	r->n_regex = cnt;
	/* one pattern is common enough to be written without a list */
	if (n->type != YAML_SEQUENCE_NODE)
		return cfg_regex_one(c, n, where, &r->regex[0]);
	for (i = 0; i < cnt; i++) {
		rc = cfg_regex_one(c, pol_cfg_item(c, n, i), where, &r->regex[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- countries and AS numbers --------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The sorted copy lookups use; the file-order list stays for messages. */
static uint32_t *cfg_geo_sorted(struct pol_cfg_ctx *c, const struct pol_geo_code *g,
				size_t n)
{
	uint32_t *s = pol_cfg_calloc(c, n, sizeof(*s));
	size_t i;

	if (!s)
		return NULL;
	for (i = 0; i < n; i++)
		s[i] = g[i].v;
	qsort(s, n, sizeof(*s), cmp_u32);
	return s;
}

static int cfg_country(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *where,
		       struct pol_geo_code *g)
{
	const char *s;
	int rc = pol_cfg_str(c, n, "countries", where, &s);

	if (rc)
		return rc;
	pol_cfg_pos(n, &g->line, &g->col);
	g->v = pol_geo_country_code(s);
	if (g->v)
		return 0;
	/* The two codes people reach for that ISO 3166 does not have. */
	if (!strcmp(s, "UK") || !strcmp(s, "uk"))
		return pol_cfg_err(c, n, "countries in %s: \"%s\" is not an ISO 3166-1 "
				   "code (the United Kingdom is GB)", where, s);
	if (!strcmp(s, "EL") || !strcmp(s, "el"))
		return pol_cfg_err(c, n, "countries in %s: \"%s\" is not an ISO 3166-1 "
				   "code (Greece is GR)", where, s);
	return pol_cfg_err(c, n, "countries in %s: \"%s\" is not an ISO 3166-1 "
			   "alpha-2 country code (e.g. KP, IR)", where, s);
}

/* 64512 or "AS64512"; 0 and 4294967295 are reserved (RFC 7607, 7300). */
static int cfg_asn(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *where,
		   struct pol_geo_code *g)
{
	const char *s, *p;
	long long v;
	int rc = pol_cfg_str(c, n, "asns", where, &s);

	if (rc)
		return rc;
	pol_cfg_pos(n, &g->line, &g->col);
	/* "AS64512" as registries write it, or the bare number; digits only
	 * after that, so " 64512" or "0x..." are not quietly accepted */
	p = (s[0] == 'A' || s[0] == 'a') && (s[1] == 'S' || s[1] == 's') ? s + 2 : s;
	if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 10 ||
	    (p[0] == '0' && p[1]) || sg_int_parse(p, 1, 4294967294LL, &v))
		return pol_cfg_err(c, n, "asns in %s: expected an AS number like 64512 "
				   "or \"AS64512\", got \"%s\"", where, s);
	g->v = (uint32_t)v;
	return 0;
}

static int cfg_geo_list(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
			const char *where, struct pol_geo_code **out, size_t *nout,
			uint32_t **sorted)
{
	size_t i, cnt;
	int rc = pol_cfg_expect_list(c, n, key, where);

	if (rc)
		return rc;
	cnt = pol_cfg_seq_len(n);
	*out = pol_cfg_calloc(c, cnt, sizeof(**out));
	if (!*out)
		return SG_ENOMEM;
	*nout = cnt;
	for (i = 0; i < cnt; i++) {
		yaml_node_t *it = pol_cfg_item(c, n, i);

		rc = key[0] == 'c' ? cfg_country(c, it, where, &(*out)[i])
				   : cfg_asn(c, it, where, &(*out)[i]);
		if (rc)
			return rc;
	}
	*sorted = cfg_geo_sorted(c, *out, cnt);
	return *sorted ? 0 : SG_ENOMEM;
}

/* ---- rules ---------------------------------------------------------- */

static uint64_t id_hash(const char *s)
{
	uint64_t h = POL_H0;

	while (*s)
		h = pol_hstep(h, (unsigned char)*s++);
	return pol_hfin(h);
}

/*
 * Record a rule's id; a name may not repeat any other rule's id. Path ids
 * are unique by construction, so only the first of each id is kept: a
 * later clash is always reported against it. Hashed, because a policy
 * can have a few hundred thousand rules.
 */
static int cfg_rule_register(struct pol_cfg_ctx *c, const struct pol_rule *r,
			     const yaml_node_t *at, int named)
{
	struct pol_cfg_ruleref *o;
	size_t i, mask;

	if (2 * (c->n_ids + 1) > c->cap_ids) {
		size_t cap = c->cap_ids ? 2 * c->cap_ids : 256;
		struct pol_cfg_ruleref *ids = calloc(cap, sizeof(*ids));

		if (!ids)
			return pol_cfg_nomem(c);
		for (i = 0; i < c->cap_ids; i++) {
			size_t k;

			if (!c->ids[i].id)
				continue;
			for (k = id_hash(c->ids[i].id) & (cap - 1); ids[k].id;
			     k = (k + 1) & (cap - 1))
				;
			ids[k] = c->ids[i];
		}
		free(c->ids);
		c->ids = ids;
		c->cap_ids = cap;
	}
	mask = c->cap_ids - 1;
	for (i = id_hash(r->id) & mask; c->ids[i].id; i = (i + 1) & mask) {
		o = &c->ids[i];
		if (strcmp(o->id, r->id))
			continue;
		if (!named && !o->named)
			return 0;
		if (named && o->named)
			return pol_cfg_err(c, at, "duplicate rule name \"%s\" (first at "
					   "line %d)", r->id, o->line);
		return pol_cfg_err(c, at, "rule id \"%s\" is used twice (also at line "
				   "%d)", r->id, o->line);
	}
	c->ids[i].id = r->id;
	c->ids[i].line = r->line;
	c->ids[i].named = named;
	c->n_ids++;
	return 0;
}

enum { RK_NAME, RK_DOMAINS, RK_REGEX, RK_CIDRS, RK_COUNTRIES, RK_ASNS, RK_PORTS,
       RK_TLS, RK_N };

static const struct pol_cfg_key rule_keys[] = {
	[RK_NAME] = { "name", NULL },
	[RK_DOMAINS] = { "domains", NULL },
	[RK_REGEX] = { "regex", NULL },
	[RK_CIDRS] = { "cidrs", NULL },
	[RK_COUNTRIES] = { "countries", NULL },
	[RK_ASNS] = { "asns", NULL },
	[RK_PORTS] = { "ports", NULL },
	[RK_TLS] = { "tls", NULL },
	{ "http", "http: not supported by this build yet" },
	{ "secrets", "secrets: not supported by this build yet" },
};

static int cfg_rule_lists(struct pol_cfg_ctx *c, yaml_node_t **v, const char *where,
			  struct pol_rule *r)
{
	size_t i, cnt;
	int rc = 0;

	if (v[RK_DOMAINS]) {
		rc = pol_cfg_expect_list(c, v[RK_DOMAINS], "domains", where);
		if (rc)
			return rc;
		cnt = pol_cfg_seq_len(v[RK_DOMAINS]);
		r->domains = pol_cfg_calloc(c, cnt, sizeof(*r->domains));
		if (!r->domains)
			return SG_ENOMEM;
		r->n_domains = cnt;
		for (i = 0; i < cnt && !rc; i++)
			rc = cfg_domain(c, pol_cfg_item(c, v[RK_DOMAINS], i), where,
					&r->domains[i]);
	}
	if (!rc && v[RK_REGEX])
		rc = cfg_regex(c, v[RK_REGEX], where, r);
	if (!rc && v[RK_CIDRS]) {
		rc = pol_cfg_expect_list(c, v[RK_CIDRS], "cidrs", where);
		if (rc)
			return rc;
		cnt = pol_cfg_seq_len(v[RK_CIDRS]);
		r->cidrs = pol_cfg_calloc(c, cnt, sizeof(*r->cidrs));
		if (!r->cidrs)
			return SG_ENOMEM;
		r->n_cidrs = cnt;
		for (i = 0; i < cnt && !rc; i++)
			rc = pol_cfg_cidr(c, pol_cfg_item(c, v[RK_CIDRS], i), "cidrs",
					  where, &r->cidrs[i]);
	}
	/* A country rule without a database would silently never match:
	 * for a floor deny that is fail-open, so it is an error. */
	if (!rc && v[RK_COUNTRIES]) {
		if (!c->cfg->geoip_country)
			return pol_cfg_err(c, v[RK_COUNTRIES], "countries in %s: needs "
					   "a country database (geoip.country)", where);
		rc = cfg_geo_list(c, v[RK_COUNTRIES], "countries", where, &r->countries,
				  &r->n_countries, &r->cc_sorted);
	}
	if (!rc && v[RK_ASNS]) {
		if (!c->cfg->geoip_asn)
			return pol_cfg_err(c, v[RK_ASNS], "asns in %s: needs an ASN "
					   "database (geoip.asn)", where);
		rc = cfg_geo_list(c, v[RK_ASNS], "asns", where, &r->asns, &r->n_asns,
				  &r->asn_sorted);
	}
	if (!rc && v[RK_PORTS]) {
		rc = pol_cfg_expect_list(c, v[RK_PORTS], "ports", where);
		if (rc)
			return rc;
		cnt = pol_cfg_seq_len(v[RK_PORTS]);
		r->ports = pol_cfg_calloc(c, cnt, sizeof(*r->ports));
		if (!r->ports)
			return SG_ENOMEM;
		r->n_ports = cnt;
		for (i = 0; i < cnt && !rc; i++)
			rc = cfg_port(c, pol_cfg_item(c, v[RK_PORTS], i), where,
				      &r->ports[i]);
	}
	return rc;
}

/* One rule; where is its path id ("floor/deny/0"). */
static int cfg_rule(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *where,
		    struct pol_rule *r)
{
	yaml_node_t *v[SG_ARRAY_LEN(rule_keys)];
	const char *name = NULL;
	int rc, mode = 0;

	pol_cfg_pos(n, &r->line, &r->col);
	rc = pol_cfg_expect_map(c, n, where, "");
	if (rc)
		return rc;
	rc = pol_cfg_keys(c, n, where, rule_keys, SG_ARRAY_LEN(rule_keys), v);
	if (rc)
		return rc;

	if (v[RK_NAME]) {
		rc = pol_cfg_str(c, v[RK_NAME], "name", where, &name);
		if (rc)
			return rc;
	}
	r->id = name ? pol_cfg_strdup(c, name, strlen(name))
		     : pol_cfg_strdup(c, where, strlen(where));
	if (!r->id)
		return SG_ENOMEM;
	rc = cfg_rule_lists(c, v, where, r);
	if (rc)
		return rc;
	r->tls = POL_TLS_PASSTHROUGH;
	if (v[RK_TLS]) {
		static const char *const modes[] = { "passthrough", "inspect" };

		rc = pol_cfg_enum(c, v[RK_TLS], "tls", where, modes, SG_ARRAY_LEN(modes),
				  "passthrough or inspect", &mode);
		if (rc)
			return rc;
		if (mode == 1)
			return pol_cfg_err(c, v[RK_TLS], "tls: inspect is not supported "
					   "by this build yet");
	}
	if (!pol_rule_has_name(r) && !pol_rule_has_addr(r))
		return pol_cfg_err(c, n, "rule matches nothing: give domains, regex, "
				   "cidrs, countries or asns (in %s)", where);
	return cfg_rule_register(c, r, name ? v[RK_NAME] : n, name != NULL);
}

/* A list of rules; prefix is the path of the list ("profiles/web/allow"). */
int pol_cfg_rules(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		  const char *where, const char *prefix, struct pol_ruleset *rs)
{
	char path[CFG_WHERE_MAX + 32];
	size_t i, cnt;
	int rc = pol_cfg_expect_seq(c, n, key, where);

	if (rc)
		return rc;
	cnt = pol_cfg_seq_len(n);
	if (cnt == 0)
		return 0;
	rs->rules = pol_cfg_calloc(c, cnt, sizeof(*rs->rules));
	if (!rs->rules)
		return SG_ENOMEM;
	rs->n = cnt;
	for (i = 0; i < cnt; i++) {
		snprintf(path, sizeof(path), "%s/%zu", prefix, i);
		rc = cfg_rule(c, pol_cfg_item(c, n, i), path, &rs->rules[i]);
		if (rc)
			return rc;
	}
	return 0;
}

void pol_ruleset_free(struct pol_ruleset *rs)
{
	size_t i, j;

	for (i = 0; i < rs->n; i++) {
		struct pol_rule *r = &rs->rules[i];

		free(r->id);
		for (j = 0; j < r->n_domains; j++)
			free(r->domains[j].suffix);
		free(r->domains);
		for (j = 0; j < r->n_regex; j++) {
			free(r->regex[j].pattern);
			free(r->regex[j].tail);
			pcre2_code_free(r->regex[j].code);
		}
		free(r->regex);
		free(r->cidrs);
		free(r->countries);
		free(r->asns);
		free(r->cc_sorted);
		free(r->asn_sorted);
		free(r->ports);
	}
	free(rs->rules);
}
