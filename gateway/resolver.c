#include <ares.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "sg.h"
#include "sg_log.h"
#include "gateway/loop.h"
#include "gateway/resolver.h"
#include "policy/pol.h"
#include "sg_poison.h"

#define CACHE_BUCKETS 4096
#define CACHE_MAX 8192
#define MAX_SOCKS 16

struct cache_ent {
	struct cache_ent *next;
	int64_t expires;
	struct gw_resolve_result res;
	char name[SG_HOST_MAX + 1];
};

struct query {
	struct query *next;
	struct gw_resolver *r;          /* borrowed; NULL once the resolver is going away */
	struct gw_resolve_waiter *waiters;
	char name[SG_HOST_MAX + 1];
};

struct ares_sock {
	struct gw_io io;
	struct gw_resolver *r;
	int used;
};

struct gw_resolver {
	struct gw_loop *loop;           /* borrowed */
	ares_channel channel;
	struct gw_timer timer;
	struct ares_sock socks[MAX_SOCKS];
	struct query *pending;          /* owned list */
	struct gw_resolve_waiter *ready;/* delivered before sleep */
	struct cache_ent *cache[CACHE_BUCKETS];
	size_t n_cache;
	int64_t min_ttl, max_ttl, neg_ttl;
	/* read by the control API's thread: relaxed atomics */
	atomic_uint_fast64_t hits, misses, entries;
};

const char *gw_resolve_status_str(enum gw_resolve_status s)
{
	switch (s) {
	case GW_RESOLVE_OK: return "ok";
	case GW_RESOLVE_NXDOMAIN: return "nxdomain";
	case GW_RESOLVE_TIMEOUT: return "timeout";
	default: return "failed";
	}
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;       /* FNV-1a */

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

static void waiter_link(struct gw_resolve_waiter **head, struct gw_resolve_waiter *w)
{
	w->next = *head;
	if (w->next)
		w->next->pprev = &w->next;
	w->pprev = head;
	*head = w;
}

static void waiter_unlink(struct gw_resolve_waiter *w)
{
	if (!w->pprev)
		return;
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	w->next = NULL;
	w->pprev = NULL;
}

/* ---- c-ares sockets on our loop ---- */

static void sock_io_cb(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct ares_sock *s = sg_container_of(io, struct ares_sock, io);

	SG_UNUSED(l);
	ares_process_fd(s->r->channel,
			ev & (EPOLLIN | EPOLLERR | EPOLLHUP) ? io->fd : ARES_SOCKET_BAD,
			ev & EPOLLOUT ? io->fd : ARES_SOCKET_BAD);
}

/* ARES_OPT_SOCK_STATE_CB: c-ares tells us which of its sockets to watch. */
static void sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	struct gw_resolver *r = data;
	struct ares_sock *free_slot = NULL;
	int i;

	for (i = 0; i < MAX_SOCKS; i++) {
		struct ares_sock *s = &r->socks[i];

		if (s->used && s->io.fd == fd) {
			if (!readable && !writable) {
				gw_io_del(r->loop, &s->io);
				s->used = 0;
			} else {
				gw_io_mod(r->loop, &s->io, (readable ? EPOLLIN : 0) |
					  (writable ? EPOLLOUT : 0));
			}
			return;
		}
		if (!s->used && !free_slot)
			free_slot = s;
	}
	if (!readable && !writable)
		return;
	if (!free_slot) {
		/* Cannot watch it: c-ares times the query out; never blocks. */
		sg_warn("resolver: more than %d sockets in use", MAX_SOCKS);
		return;
	}
	free_slot->r = r;
	free_slot->used = 1;
	if (gw_io_add(r->loop, &free_slot->io, fd, (readable ? EPOLLIN : 0) |
		      (writable ? EPOLLOUT : 0), sock_io_cb) < 0)
		free_slot->used = 0;
}

static void timer_cb(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_resolver *r = sg_container_of(t, struct gw_resolver, timer);

	SG_UNUSED(l);
	ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
}

/* ---- cache ---- */

static struct cache_ent *cache_find(struct gw_resolver *r, const char *name, int64_t now)
{
	struct cache_ent **pp = &r->cache[name_hash(name) % CACHE_BUCKETS];

	while (*pp) {
		struct cache_ent *e = *pp;

		if (e->expires <= now) {        /* drop stale entries as we pass */
			*pp = e->next;
			free(e);
			r->n_cache--;
			continue;
		}
		if (!strcmp(e->name, name))
			return e;
		pp = &e->next;
	}
	return NULL;
}

static void cache_flush(struct gw_resolver *r, int only_expired, int64_t now)
{
	size_t i;

	atomic_store_explicit(&r->entries, 0, memory_order_relaxed);

	for (i = 0; i < CACHE_BUCKETS; i++) {
		struct cache_ent **pp = &r->cache[i];

		while (*pp) {
			struct cache_ent *e = *pp;

			if (!only_expired || e->expires <= now) {
				*pp = e->next;
				free(e);
				r->n_cache--;
			} else {
				pp = &e->next;
			}
		}
	}
}

