/*
 * conn.c - accept, peek, decide, resolve, connect; refusals and audit.
 * See conn.h for the state machine; relay.c moves the bytes after it.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sg.h"
#include "sg_log.h"
#include "audit/aud.h"
#include "gateway/conn_int.h"
#include "gateway/dns.h"
#include "gateway/http1.h"
#include "tls/tls_hello.h"
#include "sg_poison.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80              /* linux/netfilter_ipv4.h */
#endif
#define IP6T_SO_ORIGINAL_DST 80         /* linux/netfilter_ipv6/ip6_tables.h */

#define HS_INITIAL 4096
/* A ClientHello of TLS_HELLO_MAX bytes, plus record headers for a client
 * that fragments it into small records. */
#define PEEK_MAX (TLS_HELLO_MAX + 4096)
#define LINGER_MS 1000
#define IO_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

static void conn_run(struct gw_conn *c);
static void decide(struct gw_conn *c);

static const struct sg_config *cfg_of(const struct gw_conn *c)
{
	return c->snap->cfg;
}

/* ---------------------------------------------------------------- audit */

static void audit_conn(struct gw_conn *c)
{
	struct gw_daemon *d = c->w->d;
	struct aud_rec r;
	char ip[INET6_ADDRSTRLEN], src[INET6_ADDRSTRLEN + 8];
	const char *decision;

	if (c->audited)
		return;
	c->audited = 1;
	decision = !c->allowed ? "deny" : c->would_deny ? "would_deny" : "allow";
	if (!c->allowed)
		atomic_fetch_add(&d->stats.denied, 1);
	else if (c->would_deny)
		atomic_fetch_add(&d->stats.would_deny, 1);
	else
		atomic_fetch_add(&d->stats.allowed, 1);
	atomic_fetch_add(&d->stats.bytes_up, c->c2u.bytes);
	atomic_fetch_add(&d->stats.bytes_down, c->u2c.bytes);

	aud_rec_begin(&r, c->event);
	aud_rec_decision(&r, c->sbx_name[0] ? c->sbx_name : NULL, decision, c->reason,
			 c->rule_id);
	gw_metrics_count(&c->w->metrics, c->sbx ? c->sbx->name : "", decision,
			 c->reason ? c->reason : "");
	sg_addr_str(&c->src, ip, sizeof(ip));
	snprintf(src, sizeof(src), c->src.family == AF_INET6 ? "[%s]:%u" : "%s:%u",
		 ip, c->src_port);
	sg_json_str(&r.j, "src", src);
	sg_json_str(&r.j, "dst_host", c->has_name || c->host_from_dns ? c->host : NULL);
	if (c->host_from_dns)
		sg_json_str(&r.j, "dst_host_source", "dns");
	if (c->has_dst)
		sg_json_str(&r.j, "dst_ip", sg_addr_str(&c->dst, ip, sizeof(ip)));
	else if (c->has_odst)
		sg_json_str(&r.j, "dst_ip", sg_addr_str(&c->odst, ip, sizeof(ip)));
	else
		sg_json_null(&r.j, "dst_ip");
	if (c->port)
		sg_json_int(&r.j, "dst_port", c->port);
	else
		sg_json_null(&r.j, "dst_port");
	sg_json_str(&r.j, "sni", c->sni[0] ? c->sni : NULL);
	sg_json_str(&r.j, "alpn", c->alpn[0] ? c->alpn : NULL);
	/* What the client spoke: passthrough for TLS (relayed or refused
	 * unopened), none for anything else. */
	sg_json_str(&r.j, "tls", c->tls_mode ? c->tls_mode : c->tls_seen ? "passthrough" : "none");
	sg_json_int(&r.j, "bytes_up", (int64_t)c->c2u.bytes);
	sg_json_int(&r.j, "bytes_down", (int64_t)c->u2c.bytes);
	sg_json_int(&r.j, "duration_ms", gw_now_ms() - c->start_ms);
	if (c->closed_by)
		sg_json_str(&r.j, "closed_by", c->closed_by);
	if (c->http) {
		sg_json_str(&r.j, "method", c->method[0] ? c->method : NULL);
		sg_json_str(&r.j, "path", c->path[0] ? c->path : NULL);
		if (c->status)
			sg_json_int(&r.j, "status", c->status);
		else
			sg_json_null(&r.j, "status");
		sg_json_raw(&r.j, "secrets", "[]", 2);
	}
	aud_rec_submit(d->audit, &r);
}

/* ---------------------------------------------------------------- close */

static void hs_free(struct gw_conn *c)
{
	if (!c->hs)
		return;
	gw_resolve_cancel(c->w->resolver, &c->hs->rw);
	free(c->hs->buf);
	free(c->hs->head);
	free(c->hs);
	c->hs = NULL;
}

static void list_unlink(struct gw_conn *c)
{
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
}

static void list_link(struct gw_conn **head, struct gw_conn *c)
{
	c->next = *head;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = head;
	*head = c;
}

/*
 * Closing marks and queues: the fds go now, the memory before the loop
 * sleeps (an event for this connection may still be in the current batch).
 */
void gw_conn_close(struct gw_conn *c, const char *why)
{
	struct gw_worker *w = c->w;

	if (c->state == CS_CLOSED)
		return;
	sg_debug("conn %p closed: %s", (void *)c, why);
	if (c->allowed || c->reason)
		audit_conn(c);
	c->state = CS_CLOSED;
	gw_timer_cancel(w->loop, &c->timer);
	hs_free(c);
	gw_relay_release(c);
	gw_io_forget(&c->cio);
	close(c->cio.fd);
	if (c->uio.fd >= 0) {
		gw_io_forget(&c->uio);
		close(c->uio.fd);
		c->uio.fd = -1;
	}
	list_unlink(c);
	list_link(&w->closed, c);
	w->n_conns--;
	atomic_fetch_sub(&w->d->n_conns, 1);
}

