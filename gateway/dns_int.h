/*
 * dns_int.h - what dns.c (deciding and answering) and dns_io.c (sockets,
 * DNS over TCP, lifecycle) share; nothing else includes it. dns.h has the
 * contract and docs/dns.md the behaviour.
 *
 * Everything in struct gw_dns_worker belongs to its worker's thread, but
 * the atomic counters (read by /metrics) and the metrics table (its own
 * mutex). struct gw_dns is the daemon's, shared: its stores lock inside.
 */
#ifndef GW_DNS_INT_H
#define GW_DNS_INT_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "gateway/dns.h"
#include "gateway/dns_learn.h"
#include "gateway/dns_limit.h"
#include "gateway/dns_msg.h"
#include "gateway/gw.h"
#include "gateway/resolver.h"

#define DNS_BATCH       32      /* datagrams per recvmmsg/sendmmsg */
#define DNS_RX_ROUNDS   8       /* batches per wakeup, then other events get a turn */
#define DNS_RBUF        4096    /* a larger datagram is not a query we answer: FORMERR */
#define DNS_CACHE_SLOTS 4096    /* answer cache entries per worker (a power of two) */
#define DNS_INLINE_ADDRS 8
#define DNS_MAX_ANSWERS 256     /* records in one answer (static answers can be long) */
#define DNS_MAX_PENDING 4096    /* queries waiting for the resolver, per worker */
#define DNS_TCP_CONNS   256     /* DNS-over-TCP clients per worker */
#define DNS_TCP_QMAX    4096    /* largest query taken over TCP */
#define DNS_TCP_OUTMAX  (256 * 1024)    /* answers queued for a client that does not read */
#define DNS_SCRATCH     16384   /* one TCP answer: DNS_MAX_ANSWERS AAAA fit */
#define DNS_LEARN_GRACE_MS 10000
#define DNS_TICK_MS     1000
#define CTL_SPACE       64      /* room for one in(6)_pktinfo control message */

struct gw_dns {
	struct gw_daemon *d;            /* borrowed */
	struct dns_learn *learn;        /* owned */
	struct dns_limits *limits;      /* owned */
	atomic_int_fast64_t next_sweep;
	int family;                     /* of the bound sockets */
};

/* Where a UDP query came from and which of our addresses it was sent to:
 * the answer must leave from that address (a REDIRECTed query's reply is
 * un-NATed by conntrack only then; dig checks the source too). */
struct dns_udp_meta {
	struct sockaddr_storage peer;
	socklen_t peer_len;
	int pi_family;                  /* 0: none */
	union {
		struct in_pktinfo v4;
		struct in6_pktinfo v6;
	} pi;
};

/* One query being answered. */
struct dns_ctx {
	struct dns_query q;
	int prc;                        /* dns_parse_query's answer */
	const uint8_t *raw;             /* borrowed, sync path only */
	size_t raw_len;
	char name[SG_HOST_MAX + 1];     /* normalised, valid when name_ok */
	int name_ok;
	struct sg_addr src;
	uint16_t src_port;
	struct dns_ident id;
	int registered;                 /* sandbox: a name registered at run time */
	int stopped;                    /* registered, and stopped by the gateway */
	char sandbox[GW_REG_NAME_MAX];  /* audit name: registered, else the policy key; "" none */
	int tcp;
};

enum { RES_NONE, RES_OK, RES_NX };

struct dns_cent {
	uint64_t gen;                   /* snapshot generation; 0: empty */
	const struct pol_sandbox *sbx;  /* borrowed from that snapshot; NULL: unknown source */
	uint64_t h;
	char name[SG_HOST_MAX + 1];
	/* the name, on some port */
	int allowed;
	struct pol_verdict nv;          /* rule pointers borrowed from the snapshot */
	uint16_t port;                  /* a port where the name is allowed */
	const struct pol_static_host *sh;       /* borrowed: resolver.hosts entry */
	/* its addresses */
	int res;
	int64_t expires;                /* monotonic ms */
	size_t n4, n6;                  /* kept: a[0..n4) IPv4, a[n4..n4+n6) IPv6 */
	size_t rm4, rm6;                /* removed by policy */
	struct sg_addr *a;              /* inl or owned */
	struct sg_addr inl[DNS_INLINE_ADDRS];
	struct pol_verdict av;          /* first kept address's verdict */
	struct pol_verdict rv;          /* last removed address's verdict */
	/* learned store already told, per family, until */
	uint64_t learned_id[2];
	int64_t learned_until[2];
};

