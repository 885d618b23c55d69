/*
 * conn_int.h - struct gw_conn, shared by conn.c (handshake, decision) and
 * relay.c (bytes after the decision). Not for other modules.
 */
#ifndef GW_CONN_INT_H
#define GW_CONN_INT_H

#include <stdint.h>

#include "gateway/gw.h"
#include "gateway/resolver.h"
#include "sg_str.h"
#include "tls/tls_hello.h"
#include "gateway/http1.h"

enum conn_state {
	CS_PEEK,                /* transparent: reading the first bytes */
	CS_PROXY_HEAD,          /* proxy: reading the request head */
	CS_RESOLVE,
	CS_CONNECT,
	CS_TUNNEL_PEEK,         /* proxy CONNECT: 200 sent, reading the ClientHello */
	CS_RELAY,
	CS_SEND_ERROR,          /* writing a refusal, then LINGER */
	CS_LINGER,              /* our side shut; drain the client briefly */
	CS_CLOSED,
};

/* One direction of the relay: src -> pipe -> dst with splice(). */
struct relay_dir {
	struct gw_pipe pipe;
	int has_pipe;
	size_t in_pipe;         /* bytes sitting in the pipe */
	uint64_t bytes;         /* delivered to dst */
	int64_t limit;          /* bytes still to take from src; -1: no limit */
	unsigned eof:1;         /* src said EOF (or limit reached) */
	unsigned shut:1;        /* dst write side shut (or not to be shut) */
	unsigned no_shut:1;     /* at limit: stop reading, do not half-close dst */
	unsigned chunked:1;     /* limit comes from chunked framing, found by peeking */
	unsigned bulk:1;        /* the last copy filled the buffer: splice until drained */
	struct http1_chunked ch;
};

/* Bytes we produce ourselves (a 200, a refusal, a rewritten head). */
struct out_buf {
	const uint8_t *p;       /* borrowed: hs->buf, hs->head or static text */
	size_t len, off;
};

struct gw_hs {
	struct gw_conn *conn;  /* borrowed: the owner */
	uint8_t *buf;           /* owned; what the client sent so far */
	size_t len, cap, max;
	struct gw_resolve_waiter rw;
	struct sg_addr addrs[GW_RESOLVE_MAX_ADDRS];
	size_t n_addrs, idx;
	int addrs_static;
	char *head;             /* owned; rewritten HTTP request head */
	size_t head_len;
	char resp[512];         /* our own response (200 / refusal) */
	struct out_buf cout;    /* to the client */
	struct out_buf uout;    /* to the upstream, before the relay */
	size_t consumed;        /* proxy: bytes of buf that were the CONNECT head */
};

/* What the transparent peek saw, for the reason of an address-only denial. */
enum peek_class {
	PK_NONE,                /* nothing at all */
	PK_TLS_NOSNI,           /* a ClientHello without server_name */
	PK_HTTP_NOHOST,         /* HTTP without a usable Host */
	PK_HTTP_BAD,            /* looked like HTTP, did not parse */
	PK_PARTIAL,             /* an incomplete request head */
	PK_OPAQUE,              /* something else */
};

struct gw_conn {
	struct gw_conn *next, **pprev;  /* worker's live or closed list */
	struct gw_worker *w;            /* borrowed */
	struct gw_snap *snap;           /* ref: the policy it started with */
	const struct pol_sandbox *sbx;  /* borrowed from snap; NULL: unknown source */
	char sbx_name[GW_REG_NAME_MAX]; /* registered name, else the policy's key; "": none */
	struct gw_io cio, uio;
	unsigned c_rd, c_wr, u_rd, u_wr;        /* edge-triggered readiness */
	unsigned c_hup, u_hup;                  /* the peer's EOF is signalled (EPOLLRDHUP) */
	unsigned has_odst:1, has_name:1, has_dst:1, dst_is_literal:1;
	unsigned audited:1, would_deny:1, http:1, tls_seen:1, status_peeked:1;
	unsigned host_from_dns:1;       /* no name of its own: host is what the DNS responder
					 * answered the sandbox for odst (audit only, never judged) */
	struct gw_timer timer;
	enum gw_listener_kind kind;
	enum conn_state state;
	enum peek_class peek;
	struct sg_addr src, odst, dst;
	uint16_t src_port, odst_port, port;
	char host[SG_HOST_MAX + 1];     /* the name the decision is about */
	char sni[SG_HOST_MAX + 1];
	char alpn[TLS_ALPN_MAX + 1];
	const char *tls_mode;           /* "passthrough" | "none" */
	const char *event;              /* "connection" | "request" */
	const char *reason;             /* static */
	const char *closed_by;          /* static: who ended a relayed connection early */
	const char *rule_id;            /* borrowed from snap */
	int allowed;
	int name_allowed;               /* the name itself was allowed (before addresses) */
	char method[16];
	char path[256];
	int status;                     /* our own response status, 0 when relayed */
	struct relay_dir c2u, u2c;
	int64_t start_ms, last_active;
	struct gw_hs *hs;               /* owned until the relay starts */
};

/* relay.c */
/* Write o out while fd takes it: 1 all sent, 0 would block (*wr_ready
 * cleared), or a negative errno. */
int gw_out_flush(int fd, struct out_buf *o, unsigned *wr_ready);
void gw_relay_start(struct gw_conn *c);
void gw_relay_run(struct gw_conn *c);
void gw_relay_release(struct gw_conn *c);
/* conn.c */
void gw_conn_close(struct gw_conn *c, const char *why);

#endif