void gw_worker_free_closed(struct gw_worker *w)
{
	while (w->closed) {
		struct gw_conn *c = w->closed;

		list_unlink(c);
		gw_snap_put(c->snap);
		free(c);
	}
}

void gw_conn_close_all(struct gw_worker *w)
{
	while (w->conns) {
		if (!w->conns->reason)
			w->conns->reason = "gateway_shutdown";
		gw_conn_close(w->conns, "shutdown");
	}
}

void gw_conn_close_stopped(struct gw_worker *w)
{
	const struct gw_registry *r = w->registry;
	struct gw_conn *c, *next;
	size_t i;

	for (i = 0; i < r->n && !r->entries[i].stopped[0]; i++)
		;
	if (i == r->n)
		return;                 /* nothing stopped: the common case */
	for (c = w->conns; c; c = next) {
		const struct gw_reg_entry *re = gw_registry_lookup(r, &c->src);

		next = c->next;
		if (!re || !re->stopped[0])
			continue;
		if (c->allowed) {
			c->closed_by = "sandbox_stopped";
		} else {
			c->reason = "sandbox_stopped";
			c->rule_id = NULL;
		}
		gw_conn_close(c, "sandbox stopped");
	}
}

/* ------------------------------------------------------------- refusals */

/*
 * Refuse: record the decision, answer the proxy client with a status, or
 * just close a transparent one (it expected TLS or its own protocol).
 */
static void refuse(struct gw_conn *c, int status, const char *reason)
{
	struct gw_hs *hs = c->hs;
	const char *text = status == 400 ? "Bad Request" : status == 403 ? "Forbidden" :
			   status == 504 ? "Gateway Timeout" : "Bad Gateway";
	char body[160];
	int bl, n;

	/* Nothing reached an upstream: the record says deny whatever the
	 * policy said of the name; the reason says why (resolve_timeout ...). */
	c->reason = reason;
	c->allowed = 0;
	if (c->http && hs)
		c->status = status;
	audit_conn(c);
	if (c->uio.fd >= 0) {
		gw_io_forget(&c->uio);
		close(c->uio.fd);
		c->uio.fd = -1;
	}
	if ((c->kind != GW_LISTEN_PROXY && !c->http) || !hs ||
	    (c->state == CS_TUNNEL_PEEK && !c->http)) {
		/* Transparent TLS or opaque clients, and tunnels already answered
		 * with 200 that do not speak plain HTTP, can only be closed; an
		 * HTTP client gets a status, inside a tunnel too. */
		gw_conn_close(c, reason);
		return;
	}
	c->status = status;     /* transparent HTTP too */
	bl = snprintf(body, sizeof(body), "sandgate: %s (%s)\n",
		      status == 403 ? "denied" : text, reason);
	n = snprintf(hs->resp, sizeof(hs->resp),
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
		     "Content-Length: %d\r\nConnection: close\r\n"
		     "X-Sandgate-Reason: %s\r\n\r\n%s",
		     status, text, bl, reason, body);
	hs->cout.p = (const uint8_t *)hs->resp;
	hs->cout.len = (size_t)SG_MIN(n, (int)sizeof(hs->resp) - 1);
	hs->cout.off = 0;
	c->state = CS_SEND_ERROR;
	gw_timer_set(c->w->loop, &c->timer, cfg_of(c)->handshake_timeout_ms);
	conn_run(c);
}

static void deny(struct gw_conn *c, const char *reason, const char *rule_id)
{
	c->allowed = 0;
	c->rule_id = rule_id;
	refuse(c, 403, reason);
}

/* --------------------------------------------------------------- reading */

/* Read what the client has into hs->buf. 1: got bytes, 0: nothing now,
 * -1: EOF, -2: error, -3: buffer at its limit. */
static int read_more(struct gw_conn *c)
{
	struct gw_hs *hs = c->hs;
	int got = 0;

	while (c->c_rd) {
		ssize_t n;

		if (hs->len == hs->cap) {
			size_t cap = hs->cap ? hs->cap * 2 : HS_INITIAL;
			uint8_t *nb;

			if (hs->cap >= hs->max)
				return got ? 1 : -3;
			if (cap > hs->max)
				cap = hs->max;
			nb = realloc(hs->buf, cap);
			if (!nb)
				return -2;
			hs->buf = nb;
			hs->cap = cap;
		}
		n = recv(c->cio.fd, hs->buf + hs->len, hs->cap - hs->len, 0);
		if (n > 0) {
			hs->len += (size_t)n;
			got = 1;
		} else if (n == 0) {
			return got ? 1 : -1;
		} else if (errno == EAGAIN) {
			c->c_rd = 0;
		} else if (errno != EINTR) {
			return -2;
		}
	}
	return got;
}

/* The path of a request target without its query or fragment: the query
 * may carry tokens and never goes into an audit record. */
static void set_path(struct gw_conn *c, const char *t, size_t len)
{
	size_t n = 0;

	while (n < len && t[n] != '?' && t[n] != '#')
		n++;
	snprintf(c->path, sizeof(c->path), "%.*s", (int)SG_MIN(n, sizeof(c->path) - 1), t);
}

static int rewrite_head(struct gw_conn *c, const struct http1_request *req,
			const char *path, size_t path_len, const char *authority,
			size_t authority_len);
static int stage_http_head(struct gw_conn *c);

/*
 * Only origin-form ("/path") or "*" where the decision was made on Host
 * (transparent HTTP, HTTP inside a CONNECT tunnel): an origin server
 * routes an absolute-form target by its URI and ignores Host (RFC 9112
 * 3.2.2), and a CONNECT would ask it to tunnel; either would reach a host
 * the decision never saw.
 */
static int origin_form(const struct http1_request *req)
{
	return (req->target_len >= 1 && req->target[0] == '/') ||
	       (req->target_len == 1 && req->target[0] == '*');
}

/* From here the connection is audited as a plain-HTTP request: req's
 * method (none if req is NULL: it did not parse). */
