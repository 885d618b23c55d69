/*
 * dns.h - the DNS responder for sandboxes (gateway.listen.dns): UDP and
 * TCP on every worker loop, answering only what the sandbox's policy could
 * allow. docs/dns.md has the behaviour; in short:
 *
 *   the sandbox is found from the source address exactly as for
 *   connections (registered addresses, then policy sources); none: REFUSED
 *   A/AAAA of a name some rule could allow on some port: resolved with the
 *   worker's gw_resolver (resolver.hosts first), answered under the asked
 *   name (CNAME chains flattened), TTL capped, addresses the policy would
 *   refuse removed (rebinding guard); any other name: NXDOMAIN at once,
 *   and the name goes nowhere
 *   HTTPS/SVCB of such a name: NOERROR, no records; other types: REFUSED;
 *   not a host name: FORMERR; malformed: FORMERR or dropped
 *   per-sandbox rate and distinct-name limits (dns_limit.h): REFUSED
 *   every decision audited ("event":"dns"), allowed repeats aggregated
 *   what was answered is remembered (dns_learn.h) to name IP-only
 *   connections in their audit records
 *
 * Ownership: struct gw_dns (the daemon's: the learned store, the limits)
 * is made by gw_dns_bind() on the main thread before the workers start and
 * freed by gw_dns_free() after they are joined. Each worker owns a
 * struct gw_dns_worker (sockets, answer cache, pending queries, TCP
 * connections) used only on its thread, except the counters /metrics reads.
 * Nothing here blocks: sockets are non-blocking, resolution is the
 * worker's c-ares resolver, audit records go to the writer's queue.
 */
#ifndef GW_DNS_H
#define GW_DNS_H

#include <stddef.h>

#include "sg_sbuf.h"
#include "sg_str.h"

struct gw_daemon;
struct gw_worker;

/* Main thread, before the workers start: one UDP socket and one TCP
 * listener per worker on spec ("[::]:PORT", "IP:PORT"; port 0 picks one),
 * all SO_REUSEPORT on one port. Logs "listening dns on HOST:PORT". */
int gw_dns_bind(struct gw_daemon *d, const char *spec, char *err, size_t errsz);
/* workers_start(): register the worker's sockets on its loop. */
int gw_dns_worker_init(struct gw_worker *w, char *err, size_t errsz);
/* On the worker (SIGTERM drain): stop taking queries, close TCP clients. */
void gw_dns_worker_drain(struct gw_worker *w);
/* Before the loop sleeps: free closed TCP clients, run the periodic work. */
void gw_dns_before_sleep(struct gw_worker *w);
/* On the worker thread after its loop ended: close everything, cancel
 * resolutions (before the resolver is freed). */
void gw_dns_worker_stop(struct gw_worker *w);
/* Main thread, after the workers are joined: write the aggregated and
 * burst records still pending (before gateway_stop), then free. */
void gw_dns_shutdown(struct gw_daemon *d);
void gw_dns_free(struct gw_daemon *d);

void gw_dns_metrics(struct gw_daemon *d, struct sg_sbuf *out);

/*
 * The name the sandbox at src (identified as the DNS responder does) was
 * last given dst for, while that answer's TTL lasts: into out
 * (SG_HOST_MAX + 1 bytes). 1 found, 0 not (or no DNS responder).
 * Any thread.
 */
int gw_dns_learned_host(struct gw_worker *w, const struct sg_addr *src,
			const struct sg_addr *dst, char *out);

#endif
