#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "gateway/registry.h"
#include "sg_poison.h"

static uint32_t addr_hash(const struct sg_addr *a)
{
	const uint8_t *p = a->family == AF_INET ? (const uint8_t *)&a->u.v4
						: (const uint8_t *)&a->u.v6;
	size_t n = a->family == AF_INET ? 4 : 16, i;
	uint32_t h = 2166136261u;

	for (i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* Build the address index of r (entries already in place). */
static int index_build(struct gw_registry *r)
{
	size_t want = 16, total = 0, i, j;

	/* At most half full: probes stay short. */
	for (i = 0; i < r->n; i++)
		total += r->entries[i].n_addrs;
	while (want < 2 * total + 1)
		want *= 2;
	r->slots = malloc(want * sizeof(*r->slots));
	if (!r->slots)
		return SG_ENOMEM;
	r->nslots = want;
	for (i = 0; i < want; i++)
		r->slots[i] = -1;
	for (i = 0; i < r->n; i++)
		for (j = 0; j < r->entries[i].n_addrs; j++) {
			size_t s = addr_hash(&r->entries[i].addrs[j]) & (want - 1);

			while (r->slots[s] >= 0)
				s = (s + 1) & (want - 1);       /* linear probing */
			r->slots[s] = (int32_t)i;
		}
	return 0;
}

static struct gw_registry *reg_alloc(size_t n)
{
	struct gw_registry *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	atomic_init(&r->refs, 1);
	if (n) {
		r->entries = calloc(n, sizeof(*r->entries));
		if (!r->entries) {
			free(r);
			return NULL;
		}
	}
	return r;
}

struct gw_registry *gw_registry_new(void)
{
	struct gw_registry *r = reg_alloc(0);

	if (r && index_build(r) < 0) {
		free(r);
		return NULL;
	}
	return r;
}

struct gw_registry *gw_registry_ref(struct gw_registry *r)
{
	atomic_fetch_add(&r->refs, 1);
	return r;
}

void gw_registry_put(struct gw_registry *r)
{
	if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
		free(r->entries);
		free(r->slots);
		free(r);
	}
}

const struct gw_reg_entry *gw_registry_lookup(const struct gw_registry *r,
					      const struct sg_addr *a)
{
	size_t s;

	if (!r || !r->n)
		return NULL;
	s = addr_hash(a) & (r->nslots - 1);
	while (r->slots[s] >= 0) {
		const struct gw_reg_entry *e = &r->entries[r->slots[s]];
		size_t j;

		for (j = 0; j < e->n_addrs; j++)
			if (sg_addr_eq(&e->addrs[j], a))
				return e;
		s = (s + 1) & (r->nslots - 1);
	}
	return NULL;
}

const struct gw_reg_entry *gw_registry_find(const struct gw_registry *r, const char *name)
{
	size_t i;

	for (i = 0; r && i < r->n; i++)
		if (!strcmp(r->entries[i].name, name))
			return &r->entries[i];
	return NULL;
}

struct gw_registry *gw_registry_with(const struct gw_registry *r, const struct gw_reg_entry *e,
				     const char **conflict)
{
	struct gw_registry *nr;
	size_t i, n = 0;

	*conflict = NULL;
	for (i = 0; i < e->n_addrs; i++) {
		const struct gw_reg_entry *o = gw_registry_lookup(r, &e->addrs[i]);

		if (o && strcmp(o->name, e->name)) {
			*conflict = o->name;
			return NULL;
		}
	}
	nr = reg_alloc(r->n + 1);
	if (!nr)
		return NULL;
	for (i = 0; i < r->n; i++)
		if (strcmp(r->entries[i].name, e->name))
			nr->entries[n++] = r->entries[i];
	nr->entries[n++] = *e;
	nr->n = n;
	if (index_build(nr) < 0) {
		gw_registry_put(nr);
		return NULL;
	}
	return nr;
}

struct gw_registry *gw_registry_without(const struct gw_registry *r, const char *name,
					int *found)
{
	struct gw_registry *nr = reg_alloc(r->n);
	size_t i, n = 0;

	*found = 0;
	if (!nr)
		return NULL;
	for (i = 0; i < r->n; i++) {
		if (!strcmp(r->entries[i].name, name)) {
			*found = 1;
			continue;
		}
		nr->entries[n++] = r->entries[i];
	}
	nr->n = n;
	if (index_build(nr) < 0) {
		gw_registry_put(nr);
		return NULL;
	}
	return nr;
}