static void as_http_request(struct gw_conn *c, const struct http1_request *req)
{
	c->http = 1;
	c->event = "request";
	c->tls_mode = "none";
	if (req)
		snprintf(c->method, sizeof(c->method), "%.*s",
			 (int)SG_MIN(req->method_len, sizeof(c->method) - 1), req->method);
	else
		c->method[0] = '\0';
}

/*
 * A plain-HTTP request that goes upstream as one request on its own
 * connection: the head rewritten with Connection: close, then exactly its
 * body (Content-Length or chunked); whatever the client sends after it
 * never reaches the upstream, so a second request cannot ride on this
 * one's decision. Sets what the audit record says of the request.
 * 0, or -1 if the connection was refused or closed here.
 */
static int http_one_request(struct gw_conn *c, const struct http1_request *req)
{
	as_http_request(c, req);
	if (!origin_form(req)) {
		deny(c, "http_bad_request", NULL);
		return -1;
	}
	set_path(c, req->target, req->target_len);
	if (req->has_te && !req->chunked) {
		deny(c, "http_bad_request", NULL);
		return -1;
	}
	if (rewrite_head(c, req, req->target, req->target_len, NULL, 0) < 0) {
		gw_conn_close(c, "out of memory");
		return -1;
	}
	c->c2u.limit = req->chunked ? 0 : SG_MAX(req->content_length, 0);
	c->c2u.chunked = req->chunked;
	c->c2u.no_shut = 1;
	c->hs->consumed = req->head_len;
	return 0;
}

/* Set c->host from a name as the client wrote it; 0 if it is a host name,
 * 1 if it is an IP literal (then c->dst is set), -1 if neither. */
static int set_target(struct gw_conn *c, const char *name, size_t len)
{
	struct sg_addr a;

	if (sg_addr_parse(name, len, &a) == 0) {
		c->dst = a;
		c->has_dst = 1;
		c->dst_is_literal = 1;
		return 1;
	}
	if (sg_host_normalize(name, len, c->host) < 0)
		return -1;
	c->has_name = 1;
	return 0;
}

/* ------------------------------------------------------------ transparent */

static void peek_classify(struct gw_conn *c, int final)
{
	struct gw_hs *hs = c->hs;
	struct tls_hello th;
	struct http1_request req;
	int rc;

	rc = tls_hello_parse(hs->buf, hs->len, &th);
	if (rc == SG_OK) {
		c->tls_seen = 1;
		if (th.has_alpn)
			snprintf(c->alpn, sizeof(c->alpn), "%s", th.alpn);
		/* With ECH this is the outer, public name: recorded, never trusted. */
		if (th.has_sni)
			snprintf(c->sni, sizeof(c->sni), "%s", th.sni);
		if (th.has_ech) {
			deny(c, "tls_ech", NULL);
			return;
		}
		if (th.sni_invalid) {
			deny(c, "tls_bad_sni", NULL);
			return;
		}
		if (th.has_sni) {
			snprintf(c->host, sizeof(c->host), "%s", th.sni);
			c->has_name = 1;
		}
		c->peek = PK_TLS_NOSNI;
		decide(c);
		return;
	}
	/* DESIGN.md: a ClientHello that does not parse is denied, even towards
	 * a CIDR-allowed address. */
	if (rc == SG_ERROR) {
		c->tls_seen = 1;
		deny(c, "tls_bad_hello", NULL);
		return;
	}
	if (rc == SG_AGAIN) {
		if (final) {
			c->tls_seen = 1;
			deny(c, hs->len >= hs->max ? "tls_bad_hello" : "handshake_timeout", NULL);
		}
		return;
	}
	/* Not TLS: plain HTTP names its host; anything else is IP-only. */
	rc = http1_parse_request(hs->buf, hs->len, (size_t)cfg_of(c)->max_header_bytes, &req);
	if (rc == SG_OK) {
		char hostbuf[SG_HOST_MAX + 3];
		int port;

		c->peek = PK_HTTP_NOHOST;
		/* One request per upstream connection, as for the proxy. */
		if (http_one_request(c, &req) < 0)
			return;
		if (req.host && req.host_len &&
		    sg_hostport_split(req.host, req.host_len, hostbuf, sizeof(hostbuf),
				      c->odst_port, &port) == 0 &&
		    set_target(c, hostbuf, strlen(hostbuf)) == 0) {
			/* The name, not a literal: a literal Host is only as good
			 * as the original destination. */
		} else {
			c->has_dst = 0;
			c->dst_is_literal = 0;
		}
		decide(c);
		return;
	}
	/* Bytes that are neither TLS nor HTTP (or not yet) have no name: only
	 * a CIDR rule on the original destination can allow them, whatever
	 * protocol they are (SMTP, memcached, a banner-first server ...). */
	if (rc == SG_AGAIN && !final)
		return;
	c->peek = rc == SG_ERROR ? PK_HTTP_BAD : rc == SG_AGAIN ? PK_PARTIAL : PK_OPAQUE;
	decide(c);
}

static void run_peek(struct gw_conn *c)
{
	int rc = read_more(c);

	if (rc == -2) {
		gw_conn_close(c, "client read error");
		return;
	}
	if (rc == -1) {
		/* EOF before a decision: no decision, nothing to audit, unless
		 * what came is complete enough to decide on. */
		if (c->hs->len == 0) {
			gw_conn_close(c, "client closed before sending");
			return;
		}
		peek_classify(c, 1);
		if (c->state == CS_PEEK)
			gw_conn_close(c, "client closed");
		return;
	}
	if (rc == -3) {
		peek_classify(c, 1);
		return;
	}
	if (rc == 1)
		peek_classify(c, 0);
}

/* ------------------------------------------------------------------ proxy */

/* Build the upstream head: origin-form, hop-by-hop fields removed,
 * Connection: close (one request per upstream connection, RFC 9112 9.6,
 * so a second request cannot ride on this one's decision). */
