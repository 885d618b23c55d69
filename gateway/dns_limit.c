/*
 * dns_limit.c - per-sandbox DNS limits and aggregation; see dns_limit.h.
 *
 * Allocation happens when a sandbox is first seen and when a new name or
 * aggregate arrives (tables double); a repeated query allocates nothing.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "gateway/dns_limit.h"
#include "sg_poison.h"

/* Every query takes its sandbox's shard lock once or twice (admit, then
 * count): sharding keeps two sandboxes on two workers from contending. */
#define SHARDS 16
#define BUCKETS 64              /* per shard */
#define SHARD_MAX (DNS_LIMIT_SBX / SHARDS)
#define RULE_MAX 128
#define SRC_MAX 64

/* One (name, type, outcome) of a sandbox's window: what its aggregate
 * record will say. Strings are copied: a reload frees the rule ids the
 * first record borrowed, and the record is written after it. */
struct agg {
	uint64_t h;
	uint64_t count;                 /* queries since the window's first */
	int64_t first_ms, last_ms;      /* of those counted */
	uint16_t qtype;
	int rcode;
	const char *decision, *reason, *proto;  /* static strings */
	unsigned answers;
	char rule[RULE_MAX];            /* "": null */
	char src[SRC_MAX];
	char name[SG_HOST_MAX + 1];
};

/* Refusals of one kind since the last burst record. */
struct burst {
	uint64_t count;
	int64_t first_ms, last_ms;
	uint16_t qtype;
	const char *proto;
	char qname[SG_HOST_MAX + 1];    /* the first name refused, "" none */
	char src[SRC_MAX];
};

struct sbx {
	struct sbx *next;               /* bucket chain */
	struct dns_ident id;
	char sandbox[GW_REG_NAME_MAX];
	int has_sandbox;
	int64_t last_seen;
	int64_t tokens;                 /* milli-tokens */
	int64_t refill_ms;
	int64_t win_start;
	uint64_t *names;                /* owned; open addressing, 0 empty */
	size_t names_cap, n_names;
	struct agg *aggs;               /* owned */
	size_t n_aggs, aggs_cap;
	uint32_t *aidx;                 /* owned; index + 1 into aggs, 0 empty */
	size_t aidx_cap;
	struct burst burst[2];          /* [0] rate, [1] names */
};

struct shard {
	pthread_mutex_t mu;
	struct sbx *b[BUCKETS];
	size_t n;
} __attribute__((aligned(64)));

struct dns_limits {
	struct shard shards[SHARDS];
	dns_emit_fn *emit;
	void *arg;
	atomic_uint_fast64_t rate_limited, name_capped, bursts, aggregated, tracked;
};

static const char *const burst_reason[2] = { "dns_rate_limited", "dns_name_burst" };

static uint64_t hash_str(const char *s, size_t n, uint64_t seed)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h ? h : 1;
}

static void copy_str(char *dst, size_t cap, const char *s)
{
	size_t n = s ? strnlen(s, cap - 1) : 0;

	if (n)
		memcpy(dst, s, n);
	dst[n] = '\0';
}

struct dns_limits *dns_limits_new(dns_emit_fn *emit, void *arg)
{
	struct dns_limits *L = calloc(1, sizeof(*L));
	size_t i;

	if (!L)
		return NULL;
	L->emit = emit;
	L->arg = arg;
	for (i = 0; i < SHARDS; i++)
		pthread_mutex_init(&L->shards[i].mu, NULL);
	return L;
}

static void sbx_free(struct sbx *e)
{
	free(e->names);
	free(e->aggs);
	free(e->aidx);
	free(e);
}

void dns_limits_free(struct dns_limits *L)
{
	size_t i, j;

	if (!L)
		return;
	for (i = 0; i < SHARDS; i++) {
		for (j = 0; j < BUCKETS; j++)
			while (L->shards[i].b[j]) {
				struct sbx *e = L->shards[i].b[j];

				L->shards[i].b[j] = e->next;
				sbx_free(e);
			}
		pthread_mutex_destroy(&L->shards[i].mu);
	}
	free(L);
}

/* ---- records ------------------------------------------------------------ */

