/*
 * pol_int.h - what the files of policy/ share and nobody else sees.
 *
 *   pol_config.c  the loader: YAML helpers, gateway/audit/geoip sections,
 *                 floor/profiles/sandboxes, load and free;
 *   pol_rule.c    one rule: domains, regex, cidrs, countries, asns, ports;
 *   pol_geo.c     GeoIP databases (libmaxminddb), country codes;
 *   pol_index.c   the compiled matchers, built once at load;
 *   pol_eval.c    evaluation over them;
 *   pol_check.c   `policy check` warnings; pol_explain.c `policy explain`.
 *
 * The loader's helpers report the first error into the context as
 * "FILE:LINE:COL: message" and return SG_EINVAL (SG_ENOMEM for memory).
 */
#ifndef POL_INT_H
#define POL_INT_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "pol.h"

#define POL_NONE UINT32_MAX
/* Profile and sandbox names appear in rule ids and messages. */
#define CFG_MAX_NAME    200
#define CFG_WHERE_MAX   (CFG_MAX_NAME + 64)

/* ---- loader (pol_config.c, pol_rule.c) ------------------------------ */

/* Every rule id seen so far, hashed, to refuse a name used twice. */
struct pol_cfg_ruleref {
	const char *id;         /* borrowed from the rule; NULL: free slot */
	int line;
	int named;
};

struct pol_cfg_ctx {
	const char *path;       /* borrowed */
	yaml_document_t *doc;   /* borrowed */
	char *err;              /* borrowed */
	size_t errsz;
	struct sg_config *cfg;  /* borrowed: the one being built */
	size_t visited;
	struct pol_cfg_ruleref *ids;    /* owned; open addressing */
	size_t n_ids, cap_ids;          /* cap: a power of two or 0 */
};

/* A key a section accepts; refuse: the error for a feature not built yet. */
struct pol_cfg_key {
	const char *name;
	const char *refuse;
};

__attribute__((format(printf, 3, 4)))
int pol_cfg_err(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *fmt, ...);
int pol_cfg_nomem(struct pol_cfg_ctx *c);
void *pol_cfg_calloc(struct pol_cfg_ctx *c, size_t n, size_t size);
char *pol_cfg_strdup(struct pol_cfg_ctx *c, const char *s, size_t len);
yaml_node_t *pol_cfg_node(struct pol_cfg_ctx *c, int idx);
const char *pol_cfg_in(const char *where);
size_t pol_cfg_seq_len(const yaml_node_t *n);
yaml_node_t *pol_cfg_item(struct pol_cfg_ctx *c, const yaml_node_t *seq, size_t i);
int pol_cfg_expect_map(struct pol_cfg_ctx *c, const yaml_node_t *n,
		       const char *key, const char *where);
int pol_cfg_expect_seq(struct pol_cfg_ctx *c, const yaml_node_t *n,
		       const char *key, const char *where);
int pol_cfg_expect_list(struct pol_cfg_ctx *c, const yaml_node_t *n,
			const char *key, const char *where);
int pol_cfg_str(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		const char *where, const char **out);
int pol_cfg_enum(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		 const char *where, const char *const *words, size_t nwords,
		 const char *expect, int *out);
int pol_cfg_keys(struct pol_cfg_ctx *c, const yaml_node_t *map, const char *where,
		 const struct pol_cfg_key *keys, size_t nkeys, yaml_node_t **vals);

/* pol_rule.c */
int pol_cfg_cidr(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		 const char *where, struct pol_cidr *out);
int pol_cfg_rules(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		  const char *where, const char *prefix, struct pol_ruleset *rs);
void pol_ruleset_free(struct pol_ruleset *rs);

static inline void pol_cfg_pos(const yaml_node_t *n, int *line, int *col)
{
	*line = (int)n->start_mark.line + 1;
	*col = (int)n->start_mark.column + 1;
}

/* A rule's name condition: domains and regexes, any one matching. */
static inline int pol_rule_has_name(const struct pol_rule *r)
{
	return r->n_domains || r->n_regex;
}

/* Address conditions: undecided until the address is known. */
static inline int pol_rule_has_addr(const struct pol_rule *r)
{
	return r->n_cidrs || r->n_countries || r->n_asns;
}

/* ---- GeoIP (pol_geo.c) ---------------------------------------------- */

enum pol_geo_db { POL_GEO_COUNTRY, POL_GEO_ASN };

/* Open one database into *g (allocated on first use); message in err. */
int pol_geo_open(struct pol_geo **g, enum pol_geo_db which, const char *path,
		 char *err, size_t errsz);
void pol_geo_free(struct pol_geo *g);
/* 'K' << 8 | 'P' for an ISO 3166-1 alpha-2 code (any case), or 0. */
uint32_t pol_geo_country_code(const char *s);
/* Country code ('K' << 8 | 'P', 0 unknown) and AS number (0 unknown). */
void pol_geo_find(const struct pol_geo *g, const struct sg_addr *a,
		  uint32_t *cc, uint32_t *asn);