static int rewrite_head(struct gw_conn *c, const struct http1_request *req,
			const char *path, size_t path_len, const char *authority,
			size_t authority_len)
{
	struct gw_hs *hs = c->hs;
	size_t cap, o = 0, i;
	char *h;

	/* Exact size: fields are rewritten as "name: value\r\n", which can be
	 * longer than what came (bare LF, no space after the colon). */
	cap = req->method_len + 1 + path_len + 11 + 21;
	if (!req->host && authority)
		cap += 6 + authority_len + 2;
	for (i = 0; i < req->num_headers; i++)
		cap += req->headers[i].name_len + req->headers[i].value_len + 4;
	h = malloc(cap);
#define PUT(s, n) do { memcpy(h + o, (s), (n)); o += (n); } while (0)
	if (!h)
		return SG_ENOMEM;
	PUT(req->method, req->method_len);
	PUT(" ", 1);
	PUT(path, path_len);
	PUT(" HTTP/1.1\r\n", 11);
	if (!req->host && authority) {
		PUT("Host: ", 6);
		PUT(authority, authority_len);
		PUT("\r\n", 2);
	}
	for (i = 0; i < req->num_headers; i++) {
		const struct http1_header *f = &req->headers[i];

		if (http1_is_hop_by_hop(req, f))
			continue;
		PUT(f->name, f->name_len);
		PUT(": ", 2);
		PUT(f->value, f->value_len);
		PUT("\r\n", 2);
	}
	PUT("Connection: close\r\n\r\n", 21);
#undef PUT
	hs->head = h;
	hs->head_len = o;
	return 0;
}

static void run_proxy_head(struct gw_conn *c)
{
	struct gw_hs *hs = c->hs;
	struct http1_request req;
	const char *auth, *path;
	size_t auth_len, path_len;
	char hostbuf[SG_HOST_MAX + 3];
	int rc, port;

	rc = read_more(c);
	if (rc == -2 || (rc == -1 && hs->len == 0)) {
		gw_conn_close(c, "client gone");
		return;
	}
	if (rc == 0)
		return;
	rc = http1_parse_request(hs->buf, hs->len, (size_t)cfg_of(c)->max_header_bytes, &req);
	if (rc == SG_AGAIN) {
		if (hs->len >= hs->max)
			refuse(c, 400, "http_header_too_large");
		else if (read_more(c) == -1)
			gw_conn_close(c, "client closed mid-request");
		return;
	}
	if (rc != SG_OK) {
		c->http = 1;
		refuse(c, 400, req.error && strstr(req.error, "large") ?
		       "http_header_too_large" : "http_bad_request");
		return;
	}
	snprintf(c->method, sizeof(c->method), "%.*s", (int)SG_MIN(req.method_len, 15),
		 req.method);
	if (req.method_len == 7 && !memcmp(req.method, "CONNECT", 7)) {
		/* RFC 9110 9.3.6: authority-form, host and port both required. */
		if (sg_hostport_split(req.target, req.target_len, hostbuf, sizeof(hostbuf),
				      -1, &port) < 0 || set_target(c, hostbuf, strlen(hostbuf)) < 0) {
			refuse(c, 400, "http_bad_request");
			return;
		}
		c->port = (uint16_t)port;
		hs->consumed = req.head_len;
		decide(c);
		return;
	}
	/* Anything else must be absolute-form (RFC 9112 3.2.2). */
	c->http = 1;
	c->event = "request";
	c->tls_mode = "none";
	rc = http1_split_absolute(req.target, req.target_len, &auth, &auth_len, &path, &path_len);
	if (rc != 0) {
		refuse(c, 400, "http_bad_request");
		return;
	}
	set_path(c, path, path_len);
	if (sg_hostport_split(auth, auth_len, hostbuf, sizeof(hostbuf), 80, &port) < 0 ||
	    set_target(c, hostbuf, strlen(hostbuf)) < 0) {
		refuse(c, 400, "http_bad_request");
		return;
	}
	c->port = (uint16_t)port;
	/* RFC 9112 3.2.2: the target wins over Host, but a client whose Host
	 * names someone else is either broken or trying to confuse a
	 * virtual-hosting upstream about which site it reached. */
	if (req.host) {
		char h2[SG_HOST_MAX + 3];
		int p2;

		if (sg_hostport_split(req.host, req.host_len, h2, sizeof(h2), 80, &p2) < 0 ||
		    strcasecmp(h2, hostbuf) || p2 != port) {
			deny(c, "host_mismatch", NULL);
			return;
		}
	}
	if (req.has_te && !req.chunked) {
		/* RFC 9112 6.3: no way to find the end of this body. */
		refuse(c, 400, "http_bad_request");
		return;
	}
	if (rewrite_head(c, &req, path, path_len, auth, auth_len) < 0) {
		refuse(c, 502, "out_of_memory");
		return;
	}
	c->c2u.limit = req.chunked ? 0 : SG_MAX(req.content_length, 0);
	c->c2u.chunked = req.chunked;
	c->c2u.no_shut = 1;
	hs->consumed = req.head_len;
	decide(c);
}

/*
 * The first line of what a client sent into a tunnel, up to its LF or the
 * first control byte: SG_OK if it contains "HTTP/" (in any case), so it
 * is meant as an HTTP request; SG_DECLINED if it does not and is complete
 * (an LF, or a control byte: binary data); SG_AGAIN if it is text so far
 * without a line end.
 */
static int names_http_version(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n && p[i] != '\n'; i++) {
		if ((p[i] < 0x20 && p[i] != '\t' && p[i] != '\r') || p[i] == 0x7f)
			break;
		if (i + 5 <= n && (p[i] | 0x20) == 'h' && (p[i + 1] | 0x20) == 't' &&
		    (p[i + 2] | 0x20) == 't' && (p[i + 3] | 0x20) == 'p' && p[i + 4] == '/')
			return SG_OK;
	}
	return i == n ? SG_AGAIN : SG_DECLINED;
}