struct dns_tcp;

struct dns_pend {
	struct dns_pend *next, **pprev;
	struct gw_dns_worker *dw;       /* borrowed */
	struct gw_resolve_waiter rw;
	struct dns_ctx c;
	struct dns_tcp *tcp;            /* borrowed, or NULL: answer over UDP */
	struct dns_udp_meta m;
};

struct dns_tcp {
	struct dns_tcp *next, **pprev;
	struct gw_dns_worker *dw;       /* borrowed */
	struct gw_io io;
	struct gw_timer timer;
	unsigned rd:1, wr:1, eof:1, closed:1;
	struct dns_pend *pend;          /* the query waiting for the resolver, or NULL */
	struct sg_addr src;
	uint16_t src_port;
	uint8_t *rbuf;                  /* owned, 2 + DNS_TCP_QMAX */
	size_t rlen;
	uint8_t *wbuf;                  /* owned */
	size_t wlen, woff, wcap;
};

struct gw_dns_worker {
	struct gw_worker *w;            /* borrowed */
	struct gw_dns *g;               /* borrowed */
	struct gw_io udp, tcp;          /* fd -1: closed */
	struct gw_timer tick;
	int draining;
	/* the policy view of the snapshot the cache is for */
	uint64_t gen;
	struct pol_ports **ports;       /* owned: per sandbox index, [n] unknown source */
	size_t n_ports;
	struct dns_cent *cache;         /* owned, DNS_CACHE_SLOTS */
	struct dns_pend *pending, *pend_free;
	size_t n_pending;
	struct dns_tcp *tcps, *tcp_closed;
	size_t n_tcp;
	uint8_t *scratch;               /* owned, DNS_SCRATCH: TCP and late UDP answers */
	struct gw_metrics metrics;      /* sandgate_dns_queries_total rows */
	/* counters, read by /metrics */
	atomic_uint_fast64_t rcodes[6], badvers, truncated, dropped_short, dropped_response,
			     dropped_overload, udp_queries, tcp_queries, tcp_refused;
	atomic_long open_tcp, open_pending;
	/* batches */
	struct mmsghdr rmsg[DNS_BATCH];
	struct iovec riov[DNS_BATCH];
	struct sockaddr_storage rpeer[DNS_BATCH];
	uint8_t rctl[DNS_BATCH][CTL_SPACE] __attribute__((aligned(8)));
	uint8_t rbuf[DNS_BATCH][DNS_RBUF];
	struct mmsghdr smsg[DNS_BATCH];
	struct iovec siov[DNS_BATCH];
	struct dns_udp_meta smeta[DNS_BATCH];
	uint8_t sctl[DNS_BATCH][CTL_SPACE] __attribute__((aligned(8)));
	uint8_t sbuf[DNS_BATCH][DNS_UDP_MAX];
};

#define DNS_DROP 0L
#define DNS_PEND (-1L)

#define DNS_DROP 0L
#define DNS_PEND (-1L)

static inline const struct sg_config *cfg_of(const struct gw_dns_worker *dw)
{
	return dw->w->snap->cfg;
}

/* dns.c */
/* One message from a client: the answer's length in out, DNS_DROP (no
 * answer) or DNS_PEND (c is complete; park it with dns_pend_start). */
long dns_process(struct gw_dns_worker *dw, struct dns_ctx *c, const uint8_t *msg,
		 size_t len, uint8_t *out, size_t cap);
/* Park c until the resolver answers; -1 when too many wait. */
int dns_pend_start(struct gw_dns_worker *dw, const struct dns_ctx *c, struct dns_tcp *t,
		   const struct dns_udp_meta *m);
void dns_pend_release(struct gw_dns_worker *dw, struct dns_pend *p);
/* SERVFAIL for a query that could not be parked. */
long dns_overloaded(struct gw_dns_worker *dw, const struct dns_ctx *c, uint8_t *out,
		    size_t cap);
/* Write one dns audit record (also dns_limit.c's emit callback; arg: struct gw_dns). */
void dns_audit(void *arg, const struct dns_rec *r);
void dns_worker_cache_free(struct gw_dns_worker *dw);

/* dns_io.c */
void dns_udp_send_one(struct gw_dns_worker *dw, const struct dns_udp_meta *m,
		      const uint8_t *p, size_t n);
int dns_tcp_queue(struct dns_tcp *t, const uint8_t *p, size_t n);
void dns_tcp_run(struct dns_tcp *t);
void dns_tcp_close(struct dns_tcp *t);

#endif