static void emit_burst(struct dns_limits *L, struct sbx *e, int k)
{
	struct burst *b = &e->burst[k];
	struct dns_rec r = {
		.kind = DNS_REC_BURST,
		.sandbox = e->has_sandbox ? e->sandbox : NULL,
		.src = b->src,
		.proto = b->proto,
		.qname = b->qname[0] ? b->qname : NULL,
		.host_ok = b->qname[0] != 0,
		.qtype = b->qtype,
		.rcode = 5,     /* REFUSED */
		.decision = "deny",
		.reason = burst_reason[k],
		.count = b->count,
		.span_ms = b->last_ms - b->first_ms,
	};

	if (!b->count)
		return;
	L->emit(L->arg, &r);
	atomic_fetch_add_explicit(&L->bursts, 1, memory_order_relaxed);
	b->count = 0;
}

static void emit_aggs(struct dns_limits *L, struct sbx *e)
{
	size_t i;

	for (i = 0; i < e->n_aggs; i++) {
		struct agg *a = &e->aggs[i];
		struct dns_rec r = {
			.kind = DNS_REC_AGGREGATE,
			.sandbox = e->has_sandbox ? e->sandbox : NULL,
			.src = a->src,
			.proto = a->proto,
			.qname = a->name,
			.host_ok = 1,
			.qtype = a->qtype,
			.rcode = a->rcode,
			.decision = a->decision,
			.reason = a->reason,
			.rule = a->rule[0] ? a->rule : NULL,
			.answers = a->answers,
			.count = a->count,
			.span_ms = a->last_ms - a->first_ms,
		};

		if (a->count) {
			L->emit(L->arg, &r);
			a->count = 0;
		}
	}
}

/* A new window: write the last one's aggregates, forget its names. */
static void window_roll(struct dns_limits *L, struct sbx *e, int64_t now)
{
	emit_aggs(L, e);
	e->n_aggs = 0;
	if (e->aidx)
		memset(e->aidx, 0, e->aidx_cap * sizeof(*e->aidx));
	e->n_names = 0;
	if (e->names)
		memset(e->names, 0, e->names_cap * sizeof(*e->names));
	e->win_start = now;
}

/* Bursts that went quiet, or have lasted a window: write them. */
static void bursts_due(struct dns_limits *L, struct sbx *e, int64_t now, int force)
{
	int k;

	for (k = 0; k < 2; k++) {
		struct burst *b = &e->burst[k];

		if (b->count && (force || now - b->last_ms >= DNS_BURST_QUIET_MS ||
				 now - b->first_ms >= DNS_WINDOW_MS))
			emit_burst(L, e, k);
	}
}

/* ---- entries ------------------------------------------------------------ */

static struct sbx **bucket_of(struct shard *s, const struct dns_ident *id)
{
	return &s->b[(id->hash >> 4) % BUCKETS];
}

/* Make room: flush and drop the least recently seen sandbox of the shard. */
static void evict_one(struct dns_limits *L, struct shard *s, int64_t now)
{
	struct sbx **victim = NULL, **pp;
	size_t j;

	for (j = 0; j < BUCKETS; j++)
		for (pp = &s->b[j]; *pp; pp = &(*pp)->next)
			if (!victim || (*pp)->last_seen < (*victim)->last_seen)
				victim = pp;
	if (victim) {
		struct sbx *e = *victim;

		emit_aggs(L, e);
		bursts_due(L, e, now, 1);
		*victim = e->next;
		sbx_free(e);
		s->n--;
		atomic_fetch_sub_explicit(&L->tracked, 1, memory_order_relaxed);
	}
}

static struct sbx *sbx_get(struct dns_limits *L, struct shard *s, const struct dns_ident *id,
			   const char *sandbox, const struct dns_limit_cfg *cfg, int64_t now)
{
	struct sbx **pp = bucket_of(s, id), *e;

	for (e = *pp; e; e = e->next)
		if (e->id.hash == id->hash && e->id.len == id->len &&
		    !memcmp(e->id.key, id->key, id->len))
			return e;
	if (s->n >= SHARD_MAX)
		evict_one(L, s, now);
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->id = *id;
	e->has_sandbox = sandbox != NULL;
	copy_str(e->sandbox, sizeof(e->sandbox), sandbox);
	e->tokens = cfg ? cfg->burst * 1000 : -1;      /* -1: full at the first admit */
	e->refill_ms = now;
	e->win_start = now;
	e->last_seen = now;
	e->next = *pp;
	*pp = e;
	s->n++;
	atomic_fetch_add_explicit(&L->tracked, 1, memory_order_relaxed);
	return e;
}

/*
 * Is h among the window's names? Adds it if there is room under max.
 * Only hashes are kept (8 bytes a name): the cap is about how many names,
 * not which; a collision lets one extra name through, never blocks one.
 */