/* After our 200: the tunnel's first bytes, if TLS, must name the CONNECT
 * host; if plain HTTP, its Host, and it goes up as one request. */
static void run_tunnel_peek(struct gw_conn *c, int final)
{
	struct gw_hs *hs = c->hs;
	struct tls_hello th;
	int rc;

	rc = gw_out_flush(c->cio.fd, &hs->cout, &c->c_wr);
	if (rc < 0) {
		gw_conn_close(c, "client write failed");
		return;
	}
	if (rc == 0)
		return;
	rc = read_more(c);
	if (rc == -2 || (rc == -1 && hs->len == 0)) {
		gw_conn_close(c, "client gone");
		return;
	}
	if (rc == -1 || rc == -3)
		final = 1;      /* no more bytes will come to complete a hello */
	if (hs->len == 0 && !final)
		return;
	rc = hs->len ? tls_hello_parse(hs->buf, hs->len, &th) : SG_DECLINED;
	if (rc == SG_AGAIN && !final)
		return;
	if (rc == SG_OK) {
		c->tls_seen = 1;
		if (th.has_alpn)
			snprintf(c->alpn, sizeof(c->alpn), "%s", th.alpn);
		if (th.has_sni)
			snprintf(c->sni, sizeof(c->sni), "%s", th.sni);
		if (th.has_ech) {
			deny(c, "tls_ech", NULL);
			return;
		}
		if (th.sni_invalid) {
			deny(c, "tls_bad_sni", NULL);
			return;
		}
		if (th.has_sni && (!c->has_name || strcmp(th.sni, c->host))) {
			deny(c, "sni_mismatch", NULL);
			return;
		}
	} else if (rc == SG_ERROR || rc == SG_AGAIN) {
		deny(c, rc == SG_AGAIN ? "handshake_timeout" : "tls_bad_hello", NULL);
		return;
	} else if (c->has_name) {
		/*
		 * The tunnel was allowed for a name: whatever runs in it must
		 * not name another host. A client that stays silent until the
		 * timer fires must not get an unchecked tunnel (it could then
		 * send a ClientHello for any site sharing the address); a
		 * server-speaks-first protocol is only for address decisions.
		 * Plain HTTP must carry the CONNECT host as its Host.
		 */
		struct http1_request req;
		size_t skip = 0, max = (size_t)cfg_of(c)->max_header_bytes;
		int hr;

		if (hs->len == 0) {
			deny(c, "handshake_timeout", NULL);
			return;
		}
		/* Servers ignore empty lines before a request line (RFC 9112
		 * 2.2): so must the check, or the request behind them would
		 * pass as "another protocol". */
		while (skip < hs->len && (hs->buf[skip] == '\r' || hs->buf[skip] == '\n'))
			skip++;
		hr = skip == hs->len ? SG_AGAIN :
		     http1_parse_request(hs->buf + skip, hs->len - skip, max, &req);
		if (hr == SG_AGAIN && !final)
			return;
		if (hr == SG_AGAIN) {
			deny(c, "handshake_timeout", NULL);
			return;
		}
		if (hr == SG_OK) {
			char h[SG_HOST_MAX + 3], hn[SG_HOST_MAX + 1];
			int p;

			if (skip) {
				memmove(hs->buf, hs->buf + skip, hs->len - skip);
				hs->len -= skip;
				http1_parse_request(hs->buf, hs->len, max, &req);
			}
			if (!req.host || sg_hostport_split(req.host, req.host_len, h, sizeof(h),
							   c->port, &p) < 0 ||
			    sg_host_normalize(h, strlen(h), hn) < 0 || strcmp(hn, c->host)) {
				as_http_request(c, &req);
				set_path(c, req.target, req.target_len);
				deny(c, "host_mismatch", NULL);
				return;
			}
			/* One request per tunnel: a later request on the same
			 * connection could name another host sharing the
			 * address, and it would not be looked at. */
			if (http_one_request(c, &req) < 0 || stage_http_head(c) < 0)
				return;
			hs->uout.off = 0;
			gw_relay_start(c);
			return;
		}
		/*
		 * Not a request this parser takes. If it still names an HTTP
		 * version (a duplicate Host, a folded field, a tab, the HTTP/2
		 * preface...), a lenient origin might take it, and the request
		 * or what is pipelined after it would go unchecked: refused.
		 * Binary protocols and text lines without one are relayed.
		 */
		hr = names_http_version(hs->buf + skip, hs->len - skip);
		if (hr == SG_AGAIN && !final)
			return;
		if (hr != SG_DECLINED) {
			as_http_request(c, NULL);
			refuse(c, 400, hr == SG_AGAIN ? "handshake_timeout" : "http_bad_request");
			return;
		}
	}
	/* TLS naming the right host, HTTP with the right Host, another
	 * protocol, or (address decisions only) a server-first one: relay. */
	hs->uout.p = hs->buf;
	hs->uout.len = hs->len;
	hs->uout.off = 0;
	gw_relay_start(c);
}

/* -------------------------------------------------------------- decision */

static void set_verdict(struct gw_conn *c, const struct pol_verdict *v)
{
	c->reason = v->reason;
	c->rule_id = v->rule_id;
	c->would_deny = v->would_deny;
}

static void connect_next(struct gw_conn *c);

/* What goes upstream first for a request of http_one_request(): the
 * rewritten head, then the body bytes that came with it: only the body,
 * never what the client pipelined after it. 0, or -1 if refused. */
