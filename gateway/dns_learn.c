/*
 * dns_learn.c - the learned-names store; see dns_learn.h.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "gateway/dns_learn.h"
#include "sg_poison.h"

/* Sharded so that workers answering DNS and workers naming connections
 * rarely wait for each other; a fixed table per shard so the store can
 * never grow with what a sandbox asks. */
#define SHARDS 16
#define SHARD_SLOTS (DNS_LEARN_SLOTS / SHARDS)  /* a power of two */
#define PROBE 8                                 /* slots a key may live in */

struct ent {
	uint64_t ident;         /* identity hash; 0: empty */
	int64_t expires;
	struct sg_addr addr;
	char name[SG_HOST_MAX + 1];
};

struct shard {
	pthread_mutex_t mu;
	struct ent *ents;       /* owned, SHARD_SLOTS */
	size_t used;
} __attribute__((aligned(64)));

struct dns_learn {
	struct shard shards[SHARDS];
	atomic_uint_fast64_t count;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* The murmur3 finaliser: FNV's low bits alone index the table badly. */
static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static void ident_finish(struct dns_ident *id)
{
	id->hash = mix(fnv(0xcbf29ce484222325ULL, id->key, id->len));
	if (id->hash == 0)
		id->hash = 1;
}

/*
 * A registered sandbox is its name, so that its IPv4 and IPv6 addresses
 * share one bucket and one set of learned names; any other source is its
 * address (sandboxes under one `sources:` CIDR are still told apart). The
 * key is binary and never printed.
 */
const struct gw_reg_entry *dns_ident_of(struct dns_ident *id, const struct gw_registry *reg,
					const struct sg_addr *src)
{
	const struct gw_reg_entry *re = reg ? gw_registry_lookup(reg, src) : NULL;

	if (re) {
		size_t n = strnlen(re->name, sizeof(re->name) - 1);

		id->key[0] = 'n';
		memcpy(id->key + 1, re->name, n);
		id->len = 1 + n;
	} else if (src->family == AF_INET) {
		id->key[0] = 'a';
		id->key[1] = 4;
		memcpy(id->key + 2, &src->u.v4, 4);
		id->len = 6;
	} else {
		id->key[0] = 'a';
		id->key[1] = 6;
		memcpy(id->key + 2, &src->u.v6, 16);
		id->len = 18;
	}
	ident_finish(id);
	return re;
}

void dns_ident_unknown(struct dns_ident *id)
{
	id->key[0] = '?';
	id->len = 1;
	ident_finish(id);
}

struct dns_learn *dns_learn_new(void)
{
	struct dns_learn *l = calloc(1, sizeof(*l));
	size_t i;

	if (!l)
		return NULL;
	for (i = 0; i < SHARDS; i++) {
		/* calloc: pages are only touched as entries arrive */
		l->shards[i].ents = calloc(SHARD_SLOTS, sizeof(struct ent));
		if (!l->shards[i].ents) {
			while (i--)
				free(l->shards[i].ents);
			free(l);
			return NULL;
		}
		pthread_mutex_init(&l->shards[i].mu, NULL);
	}
	return l;
}

void dns_learn_free(struct dns_learn *l)
{
	size_t i;

	if (!l)
		return;
	for (i = 0; i < SHARDS; i++) {
		pthread_mutex_destroy(&l->shards[i].mu);
		free(l->shards[i].ents);
	}
	free(l);
}

/* (sandbox, address): the identity's hash stands for the identity. Two
 * identities whose 64-bit hashes collide would share names, which only
 * mislabels an audit record; no decision depends on this store. */
static uint64_t key_hash(const struct dns_ident *id, const struct sg_addr *a)
{
	uint64_t h = id->hash;

	if (a->family == AF_INET)
		h = fnv(h, &a->u.v4, 4);
	else
		h = fnv(h, &a->u.v6, 16);
	return mix(h);
}

static int ent_is(const struct ent *e, const struct dns_ident *id, const struct sg_addr *a)
{
	return e->ident == id->hash && sg_addr_eq(&e->addr, a);
}

void dns_learn_put(struct dns_learn *l, const struct dns_ident *id, const struct sg_addr *addr,
		   const char *name, int64_t expires_ms)
{
	uint64_t h = key_hash(id, addr);
	struct shard *s = &l->shards[h % SHARDS];
	size_t base = (size_t)(h >> 8), i, n;
	struct ent *victim = NULL;

	/* The same key in its neighbourhood is refreshed in place; otherwise
	 * a free slot, else the entry that would expire first is given up
	 * (an expired one first of all: its expiry is in the past). */
	pthread_mutex_lock(&s->mu);
	for (i = 0; i < PROBE; i++) {
		struct ent *e = &s->ents[(base + i) & (SHARD_SLOTS - 1)];

		if (ent_is(e, id, addr)) {
			victim = e;
			break;
		}
		/* empty first, then the one that expires first */
		if (!victim || (victim->ident && (!e->ident || e->expires < victim->expires)))
			victim = e;
	}
	if (!victim->ident) {
		s->used++;
		atomic_fetch_add_explicit(&l->count, 1, memory_order_relaxed);
	}
	victim->ident = id->hash;
	victim->addr = *addr;
	victim->expires = expires_ms;
	n = strnlen(name, SG_HOST_MAX);
	memcpy(victim->name, name, n);
	victim->name[n] = '\0';
	pthread_mutex_unlock(&s->mu);
}

int dns_learn_get(struct dns_learn *l, const struct dns_ident *id, const struct sg_addr *addr,
		  int64_t now_ms, char *out)
{
	uint64_t h = key_hash(id, addr);
	struct shard *s = &l->shards[h % SHARDS];
	size_t base = (size_t)(h >> 8), i;
	int found = 0;

	pthread_mutex_lock(&s->mu);
	for (i = 0; i < PROBE; i++) {
		struct ent *e = &s->ents[(base + i) & (SHARD_SLOTS - 1)];

		if (ent_is(e, id, addr)) {
			if (e->expires > now_ms) {
				memcpy(out, e->name, SG_HOST_MAX + 1);
				found = 1;
			}
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

uint64_t dns_learn_count(struct dns_learn *l)
{
	return atomic_load_explicit(&l->count, memory_order_relaxed);
}
