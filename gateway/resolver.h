/*
 * resolver.h - per-worker name resolution: static answers from the config,
 * a TTL cache (floor, ceiling, negative entries), and c-ares on the loop
 * for the rest. Queries for one name are coalesced.
 *
 * A waiter is embedded in its owner (the connection). The callback runs
 * from the loop, never from inside gw_resolve_start(), even on a cache hit,
 * so the caller's state machine has one shape. gw_resolve_cancel() on a
 * pending waiter guarantees its callback will not run.
 */
#ifndef GW_RESOLVER_H
#define GW_RESOLVER_H

#include <stdint.h>

#include "sg_str.h"

#define GW_RESOLVE_MAX_ADDRS 8

struct gw_loop;
struct gw_resolver;
struct sg_config;

enum gw_resolve_status {
	GW_RESOLVE_OK,
	GW_RESOLVE_NXDOMAIN,    /* the name does not exist / has no A or AAAA */
	GW_RESOLVE_TIMEOUT,
	GW_RESOLVE_FAILED,      /* SERVFAIL, refused, no servers, ... */
};

struct gw_resolve_result {
	enum gw_resolve_status status;
	int is_static;          /* answered by resolver.hosts */
	int from_cache;
	int64_t ttl_ms;         /* how long the answer stays good from delivery: the cache
				 * entry's remaining life (upstream TTL clamped to min/max_ttl;
				 * negative_ttl for NXDOMAIN); 0 for timeouts and failures */
	size_t n;               /* at most GW_RESOLVE_MAX_ADDRS, both families shared fairly */
	struct sg_addr addrs[GW_RESOLVE_MAX_ADDRS];
};

struct gw_resolve_waiter;
typedef void gw_resolve_cb(struct gw_resolve_waiter *w, const struct gw_resolve_result *r);

struct gw_resolve_waiter {
	struct gw_resolve_waiter *next, **pprev;   /* in its query's or the ready list */
	gw_resolve_cb *cb;
	void *query;                               /* internal */
	struct gw_resolve_result res;              /* filled when it is ready */
};

/* Build from the config's resolver settings. Returns NULL with err set. */
struct gw_resolver *gw_resolver_new(struct gw_loop *l, const struct sg_config *cfg,
				    char *err, size_t errsz);
void gw_resolver_free(struct gw_resolver *r);
void gw_resolve_start(struct gw_resolver *r, const char *name,
		      struct gw_resolve_waiter *w, gw_resolve_cb *cb);
void gw_resolve_cancel(struct gw_resolver *r, struct gw_resolve_waiter *w);
/* Before-sleep work: deliver ready callbacks, re-arm the c-ares timer. */
void gw_resolver_before_sleep(struct gw_resolver *r);
/* Counters for /metrics. */
void gw_resolver_stats(const struct gw_resolver *r, uint64_t *hits, uint64_t *misses,
		       uint64_t *entries);
const char *gw_resolve_status_str(enum gw_resolve_status s);

#endif