static int stage_http_head(struct gw_conn *c)
{
	struct gw_hs *hs = c->hs;
	size_t extra = hs->len - hs->consumed;

	if (c->c2u.chunked) {
		long k = http1_chunked_scan(&c->c2u.ch, hs->buf + hs->consumed, extra);

		if (k < 0) {
			refuse(c, 400, "http_bad_request");
			return -1;
		}
		extra = (size_t)k;
	} else {
		extra = (size_t)SG_MIN((int64_t)extra, c->c2u.limit);
		c->c2u.limit -= (int64_t)extra;
	}
	if (extra) {
		char *nh = realloc(hs->head, hs->head_len + extra);

		if (!nh) {
			refuse(c, 502, "out_of_memory");
			return -1;
		}
		memcpy(nh + hs->head_len, hs->buf + hs->consumed, extra);
		hs->head = nh;
		hs->head_len += extra;
	}
	hs->uout.p = (const uint8_t *)hs->head;
	hs->uout.len = hs->head_len;
	if (c->c2u.chunked ? c->c2u.ch.done : c->c2u.limit == 0)
		c->c2u.eof = 1;
	return 0;
}

static void upstream_connected(struct gw_conn *c)
{
	struct gw_hs *hs = c->hs;
	int one = 1;

	gw_timer_cancel(c->w->loop, &c->timer);
	setsockopt(c->uio.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->dst = hs->addrs[hs->idx];
	c->has_dst = 1;
	if (c->kind == GW_LISTEN_PROXY && !c->http) {
		/* CONNECT: answer, then look at the tunnel's first bytes.
		 * Bytes the client pipelined after its CONNECT head stay. */
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

		memmove(hs->buf, hs->buf + hs->consumed, hs->len - hs->consumed);
		hs->len -= hs->consumed;
		hs->cout.p = (const uint8_t *)ok;
		hs->cout.len = sizeof(ok) - 1;
		hs->cout.off = 0;
		c->state = CS_TUNNEL_PEEK;
		c->tls_mode = "passthrough";
		hs->max = SG_MAX(hs->max, (size_t)PEEK_MAX);
		gw_timer_set(c->w->loop, &c->timer, cfg_of(c)->handshake_timeout_ms);
		run_tunnel_peek(c, 0);
		return;
	}
	if (c->http && hs->head) {
		if (stage_http_head(c) < 0)
			return;
	} else {
		hs->uout.p = hs->buf;
		hs->uout.len = hs->len;
	}
	hs->uout.off = 0;
	gw_relay_start(c);
}

static void upstream_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct gw_conn *c = sg_container_of(io, struct gw_conn, uio);

	SG_UNUSED(l);
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->u_rd = 1;
	if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->u_hup = 1;
	if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		c->u_wr = 1;
	if (c->state == CS_CONNECT) {
		int err = 0;
		socklen_t el = sizeof(err);

		if (!c->u_wr)
			return;
		getsockopt(io->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			char ip[INET6_ADDRSTRLEN];

			sg_debug("connect %s port %u: %s",
				 sg_addr_str(&c->hs->addrs[c->hs->idx], ip, sizeof(ip)),
				 c->port, strerror(err));
			gw_io_forget(&c->uio);
			close(c->uio.fd);
			c->uio.fd = -1;
			c->hs->idx++;
			connect_next(c);
			return;
		}
		upstream_connected(c);
		return;
	}
	conn_run(c);
}

/* Try the candidate addresses in order; each failure moves to the next. */
static void connect_next(struct gw_conn *c)
{
	struct gw_hs *hs = c->hs;

	while (hs->idx < hs->n_addrs) {
		struct sockaddr_storage ss;
		socklen_t sl = sg_addr_to_sa(&hs->addrs[hs->idx], c->port, &ss);
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0) {
			hs->idx++;
			continue;
		}
		if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
			close(fd);
			hs->idx++;
			continue;
		}
		c->u_rd = c->u_wr = 0;
		if (gw_io_add(c->w->loop, &c->uio, fd, IO_EVENTS, upstream_io) < 0) {
			close(fd);
			hs->idx++;
			continue;
		}
		c->state = CS_CONNECT;
		gw_timer_set(c->w->loop, &c->timer, cfg_of(c)->connect_timeout_ms);
		return;
	}
	c->reason = "upstream_connect_failed";
	refuse(c, 502, "upstream_connect_failed");
}

static void allow_and_connect(struct gw_conn *c)
{
	c->allowed = 1;
	c->hs->idx = 0;
	connect_next(c);
}

/* Static answers are the operator's (resolver.hosts): exempt from the
 * internal-address guard, and never sent to a DNS server. */
static const struct pol_static_host *static_lookup(const struct sg_config *cfg,
						   const char *name)
{
	size_t i;

	for (i = 0; i < cfg->n_hosts; i++)
		if (!strcmp(cfg->hosts[i].name, name))
			return &cfg->hosts[i];
	return NULL;
}

/*
 * The name has addresses: ask the policy about each, keep the allowed ones
 * in order. None: a transparent connection may still be allowed on its
 * original destination by a CIDR rule; otherwise it is refused with the
 * policy's reason, or the resolver's when there was nothing to judge.
 */
static void addresses_ready(struct gw_conn *c, const struct gw_resolve_result *res)
{
	struct gw_hs *hs = c->hs;
	struct pol_verdict v, first = { .decision = POL_DENY }, last = { .decision = POL_DENY };
	struct pol_query q = { .sbx = c->sbx, .name = c->host, .port = c->port,
			       .addr_static = res->is_static };
	size_t i, n = 0;
	int any = 0;

	for (i = 0; res->status == GW_RESOLVE_OK && i < res->n; i++) {
		q.addr = &res->addrs[i];
		pol_eval(cfg_of(c), &q, &v);
		last = v;
		any = 1;
		if (v.decision != POL_ALLOW)
			continue;
		if (!n)
			first = v;
		hs->addrs[n++] = res->addrs[i];
	}
	if (n) {
		hs->n_addrs = n;
		hs->addrs_static = res->is_static;
		set_verdict(c, &first);
		allow_and_connect(c);
		return;
	}
	if (c->has_odst) {
		q.name = NULL;
		q.addr = &c->odst;
		q.addr_static = 0;
		pol_eval(cfg_of(c), &q, &v);
		if (v.decision == POL_ALLOW) {
			hs->addrs[0] = c->odst;
			hs->n_addrs = 1;
			set_verdict(c, &v);
			allow_and_connect(c);
			return;
		}
	}
	if (any) {
		set_verdict(c, &last);
		deny(c, last.reason, last.rule_id);
		return;
	}
	/* Nothing to judge: the name did not resolve. */
	if (c->name_allowed) {
		/* The name alone was allowed; the failure is the resolver's. */
		refuse(c, res->status == GW_RESOLVE_TIMEOUT ? 504 : 502,
		       res->status == GW_RESOLVE_NXDOMAIN ? "resolve_nxdomain" :
		       res->status == GW_RESOLVE_TIMEOUT ? "resolve_timeout" : "resolve_failed");
	} else {
		/* Only a CIDR rule could have allowed it, and there is no
		 * address to hold against one. */
		deny(c, c->sbx ? "default_deny" : "unknown_source", NULL);
	}
}