/* ---- compiled matchers (pol_index.c) -------------------------------- */

/* Where an index says a rule could match. */
enum pol_ref_kind {
	POL_REF_EXACT,          /* name == node */
	POL_REF_ONE,            /* one label, then node */
	POL_REF_MANY,           /* one or more labels, then node */
	POL_REF_REGEX,          /* run rule->regex[aux] if the rest ends with its tail */
	POL_REF_CIDR,           /* the rule has this prefix among its cidrs */
	POL_REF_CIDR_DRIVER,    /* same, and the rule has no name condition */
};

struct pol_ref {
	uint32_t rs;            /* ruleset id */
	uint32_t rule;          /* index in the ruleset */
	uint32_t aux;           /* pattern or regex index in the rule */
	uint32_t kind;          /* enum pol_ref_kind */
};

/* A suffix (or the root, "") and the refs filed under it. */
struct pol_dnode {
	const char *s;          /* borrowed from a rule; "" for the root */
	uint32_t len;
	uint32_t ref0, nref;    /* in pol_index.drefs, sorted by (rs, rule) */
	uint64_t hash;
};

/* One address family's prefixes as nested ranges. */
struct pol_ckey {
	uint64_t hi, lo;        /* IPv4: hi = 0, lo = address */
};

struct pol_cnode {
	uint32_t parent;        /* the enclosing prefix, or POL_NONE */
	uint32_t ref0, nref;    /* in pol_cfam.refs, sorted by (rs, rule) */
	int plen;
	struct pol_ckey start;
};

struct pol_cfam {
	struct pol_ckey *seg_start;     /* owned, ascending */
	uint32_t *seg_node;             /* owned: innermost prefix from there on */
	size_t n_seg;
	struct pol_cnode *nodes;        /* owned */
	size_t n_nodes;
	struct pol_ref *refs;           /* owned */
	size_t n_refs;
};

/* The rule with the lowest index, by port, among rules without a name
 * condition: with no address yet, that is the first undecided one. */
struct pol_pstep {
	uint32_t lo;            /* from this port up to the next step's lo */
	uint32_t rule;          /* or POL_NONE */
};

/* Geo-driven rules (no name, no cidrs), by country or AS number. */
struct pol_gref {
	uint32_t key, rs, rule;
};

struct pol_rsx {
	const struct pol_ruleset *rs;   /* borrowed */
	struct pol_pstep *steps;        /* owned, or NULL: no address-only rule */
	size_t n_steps;
	size_t n_geo;                   /* geo-driven rules in it */
};

struct pol_index {
	struct pol_dnode *dnodes;       /* owned; [0] is the root */
	size_t n_dnodes;
	uint64_t *dslots;               /* owned: hash high bits << 32 | node + 1 */
	size_t dmask;
	struct pol_ref *drefs;          /* owned */
	size_t n_drefs;
	struct pol_cfam v4, v6;
	struct pol_gref *grefs;         /* owned: by country, then by asn */
	size_t n_gcc, n_gasn;           /* grefs[0..n_gcc) countries, then asns */
	struct pol_rsx *rsx;            /* owned, by ruleset id */
	size_t n_rs;
	size_t bytes;                   /* memory the index holds */
};

int pol_index_build(struct sg_config *cfg, char *err, size_t errsz);
void pol_index_free(struct pol_index *ix);

/* FNV-1a from the last byte to the first, then a finaliser: the hash of
 * every suffix of a name falls out of one pass from its right end. */
#define POL_H0 0xcbf29ce484222325ULL
static inline uint64_t pol_hstep(uint64_t h, unsigned char c)
{
	return (h ^ c) * 0x100000001b3ULL;
}

static inline uint64_t pol_hfin(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

/* The node of suffix s (len bytes, finalised hash h), or POL_NONE. */
uint32_t pol_dindex_find(const struct pol_index *ix, const char *s, size_t len,
			 uint64_t h);
uint64_t pol_dhash(const char *s, size_t len);
/* The refs of ruleset rs in [refs, refs + n), sorted by (rs, rule). */
const struct pol_ref *pol_refs_of(const struct pol_ref *refs, size_t n, uint32_t rs,
				  size_t *cnt);
/* Prefix key of an address; returns its family's index or NULL. */
const struct pol_cfam *pol_cfam_of(const struct pol_index *ix, const struct sg_addr *a,
				   struct pol_ckey *k);
/* The innermost prefix containing k, or POL_NONE; walk .parent for the rest. */
uint32_t pol_cfam_find(const struct pol_cfam *f, const struct pol_ckey *k);

/* Is v in the sorted array a[0..n)? (binary search) */
int pol_u32_in(const uint32_t *a, size_t n, uint32_t v);

#endif