static int names_admit(struct sbx *e, uint64_t h, long long max)
{
	size_t i, mask;

	if (e->names) {
		mask = e->names_cap - 1;
		for (i = h & mask; e->names[i]; i = (i + 1) & mask)
			if (e->names[i] == h)
				return 1;
	}
	if ((long long)e->n_names >= max)
		return 0;
	if ((e->n_names + 1) * 2 > e->names_cap) {
		size_t cap = e->names_cap ? e->names_cap * 2 : 64, j;
		uint64_t *nn = calloc(cap, sizeof(*nn));

		if (!nn)
			return 0;       /* fail closed */
		for (j = 0; j < e->names_cap; j++)
			if (e->names[j]) {
				for (i = e->names[j] & (cap - 1); nn[i]; i = (i + 1) & (cap - 1))
					;
				nn[i] = e->names[j];
			}
		free(e->names);
		e->names = nn;
		e->names_cap = cap;
	}
	mask = e->names_cap - 1;
	for (i = h & mask; e->names[i]; i = (i + 1) & mask)
		;
	e->names[i] = h;
	e->n_names++;
	return 1;
}

static void burst_note(struct sbx *e, int k, const struct dns_rec *rec, int64_t now)
{
	struct burst *b = &e->burst[k];

	if (!b->count) {
		b->first_ms = now;
		b->qtype = rec->qtype;
		copy_str(b->qname, sizeof(b->qname), rec->qname);
	}
	b->count++;
	b->last_ms = now;
	b->proto = rec->proto;
	copy_str(b->src, sizeof(b->src), rec->src);
}

enum dns_admit dns_limits_admit(struct dns_limits *L, const struct dns_ident *id,
				const struct dns_rec *rec, const struct dns_limit_cfg *cfg,
				int64_t now)
{
	struct shard *s = &L->shards[id->hash % SHARDS];
	enum dns_admit res = DNS_ADMIT_OK;
	struct sbx *e;
	int64_t cap = cfg->burst * 1000, el;

	pthread_mutex_lock(&s->mu);
	e = sbx_get(L, s, id, rec->sandbox, cfg, now);
	if (!e) {
		res = DNS_ADMIT_RATE;   /* out of memory: fail closed, uncounted */
		goto out;
	}
	e->last_seen = now;
	if (e->tokens < 0)
		e->tokens = cap;
	if (now - e->win_start >= DNS_WINDOW_MS)
		window_roll(L, e, now);
	bursts_due(L, e, now, 0);
	/* Token bucket in thousandths of a query (rate per second = per
	 * thousand ms); elapsed is capped so the product cannot overflow. */
	el = SG_MIN(now - e->refill_ms, (int64_t)100000000);
	if (el > 0) {
		e->tokens = SG_MIN(cap, e->tokens + el * cfg->rate);
		e->refill_ms = now;
	}
	if (e->tokens > cap)
		e->tokens = cap;        /* burst lowered by a reload */
	if (e->tokens < 1000) {
		burst_note(e, 0, rec, now);
		atomic_fetch_add_explicit(&L->rate_limited, 1, memory_order_relaxed);
		res = DNS_ADMIT_RATE;
		goto out;
	}
	e->tokens -= 1000;
	if (rec->qname &&
	    !names_admit(e, hash_str(rec->qname, strlen(rec->qname), 0), cfg->max_names)) {
		burst_note(e, 1, rec, now);
		atomic_fetch_add_explicit(&L->name_capped, 1, memory_order_relaxed);
		res = DNS_ADMIT_NAMES;
	}
out:
	pthread_mutex_unlock(&s->mu);
	return res;
}

/* The outcome is part of the key: an answer that changes within the
 * window (a reload, a name that stops resolving) gets its own record. */
static int agg_same(const struct agg *a, const struct dns_rec *r, uint64_t h)
{
	return a->h == h && a->qtype == r->qtype && a->rcode == r->rcode &&
	       !strcmp(a->reason, r->reason) && !strcmp(a->name, r->qname);
}

static int aidx_grow(struct sbx *e)
{
	size_t cap = e->aidx_cap ? e->aidx_cap * 2 : 64, i, j;
	uint32_t *ni = calloc(cap, sizeof(*ni));

	if (!ni)
		return SG_ENOMEM;
	for (j = 0; j < e->n_aggs; j++) {
		for (i = e->aggs[j].h & (cap - 1); ni[i]; i = (i + 1) & (cap - 1))
			;
		ni[i] = (uint32_t)j + 1;
	}
	free(e->aidx);
	e->aidx = ni;
	e->aidx_cap = cap;
	return 0;
}