static void on_resolved(struct gw_resolve_waiter *rw, const struct gw_resolve_result *res)
{
	struct gw_hs *hs = sg_container_of(rw, struct gw_hs, rw);
	struct gw_conn *c = hs->conn;

	addresses_ready(c, res);
}

/*
 * First judgement, on what the client told us: the name (SNI, Host,
 * CONNECT host) or, without one, the address it dialled. Names are
 * resolved only once the policy says they may matter: a name that can
 * only be denied is never sent to a DNS server.
 */
static void decide(struct gw_conn *c)
{
	struct gw_hs *hs = c->hs;
	struct pol_query q = { .sbx = c->sbx, .port = c->port };
	struct pol_verdict v;

	gw_timer_cancel(c->w->loop, &c->timer);
	if (!c->tls_mode)
		c->tls_mode = c->tls_seen ? "passthrough" : "none";
	{
		/* Looked up again now, not at accept: a sandbox the gateway
		 * stopped meanwhile gets nothing more, in any mode. */
		const struct gw_reg_entry *re = gw_registry_lookup(c->w->registry, &c->src);

		if (re && re->stopped[0]) {
			deny(c, "sandbox_stopped", NULL);
			return;
		}
	}
	if (c->has_name) {
		const struct pol_static_host *sh;

		q.name = c->host;
		pol_eval(cfg_of(c), &q, &v);
		if (v.decision == POL_DENY) {
			deny(c, v.reason, v.rule_id);
			return;
		}
		/* Remember the name-phase verdict: if resolution then fails,
		 * it says whether the name itself was allowed. */
		c->allowed = v.decision == POL_ALLOW;
		c->name_allowed = c->allowed || v.name_allowed;
		if (c->allowed)
			set_verdict(c, &v);
		sh = static_lookup(cfg_of(c), c->host);
		if (sh) {
			struct gw_resolve_result res = { .status = GW_RESOLVE_OK, .is_static = 1 };

			res.n = SG_MIN(sh->n_addrs, (size_t)GW_RESOLVE_MAX_ADDRS);
			memcpy(res.addrs, sh->addrs, res.n * sizeof(res.addrs[0]));
			addresses_ready(c, &res);
			return;
		}
		c->state = CS_RESOLVE;
		gw_resolve_start(c->w->resolver, c->host, &hs->rw, on_resolved);
		return;
	}
	/* No name: a literal the client asked for, or where it dialled. */
	if (!c->has_dst && c->has_odst) {
		c->dst = c->odst;
		c->has_dst = 1;
	}
	/* DNS responder hook: name the record after what the sandbox was
	 * told this address is. Only the record: the decision below is on
	 * the address alone, as before. */
	if (c->has_odst && !c->dst_is_literal &&
	    gw_dns_learned_host(c->w, &c->src, &c->odst, c->host))
		c->host_from_dns = 1;
	if (!c->has_dst) {
		deny(c, "no_destination", NULL);
		return;
	}
	q.addr = &c->dst;
	pol_eval(cfg_of(c), &q, &v);
	if (v.decision != POL_ALLOW) {
		const char *reason = v.reason;

		/* Say why there was nothing better to judge than an address. */
		if (!strcmp(reason, "default_deny") && c->kind == GW_LISTEN_TRANSPARENT) {
			static const char *const why[] = {
				[PK_NONE] = "handshake_timeout",
				[PK_TLS_NOSNI] = "tls_no_sni",
				[PK_HTTP_NOHOST] = "http_no_host",
				[PK_HTTP_BAD] = "http_bad_request",
				[PK_PARTIAL] = "handshake_timeout",
				[PK_OPAQUE] = "no_hostname",
			};

			reason = why[c->peek];
		}
		deny(c, reason, v.rule_id);
		return;
	}
	set_verdict(c, &v);
	hs->addrs[0] = c->dst;
	hs->n_addrs = 1;
	allow_and_connect(c);
}

/* ------------------------------------------------------------ the driver */

static void conn_run(struct gw_conn *c)
{
	switch (c->state) {
	case CS_PEEK:
		run_peek(c);
		break;
	case CS_PROXY_HEAD:
		run_proxy_head(c);
		break;
	case CS_TUNNEL_PEEK:
		run_tunnel_peek(c, 0);
		break;
	case CS_RELAY:
		gw_relay_run(c);
		break;
	case CS_SEND_ERROR: {
		int rc = gw_out_flush(c->cio.fd, &c->hs->cout, &c->c_wr);

		if (rc < 0) {
			gw_conn_close(c, "client write failed");
			return;
		}
		if (rc == 0)
			return;
		/* Lingering close: shut our side and read until the client
		 * closes, so unread request bytes do not turn into a reset that
		 * destroys the response in flight. */
		shutdown(c->cio.fd, SHUT_WR);
		c->state = CS_LINGER;
		gw_timer_set(c->w->loop, &c->timer, LINGER_MS);
	}
		/* fall through */
	case CS_LINGER: {
		char sink[4096];

		while (c->c_rd) {
			ssize_t n = recv(c->cio.fd, sink, sizeof(sink), 0);

			if (n > 0)
				continue;
			if (n < 0 && errno == EAGAIN) {
				c->c_rd = 0;
				break;
			}
			if (n < 0 && errno == EINTR)
				continue;
			gw_conn_close(c, "refused");
			return;
		}
		break;
	}
	default:
		break;
	}
}