static void cache_put(struct gw_resolver *r, const char *name,
		      const struct gw_resolve_result *res, int64_t ttl_ms)
{
	int64_t now = gw_loop_now(r->loop);
	struct cache_ent *e = cache_find(r, name, now);
	uint32_t b;

	if (e) {
		e->res = *res;
		e->expires = now + ttl_ms;
		return;
	}
	if (r->n_cache >= CACHE_MAX) {
		cache_flush(r, 1, now);
		if (r->n_cache >= CACHE_MAX)
			cache_flush(r, 0, now); /* bounded memory beats a warm cache */
	}
	e = malloc(sizeof(*e));
	if (!e)
		return;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->res = *res;
	e->res.from_cache = 1;
	e->expires = now + ttl_ms;
	b = name_hash(name) % CACHE_BUCKETS;
	e->next = r->cache[b];
	r->cache[b] = e;
	r->n_cache++;
	atomic_store_explicit(&r->entries, r->n_cache, memory_order_relaxed);
}

/* ---- queries ---- */

static void deliver_all(struct gw_resolver *r, struct query *q,
			const struct gw_resolve_result *res)
{
	while (q->waiters) {
		struct gw_resolve_waiter *w = q->waiters;

		waiter_unlink(w);
		w->query = NULL;
		w->res = *res;
		waiter_link(&r->ready, w);
	}
}

