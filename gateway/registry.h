/*
 * registry.h - sandboxes registered at run time (POST /v1/sandboxes): a
 * name, the addresses its traffic comes from, and labels.
 *
 * A registry is immutable once built and refcounted like a policy
 * snapshot: the control API builds a new one for every change and swaps
 * it in; connections pin the one they started with, so the name they
 * were judged under stays valid until they close. Lookups by source
 * address are a hash probe, not a scan.
 */
#ifndef GW_REGISTRY_H
#define GW_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_str.h"

#define GW_REG_NAME_MAX 128
#define GW_REG_ADDRS_MAX 16
#define GW_REG_LABELS_MAX 2048
#define GW_REG_REASON_MAX 64

struct gw_reg_entry {
	char name[GW_REG_NAME_MAX];
	struct sg_addr addrs[GW_REG_ADDRS_MAX];
	size_t n_addrs;
	char labels[GW_REG_LABELS_MAX];         /* a JSON object, as given (validated) */
	int64_t registered_at;                  /* unix seconds */
	/* Stopped by the gateway (POST .../stop, or a secret violation with
	 * block_and_kill): its reason code; "" while running. A stopped
	 * sandbox stays registered, so its traffic is still recognised, and
	 * refused, until its adapter tears it down and unregisters it. */
	char stopped[GW_REG_REASON_MAX];
	int64_t stopped_at;                     /* unix seconds, 0 while running */
};

struct gw_registry {
	atomic_int refs;
	size_t n;
	struct gw_reg_entry *entries;           /* owned, n of them */
	size_t nslots;                          /* power of two */
	int32_t *slots;                         /* owned: address hash -> entry index, -1 empty */
};

/* An empty registry. */
struct gw_registry *gw_registry_new(void);
struct gw_registry *gw_registry_ref(struct gw_registry *r);
void gw_registry_put(struct gw_registry *r);
/* The entry whose addresses include a, or NULL. */
const struct gw_reg_entry *gw_registry_lookup(const struct gw_registry *r,
					      const struct sg_addr *a);
const struct gw_reg_entry *gw_registry_find(const struct gw_registry *r, const char *name);
/*
 * A copy of r with e added (replacing an entry of the same name). An
 * address already held by another name is a conflict: returns NULL with
 * *conflict set to that name. NULL with *conflict NULL: out of memory.
 */
struct gw_registry *gw_registry_with(const struct gw_registry *r, const struct gw_reg_entry *e,
				     const char **conflict);
/* A copy of r without name; NULL if out of memory. *found says whether it was there. */
struct gw_registry *gw_registry_without(const struct gw_registry *r, const char *name,
					int *found);

#endif