static void client_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct gw_conn *c = sg_container_of(io, struct gw_conn, cio);

	SG_UNUSED(l);
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->c_rd = 1;
	if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->c_hup = 1;
	if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		c->c_wr = 1;
	if (c->state == CS_RESOLVE || c->state == CS_CONNECT)
		return;         /* flags are kept for when we get there */
	conn_run(c);
}

static void conn_timer(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_conn *c = sg_container_of(t, struct gw_conn, timer);
	int64_t now = gw_loop_now(l);

	switch (c->state) {
	case CS_PEEK:
		/* Nothing or not enough: decide on what there is (a silent
		 * client may speak a server-first protocol a CIDR rule allows). */
		if (c->hs->len == 0)
			decide(c);
		else
			peek_classify(c, 1);
		break;
	case CS_PROXY_HEAD:
		c->http = 1;
		refuse(c, 400, "handshake_timeout");
		break;
	case CS_CONNECT:
		gw_io_forget(&c->uio);
		close(c->uio.fd);
		c->uio.fd = -1;
		c->hs->idx++;
		connect_next(c);
		break;
	case CS_TUNNEL_PEEK:
		run_tunnel_peek(c, 1);
		break;
	case CS_RELAY:
		if (now - c->last_active >= cfg_of(c)->idle_timeout_ms) {
			gw_conn_close(c, "idle");
			return;
		}
		gw_timer_set(l, t, cfg_of(c)->idle_timeout_ms - (now - c->last_active));
		break;
	case CS_SEND_ERROR:
	case CS_LINGER:
		gw_conn_close(c, "linger over");
		break;
	default:
		break;
	}
}

/* ---------------------------------------------------------------- accept */

static int original_dst(int fd, struct sg_addr *a, uint16_t *port, int family)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int p;

	/* A v4 client on our dual-stack socket is still IPv4 to netfilter. */
	if (family == AF_INET) {
		if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &sl) < 0)
			return -1;
	} else if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &sl) < 0) {
		return -1;
	}
	p = sg_addr_from_sa((struct sockaddr *)&ss, a);
	if (p < 0)
		return -1;
	*port = (uint16_t)p;
	return 0;
}

void gw_conn_accept(struct gw_worker *w, struct gw_listener *ls, int fd,
		    const struct sockaddr_storage *peer, socklen_t sl)
{
	struct gw_daemon *d = w->d;
	struct gw_conn *c;
	int p;
	const struct sg_config *cfg = w->snap->cfg;

	atomic_fetch_add(&d->stats.accepted, 1);
	if (atomic_load(&d->n_conns) >= cfg->max_connections) {
		atomic_fetch_add(&d->stats.refused_limit, 1);
		close(fd);
		return;
	}
	if (!d->audit_on_failure_allow && aud_failing(d->audit)) {
		/* Fail closed: no traffic we cannot account for. */
		atomic_fetch_add(&d->stats.refused_audit, 1);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->hs = calloc(1, sizeof(*c->hs)))) {
		free(c);
		close(fd);
		return;
	}
	c->w = w;
	c->hs->conn = c;
	c->snap = gw_snap_ref(w->snap);
	c->kind = ls->kind;
	c->uio.fd = -1;
	c->c2u.limit = -1;
	c->u2c.limit = -1;
	c->event = "connection";
	c->start_ms = gw_now_ms();
	c->hs->max = ls->kind == GW_LISTEN_PROXY ? (size_t)cfg->max_header_bytes : PEEK_MAX;
	gw_timer_init(&c->timer, conn_timer);
	if (sl >= sizeof(struct sockaddr_in) &&
	    (p = sg_addr_from_sa((const struct sockaddr *)peer, &c->src)) >= 0)
		c->src_port = (uint16_t)p;
	/* TCP_NODELAY is inherited from the listening socket. */
	/* Identity is the source address: a sandbox registered at run time
	 * (by an adapter, through the control API) first, then the static
	 * sources of the policy. Never anything the client says. */
	{
		const struct gw_reg_entry *re = gw_registry_lookup(w->registry, &c->src);

		if (re) {
			snprintf(c->sbx_name, sizeof(c->sbx_name), "%s", re->name);
			c->sbx = pol_sandbox_by_name(c->snap->cfg, re->name);
		} else {
			c->sbx = pol_sandbox_by_addr(c->snap->cfg, &c->src);
			if (c->sbx)
				snprintf(c->sbx_name, sizeof(c->sbx_name), "%s", c->sbx->name);
		}
	}
	if (ls->kind == GW_LISTEN_TRANSPARENT) {
		struct sockaddr_storage ls_ss;
		socklen_t ll = sizeof(ls_ss);
		struct sg_addr local;

		/* Redirected connections have an original destination that is
		 * not us; one made straight to the listener has none. */
		if (original_dst(fd, &c->odst, &c->odst_port, c->src.family) == 0 &&
		    (c->odst_port != ls->port ||
		     !(getsockname(fd, (struct sockaddr *)&ls_ss, &ll) == 0 &&
		       sg_addr_from_sa((struct sockaddr *)&ls_ss, &local) == c->odst_port &&
		       sg_addr_eq(&local, &c->odst))))
			c->has_odst = 1;
		c->port = c->odst_port;
		c->state = CS_PEEK;
	} else {
		c->state = CS_PROXY_HEAD;
	}
	list_link(&w->conns, c);
	w->n_conns++;
	atomic_fetch_add(&d->n_conns, 1);
	if (gw_io_add(w->loop, &c->cio, fd, IO_EVENTS, client_io) < 0) {
		c->cio.fd = fd;
		gw_conn_close(c, "epoll");
		return;
	}
	gw_timer_set(w->loop, &c->timer, cfg->handshake_timeout_ms);
}