static void addrinfo_cb(void *arg, int status, int timeouts, struct ares_addrinfo *ai)
{
	struct query *q = arg, **pp;
	struct gw_resolver *r = q->r;
	struct gw_resolve_result res;
	int64_t ttl = INT64_MAX;

	SG_UNUSED(timeouts);
	memset(&res, 0, sizeof(res));
	if (!r) {                       /* resolver being destroyed */
		if (ai)
			ares_freeaddrinfo(ai);
		free(q);
		return;
	}
	for (pp = &r->pending; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	if (status == ARES_SUCCESS && ai) {
		struct ares_addrinfo_node *n;
		size_t n4 = 0, n6 = 0, k4, k6;
		struct sg_addr a;

		/* The slots are shared by the families fairly: a name with
		 * many AAAA records must still yield its A records (the DNS
		 * responder answers each family from this one result). */
		for (n = ai->nodes; n; n = n->ai_next) {
			if (n->ai_family == AF_INET)
				n4++;
			else if (n->ai_family == AF_INET6)
				n6++;
		}
		k4 = SG_MIN(n4, SG_MAX((size_t)GW_RESOLVE_MAX_ADDRS / 2,
				       (size_t)GW_RESOLVE_MAX_ADDRS - SG_MIN(n6, (size_t)GW_RESOLVE_MAX_ADDRS)));
		k6 = SG_MIN(n6, (size_t)GW_RESOLVE_MAX_ADDRS - k4);
		for (n = ai->nodes; n && res.n < GW_RESOLVE_MAX_ADDRS; n = n->ai_next) {
			size_t *k = n->ai_family == AF_INET ? &k4 : &k6;

			if (*k == 0 || sg_addr_from_sa(n->ai_addr, &a) < 0)
				continue;
			(*k)--;
			res.addrs[res.n++] = a;
			if ((int64_t)n->ai_ttl * 1000 < ttl)
				ttl = (int64_t)n->ai_ttl * 1000;
		}
		res.status = res.n ? GW_RESOLVE_OK : GW_RESOLVE_NXDOMAIN;
	} else if (status == ARES_ENOTFOUND || status == ARES_ENODATA || status == ARES_SUCCESS) {
		res.status = GW_RESOLVE_NXDOMAIN;
	} else if (status == ARES_ETIMEOUT) {
		res.status = GW_RESOLVE_TIMEOUT;
	} else {
		res.status = GW_RESOLVE_FAILED;
	}
	if (res.status == GW_RESOLVE_OK) {
		res.ttl_ms = SG_MAX(r->min_ttl, SG_MIN(ttl, r->max_ttl));
		cache_put(r, q->name, &res, res.ttl_ms);
	} else if (res.status == GW_RESOLVE_NXDOMAIN) {
		res.ttl_ms = r->neg_ttl;
		cache_put(r, q->name, &res, r->neg_ttl);
	}
	sg_debug("resolve %s: %s (%zu addresses)", q->name,
		 gw_resolve_status_str(res.status), res.n);
	/* Waiters get their copy now and their callback before the loop
	 * sleeps: never from inside c-ares. */
	deliver_all(r, q, &res);
	if (ai)
		ares_freeaddrinfo(ai);
	free(q);
}

void gw_resolve_start(struct gw_resolver *r, const char *name,
		      struct gw_resolve_waiter *w, gw_resolve_cb *cb)
{
	struct ares_addrinfo_hints hints;
	struct cache_ent *e;
	struct query *q;

	w->cb = cb;
	w->next = NULL;
	w->pprev = NULL;
	w->query = NULL;
	e = cache_find(r, name, gw_loop_now(r->loop));
	if (e) {
		atomic_fetch_add_explicit(&r->hits, 1, memory_order_relaxed);
		w->res = e->res;
		w->res.ttl_ms = e->expires - gw_loop_now(r->loop);
		waiter_link(&r->ready, w);
		return;
	}
	atomic_fetch_add_explicit(&r->misses, 1, memory_order_relaxed);
	for (q = r->pending; q; q = q->next)
		if (!strcmp(q->name, name)) {
			waiter_link(&q->waiters, w);
			w->query = q;
			return;
		}
	q = calloc(1, sizeof(*q));
	if (!q) {
		static const struct gw_resolve_result oom = { .status = GW_RESOLVE_FAILED };

		w->res = oom;
		waiter_link(&r->ready, w);
		return;
	}
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->r = r;
	q->next = r->pending;
	r->pending = q;
	waiter_link(&q->waiters, w);
	w->query = q;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_flags = ARES_AI_NOSORT;
	/* May call addrinfo_cb synchronously (e.g. no servers): then q is
	 * freed and w is on the ready list, delivered before sleep. */
	ares_getaddrinfo(r->channel, name, NULL, &hints, addrinfo_cb, q);
}

void gw_resolve_cancel(struct gw_resolver *r, struct gw_resolve_waiter *w)
{
	SG_UNUSED(r);
	waiter_unlink(w);
	w->query = NULL;
}

void gw_resolver_before_sleep(struct gw_resolver *r)
{
	struct timeval tv, *tvp;

	/* Deliver: a callback may start another resolution (next address
	 * family, another connection): those land on the list again and are
	 * handled in this same loop. */
	while (r->ready) {
		struct gw_resolve_waiter *w = r->ready;

		waiter_unlink(w);
		w->cb(w, &w->res);
	}
	tvp = ares_timeout(r->channel, NULL, &tv);
	if (tvp)
		gw_timer_set(r->loop, &r->timer, (int64_t)tvp->tv_sec * 1000 +
			     tvp->tv_usec / 1000 + 1);
	else
		gw_timer_cancel(r->loop, &r->timer);
}

struct gw_resolver *gw_resolver_new(struct gw_loop *l, const struct sg_config *cfg,
				    char *err, size_t errsz)
{
	struct gw_resolver *r = calloc(1, sizeof(*r));
	struct ares_options opts;
	int optmask, rc;
	char lookups[] = "b";   /* DNS only: the gateway host's /etc/hosts is not policy */

	if (!r) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	r->loop = l;
	gw_timer_init(&r->timer, timer_cb);
	r->min_ttl = cfg->resolver_min_ttl_ms;
	r->max_ttl = cfg->resolver_max_ttl_ms;
	r->neg_ttl = cfg->resolver_negative_ttl_ms;
	memset(&opts, 0, sizeof(opts));
	opts.sock_state_cb = sock_state_cb;
	opts.sock_state_cb_data = r;
	/* c-ares backs off per try (t, then 2t): three t's is our budget. */
	opts.timeout = (int)SG_MAX(cfg->resolver_timeout_ms / 3, 100);
	opts.tries = 2;
	opts.lookups = lookups;
	optmask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
		  ARES_OPT_LOOKUPS;
	rc = ares_init_options(&r->channel, &opts, optmask);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errsz, "resolver: %s", ares_strerror(rc));
		free(r);
		return NULL;
	}
	if (cfg->resolver_servers) {
		rc = ares_set_servers_ports_csv(r->channel, cfg->resolver_servers);
		if (rc != ARES_SUCCESS) {
			snprintf(err, errsz, "resolver servers \"%s\": %s",
				 cfg->resolver_servers, ares_strerror(rc));
			ares_destroy(r->channel);
			free(r);
			return NULL;
		}
	}
	return r;
}

void gw_resolver_free(struct gw_resolver *r)
{
	struct query *q;
	int i;

	if (!r)
		return;
	for (q = r->pending; q; q = q->next)
		q->r = NULL;            /* their callbacks free them during destroy */
	r->pending = NULL;
	for (i = 0; i < MAX_SOCKS; i++)
		if (r->socks[i].used)
			gw_io_del(r->loop, &r->socks[i].io);
	ares_destroy(r->channel);
	gw_timer_cancel(r->loop, &r->timer);
	cache_flush(r, 0, 0);
	free(r);
}

void gw_resolver_stats(const struct gw_resolver *r, uint64_t *hits, uint64_t *misses,
		       uint64_t *entries)
{
	*hits = atomic_load_explicit(&r->hits, memory_order_relaxed);
	*misses = atomic_load_explicit(&r->misses, memory_order_relaxed);
	*entries = atomic_load_explicit(&r->entries, memory_order_relaxed);
}
