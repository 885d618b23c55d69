/*
 * gw.h - the gateway daemon's shared types: snapshots, workers, listeners.
 *
 * Threads: the main thread owns signals and reloads; each worker thread
 * owns one gw_loop, its own SO_REUSEPORT listeners, its resolver, its pipe
 * pool and its connections. Workers share only immutable snapshots
 * (refcounted), the audit writer (a queue) and a few atomic counters.
 */
#ifndef GW_H
#define GW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gateway/loop.h"
#include "gateway/metrics.h"
#include "gateway/registry.h"
#include "policy/pol.h"

struct aud_writer;
struct gw_resolver;
struct gw_conn;
struct gw_dns;                  /* dns.h */
struct gw_dns_worker;           /* dns.h */

/* An immutable config plus a refcount; connections pin the one they started with. */
struct gw_snap {
	atomic_int refs;
	uint64_t generation;
	struct sg_config *cfg;  /* owned */
};

struct gw_snap *gw_snap_new(struct sg_config *cfg, uint64_t generation);
struct gw_snap *gw_snap_ref(struct gw_snap *s);
void gw_snap_put(struct gw_snap *s);

enum gw_listener_kind { GW_LISTEN_TRANSPARENT, GW_LISTEN_PROXY };

struct gw_listener {
	struct gw_io io;
	enum gw_listener_kind kind;
	struct gw_worker *w;    /* borrowed */
	int port;               /* bound port: a connection "redirected" to it was not */
};

struct gw_pipe {
	int fds[2];
};

#define GW_PIPE_POOL 256

struct gw_stats {
	atomic_uint_fast64_t accepted, refused_limit, refused_audit,
			     allowed, denied, would_deny, bytes_up, bytes_down;
};

struct gw_daemon;

struct gw_worker {
	int id;
	pthread_t thread;
	struct gw_daemon *d;            /* borrowed */
	struct gw_loop *loop;           /* owned */
	struct gw_resolver *resolver;   /* owned */
	struct gw_snap *snap;           /* ref: the current snapshot */
	struct gw_registry *registry;   /* ref: sandboxes registered at run time */
	struct gw_metrics metrics;      /* this worker's decision counters */
	struct gw_io wake;              /* eventfd from the main thread */
	struct gw_listener listeners[2];
	int n_listeners;
	struct gw_conn *conns;          /* live connections, a list */
	struct gw_conn *closed;         /* closed, freed before sleep */
	size_t n_conns;
	struct gw_pipe pipes[GW_PIPE_POOL];
	int n_pipes;
	uint8_t relay_buf[16384];       /* small messages are copied through here */
	int draining;
	struct gw_dns_worker *dns;      /* owned (freed by gw_dns_free); NULL without listen.dns */
};

struct gw_daemon {
	const char *config_path;        /* borrowed from argv */
	struct gw_snap *snap;           /* ref; guarded by mu */
	struct gw_registry *registry;   /* ref; guarded by mu */
	atomic_uint_fast64_t reloads_ok, reloads_failed;
	pthread_mutex_t mu;
	uint64_t generation;
	struct aud_writer *audit;       /* owned */
	int audit_on_failure_allow;
	struct gw_worker *workers;      /* owned array */
	int n_workers;
	atomic_long n_conns;            /* across workers, for max_connections */
	atomic_int drain;               /* SIGTERM: stop accepting, finish */
	atomic_int stop_now;            /* drain timed out: close everything */
	struct gw_stats stats;
	struct gw_dns *dns;             /* owned: the DNS responder's shared state, or NULL */
	/* bound addresses, for the log and for --check */
	int listen_fds[2][64];          /* [kind][worker] */
};

/* serve.c: what the control API (admin.c) may do, from the main thread. */
struct gw_snap *gw_snap_current(struct gw_daemon *d);          /* ref */
struct gw_registry *gw_registry_current(struct gw_daemon *d);  /* ref */
uint64_t gw_generation(struct gw_daemon *d);
int gw_healthy(struct gw_daemon *d);
/* Reload the config file; on failure err holds the loader's message and
 * the running policy stays. */
int gw_reload(struct gw_daemon *d, char *err, size_t errsz);
/* Register or replace a sandbox; SG_EINVAL with err for an address held by
 * another name. Audited as sandbox_start. */
int gw_register(struct gw_daemon *d, const struct gw_reg_entry *e, char *err, size_t errsz);
/* 0, or SG_EINVAL when no such name. Audited as sandbox_stop. */
int gw_unregister(struct gw_daemon *d, const char *name);
/* Stop a registered sandbox: from now on every connection and DNS query
 * it makes is refused (reason "sandbox_stopped"), a sandbox_stop record
 * with the reason is audited, and its adapter, waiting on
 * GET /v1/sandboxes/NAME/wait, is told to kill it. reason: a snake_case
 * code. Idempotent (the first reason stays). SG_EINVAL: no such name. */
int gw_stop_sandbox(struct gw_daemon *d, const char *name, const char *reason);
void gw_metrics_text(struct gw_daemon *d, struct sg_sbuf *out);

/* Listener sockets: bound once per worker (SO_REUSEPORT). */
int gw_listen_socket(const char *spec, int reuse_port, int transparent_ok,
		     char *err, size_t errsz, int *bound_port);

/* conn.c */
/* peer: the client's address as accept4() returned it (sl bytes). */
void gw_conn_accept(struct gw_worker *w, struct gw_listener *ls, int fd,
		    const struct sockaddr_storage *peer, socklen_t sl);
void gw_conn_close_all(struct gw_worker *w);
/* End every connection of a sandbox the gateway stopped (w's registry):
 * those still being judged are denied with reason sandbox_stopped, relayed
 * ones are recorded as allowed with their bytes and "closed_by". */
void gw_conn_close_stopped(struct gw_worker *w);
void gw_worker_free_closed(struct gw_worker *w);

/* Pipes for splice(), from the worker's pool; only held while data is in flight. */
int gw_pipe_get(struct gw_worker *w, struct gw_pipe *p);
void gw_pipe_put(struct gw_worker *w, struct gw_pipe *p);

#endif
