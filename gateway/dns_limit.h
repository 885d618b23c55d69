/*
 * dns_limit.h - per-sandbox query limits and audit aggregation for the DNS
 * responder, shared by every worker (one sandbox's queries reach any
 * worker: SO_REUSEPORT spreads UDP by source port).
 *
 * Per sandbox identity (dns_learn.h), in one entry under its shard's mutex:
 *   - a token bucket: gateway.dns.rate queries per second, burst deep;
 *     a query without a token is refused (DNS_ADMIT_RATE);
 *   - the distinct names asked in the current window (DNS_WINDOW_MS, from
 *     the sandbox's first query): past gateway.dns.max_names_per_minute a
 *     NEW name is refused (DNS_ADMIT_NAMES) while names already asked keep
 *     working. A burst of random labels is the shape of exfiltration
 *     through query names;
 *   - refusals are not audited one by one: each kind opens a burst that
 *     is written as ONE record (reason dns_rate_limited / dns_name_burst,
 *     "count") once no refusal of that kind came for DNS_BURST_QUIET_MS,
 *     or every DNS_WINDOW_MS while it lasts, or at shutdown;
 *   - allowed answers are aggregated: the first query of a (name, type,
 *     outcome) in a window is recorded at once by the caller, later ones
 *     are counted and written as one record with "count" when the window
 *     ends, or at shutdown.
 * Records are handed to the emit callback (dns.c writes them), called with
 * the shard's lock held: it must not call back into this module.
 *
 * Bounded: at most DNS_LIMIT_SBX sandboxes tracked (the least recently
 * seen is flushed and forgotten to make room), names and aggregates per
 * sandbox bounded by max_names_per_minute (DNS_AGG_MAX at most; past it
 * every allowed query is recorded on its own).
 */
#ifndef GW_DNS_LIMIT_H
#define GW_DNS_LIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/dns_learn.h"

#define DNS_WINDOW_MS 60000
#define DNS_BURST_QUIET_MS 1000
#define DNS_LIMIT_SBX 4096
#define DNS_AGG_MAX 65536

struct dns_limit_cfg {
	long long rate;         /* tokens per second */
	long long burst;        /* bucket depth */
	long long max_names;    /* distinct names per window */
};

enum dns_admit { DNS_ADMIT_OK, DNS_ADMIT_RATE, DNS_ADMIT_NAMES };

enum dns_rec_kind {
	DNS_REC_QUERY,          /* one query */
	DNS_REC_AGGREGATE,      /* allowed queries counted after the first of a window */
	DNS_REC_BURST,          /* refused queries of one burst */
};

/* What one dns audit record says; every pointer borrowed for the call. */
struct dns_rec {
	enum dns_rec_kind kind;
	const char *sandbox;    /* audit name, NULL for an unknown source */
	const char *src;        /* "IP:PORT" / "[IPv6]:PORT" */
	const char *proto;      /* "udp" | "tcp" */
	const char *qname;      /* NULL: no readable question */
	int host_ok;            /* qname is a normalised host name (it is judged as dst_host) */
	uint16_t qtype;         /* meaningful with qname */
	int rcode;
	const char *decision, *reason, *rule;   /* rule NULL: none */
	unsigned answers;
	uint64_t count;         /* queries this record stands for */
	int64_t span_ms;        /* AGGREGATE / BURST: first to last query counted */
};

typedef void dns_emit_fn(void *arg, const struct dns_rec *r);

struct dns_limits;

struct dns_limits *dns_limits_new(dns_emit_fn *emit, void *arg);
/* Frees without emitting: call dns_limits_sweep(.., 1) first. NULL ok. */
void dns_limits_free(struct dns_limits *L);

/*
 * May this query go on? rec describes it (kind QUERY; qname: the
 * normalised name, or NULL when it has none that counts), used for the
 * burst record when refused. now: monotonic ms.
 */
enum dns_admit dns_limits_admit(struct dns_limits *L, const struct dns_ident *id,
				const struct dns_rec *rec, const struct dns_limit_cfg *cfg,
				int64_t now);

/*
 * An allowed answer was sent (rec: kind QUERY, qname set). 1: the first of
 * its kind in the window, the caller records it now; 0: counted, it goes
 * into the window's aggregate record.
 */
int dns_limits_count(struct dns_limits *L, const struct dns_ident *id,
		     const struct dns_rec *rec, int64_t now);

/* Write what is due (ended windows and bursts); force: everything (shutdown). */
void dns_limits_sweep(struct dns_limits *L, int64_t now, int force);

struct dns_limit_stats {
	uint64_t rate_limited, name_capped;     /* queries refused */
	uint64_t bursts;                        /* burst records written */
	uint64_t aggregated;                    /* queries counted into aggregates */
	uint64_t tracked;                       /* sandboxes held now */
};
void dns_limits_stats(struct dns_limits *L, struct dns_limit_stats *st);

#endif