int dns_limits_count(struct dns_limits *L, const struct dns_ident *id,
		     const struct dns_rec *rec, int64_t now)
{
	struct shard *s = &L->shards[id->hash % SHARDS];
	uint64_t h = hash_str(rec->qname, strlen(rec->qname), rec->qtype);
	struct sbx *e;
	struct agg *a;
	size_t i, mask;
	int first = 1;

	pthread_mutex_lock(&s->mu);
	e = sbx_get(L, s, id, rec->sandbox, NULL, now);
	if (!e)
		goto out;
	if (now - e->win_start >= DNS_WINDOW_MS)
		window_roll(L, e, now);
	if (e->aidx) {
		mask = e->aidx_cap - 1;
		for (i = h & mask; e->aidx[i]; i = (i + 1) & mask) {
			a = &e->aggs[e->aidx[i] - 1];
			if (agg_same(a, rec, h)) {
				if (!a->count)
					a->first_ms = now;
				a->count++;
				a->last_ms = now;
				a->answers = rec->answers;
				a->proto = rec->proto;
				copy_str(a->src, sizeof(a->src), rec->src);
				atomic_fetch_add_explicit(&L->aggregated, 1, memory_order_relaxed);
				first = 0;
				goto out;
			}
		}
	}
	/* New in this window: the caller records it; remember it, if there
	 * is room, so the next ones are counted. */
	if (e->n_aggs >= DNS_AGG_MAX)
		goto out;
	if ((e->n_aggs + 1) * 2 > e->aidx_cap && aidx_grow(e) < 0)
		goto out;
	if (e->n_aggs == e->aggs_cap) {
		size_t cap = e->aggs_cap ? e->aggs_cap * 2 : 16;
		struct agg *na = realloc(e->aggs, cap * sizeof(*na));

		if (!na)
			goto out;
		e->aggs = na;
		e->aggs_cap = cap;
	}
	a = &e->aggs[e->n_aggs];
	memset(a, 0, offsetof(struct agg, rule));
	a->h = h;
	a->qtype = rec->qtype;
	a->rcode = rec->rcode;
	a->decision = rec->decision;
	a->reason = rec->reason;
	a->proto = rec->proto;
	a->answers = rec->answers;
	copy_str(a->rule, sizeof(a->rule), rec->rule);
	copy_str(a->src, sizeof(a->src), rec->src);
	copy_str(a->name, sizeof(a->name), rec->qname);
	mask = e->aidx_cap - 1;
	for (i = h & mask; e->aidx[i]; i = (i + 1) & mask)
		;
	e->aidx[i] = (uint32_t)++e->n_aggs;
out:
	pthread_mutex_unlock(&s->mu);
	return first;
}

void dns_limits_sweep(struct dns_limits *L, int64_t now, int force)
{
	size_t i, j;

	for (i = 0; i < SHARDS; i++) {
		struct shard *s = &L->shards[i];

		pthread_mutex_lock(&s->mu);
		for (j = 0; j < BUCKETS; j++) {
			struct sbx **pp = &s->b[j];

			while (*pp) {
				struct sbx *e = *pp;

				if (force)
					emit_aggs(L, e);
				else if (now - e->win_start >= DNS_WINDOW_MS)
					window_roll(L, e, now);
				bursts_due(L, e, now, force);
				/* Quiet for two windows with nothing pending: forget
				 * it (its bucket refills to full by then anyway). */
				if (!force && now - e->last_seen >= 2 * DNS_WINDOW_MS) {
					*pp = e->next;
					sbx_free(e);
					s->n--;
					atomic_fetch_sub_explicit(&L->tracked, 1,
								  memory_order_relaxed);
					continue;
				}
				pp = &e->next;
			}
		}
		pthread_mutex_unlock(&s->mu);
	}
}

void dns_limits_stats(struct dns_limits *L, struct dns_limit_stats *st)
{
	st->rate_limited = atomic_load_explicit(&L->rate_limited, memory_order_relaxed);
	st->name_capped = atomic_load_explicit(&L->name_capped, memory_order_relaxed);
	st->bursts = atomic_load_explicit(&L->bursts, memory_order_relaxed);
	st->aggregated = atomic_load_explicit(&L->aggregated, memory_order_relaxed);
	st->tracked = atomic_load_explicit(&L->tracked, memory_order_relaxed);
}
