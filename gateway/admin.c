/*
 * admin.c - the control API server. See admin.h for the routes.
 *
 * Runs on the main thread's loop: requests are rare and some (reload)
 * do file I/O that must not stall a worker. Each connection reads one
 * request (head parsed by http1_parse_request, body by Content-Length),
 * answers it and closes.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_jsonp.h"
#include "sg_log.h"
#include "sg_sbuf.h"
#include "gateway/admin.h"
#include "gateway/gw.h"
#include "gateway/http1.h"
#include "gateway/loop.h"
#include "gateway/registry.h"
#include "sg_poison.h"

#define ADMIN_HEAD_MAX (16 * 1024)
#define ADMIN_BODY_MAX (64 * 1024)
#define ADMIN_TIMEOUT_MS 10000
#define ADMIN_TOKENS 256
#define ADMIN_WAIT_TICK_MS 100  /* how often a waiter looks at the registry */
#define ADMIN_WAITERS_MAX 4096  /* GET .../wait held open at once */

struct gw_admin {
	struct gw_daemon *d;    /* borrowed */
	struct gw_loop *loop;   /* borrowed */
	struct gw_io io;
	int is_unix;
	char *path;             /* owned: the socket file to remove */
	char *token;            /* owned; wiped on stop */
	size_t token_len;
	struct admin_conn *conns;
	int n_waiting;
};

struct admin_conn {
	struct admin_conn *next, **pprev;
	struct gw_admin *a;
	struct gw_io io;
	struct gw_timer timer;
	char *buf;              /* owned */
	size_t len;
	struct sg_sbuf out;
	size_t out_off;
	int responding;
	int waiting;            /* GET .../wait: held until wait_name stops or goes */
	char wait_name[GW_REG_NAME_MAX];
};

static void conn_free(struct admin_conn *c)
{
	if (c->waiting)
		c->a->n_waiting--;
	gw_timer_cancel(c->a->loop, &c->timer);
	gw_io_del(c->a->loop, &c->io);
	close(c->io.fd);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	free(c->buf);
	sg_sbuf_free(&c->out);
	free(c);
}

/* ------------------------------------------------------------ responses */

static void respond(struct admin_conn *c, int status, const char *ctype, const char *body,
		    size_t body_len)
{
	const char *text = status == 200 ? "OK" : status == 201 ? "Created" :
			   status == 204 ? "No Content" : status == 400 ? "Bad Request" :
			   status == 401 ? "Unauthorized" : status == 404 ? "Not Found" :
			   status == 405 ? "Method Not Allowed" : status == 409 ? "Conflict" :
			   status == 410 ? "Gone" :
			   status == 413 ? "Content Too Large" : status == 503 ? "Service Unavailable" :
			   "Internal Server Error";

	sg_sbuf_printf(&c->out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		       "Connection: close\r\nCache-Control: no-store\r\n%s\r\n",
		       status, text, ctype, body_len,
		       status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
	sg_sbuf_add(&c->out, body, body_len);
	c->responding = 1;
}

static void respond_json(struct admin_conn *c, int status, const struct sg_sbuf *body)
{
	if (body->oom) {
		respond(c, 500, "application/json", "{\"error\":\"out of memory\"}\n", 26);
		return;
	}
	respond(c, status, "application/json", body->p ? body->p : "", body->len);
}

static void respond_error(struct admin_conn *c, int status, const char *msg)
{
	struct sg_sbuf b;

	sg_sbuf_init(&b);
	sg_sbuf_puts(&b, "{\"error\":");
	sg_sbuf_json_str(&b, msg);
	sg_sbuf_puts(&b, "}\n");
	respond_json(c, status, &b);
	sg_sbuf_free(&b);
}

/* ----------------------------------------------------------- sandboxes */

static void entry_json(struct sg_sbuf *b, const struct gw_reg_entry *e, const char *policy)
{
	char ip[INET6_ADDRSTRLEN];
	size_t i;

	sg_sbuf_puts(b, "{\"name\":");
	sg_sbuf_json_str(b, e->name);
	sg_sbuf_puts(b, ",\"addresses\":[");
	for (i = 0; i < e->n_addrs; i++) {
		if (i)
			sg_sbuf_puts(b, ",");
		sg_sbuf_json_str(b, sg_addr_str(&e->addrs[i], ip, sizeof(ip)));
	}
	sg_sbuf_printf(b, "],\"labels\":%s,\"registered_at\":%lld,\"policy\":",
		       e->labels[0] ? e->labels : "{}", (long long)e->registered_at);
	if (policy)
		sg_sbuf_json_str(b, policy);
	else
		sg_sbuf_puts(b, "null");
	sg_sbuf_puts(b, ",\"stopped\":");
	if (e->stopped[0]) {
		sg_sbuf_json_str(b, e->stopped);
		sg_sbuf_printf(b, ",\"stopped_at\":%lld", (long long)e->stopped_at);
	} else {
		sg_sbuf_puts(b, "null");
	}
	sg_sbuf_puts(b, "}");
}

static void list_sandboxes(struct admin_conn *c)
{
	struct gw_registry *r = gw_registry_current(c->a->d);
	struct gw_snap *s = gw_snap_current(c->a->d);
	struct sg_sbuf b;
	size_t i;

	sg_sbuf_init(&b);
	sg_sbuf_puts(&b, "{\"sandboxes\":[");
	for (i = 0; i < r->n; i++) {
		const struct pol_sandbox *p = pol_sandbox_by_name(s->cfg, r->entries[i].name);

		if (i)
			sg_sbuf_puts(&b, ",");
		entry_json(&b, &r->entries[i], p ? p->name : NULL);
	}
	sg_sbuf_puts(&b, "]}\n");
	respond_json(c, 200, &b);
	sg_sbuf_free(&b);
	gw_registry_put(r);
	gw_snap_put(s);
}

/* One sandbox's entry, with the policy it runs under. */
static void respond_entry(struct admin_conn *c, int status, const struct gw_reg_entry *e)
{
	struct gw_snap *s = gw_snap_current(c->a->d);
	const struct pol_sandbox *p = pol_sandbox_by_name(s->cfg, e->name);
	struct sg_sbuf b;

	sg_sbuf_init(&b);
	entry_json(&b, e, p ? p->name : NULL);
	sg_sbuf_puts(&b, "\n");
	respond_json(c, status, &b);
	sg_sbuf_free(&b);
	gw_snap_put(s);
}

static int name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n >= GW_REG_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return 0;
	return 1;
}

/*
 * Parse {"name": "...", "addresses": ["ip", ...], "labels": {"k": "v"}}.
 * Unknown fields, wrong types and bad values are errors with a reason:
 * an adapter that sends something we ignore would believe it took effect.
 */
static int parse_entry(const char *body, size_t len, struct gw_reg_entry *e,
		       char *why, size_t whysz)
{
	struct sg_jsonp_tok t[ADMIN_TOKENS];
	size_t off = 0, i;
	int n = sg_jsonp_parse(body, len, t, ADMIN_TOKENS, &off), have_name = 0, have_addrs = 0;

	memset(e, 0, sizeof(*e));
	if (n == SG_ENOMEM) {
		snprintf(why, whysz, "body has too many JSON values");
		return -1;
	}
	if (n < 0) {
		snprintf(why, whysz, "invalid JSON at byte %zu", off);
		return -1;
	}
	if (t[0].type != SG_JSON_OBJECT) {
		snprintf(why, whysz, "expected a JSON object");
		return -1;
	}
	for (i = 1; i < t[0].next; i = t[i + 1].next) {
		const struct sg_jsonp_tok *k = &t[i], *v = &t[i + 1];
		size_t m;

		/* A field given twice is ambiguous (and the second array would
		 * append past the first): refuse. */
		for (m = 1; m < i; m = t[m + 1].next)
			if (t[m].end - t[m].start == k->end - k->start &&
			    !memcmp(body + t[m].start, body + k->start, k->end - k->start)) {
				snprintf(why, whysz, "field \"%.*s\" given twice",
					 (int)SG_MIN(k->end - k->start, 64), body + k->start);
				return -1;
			}
		if (sg_jsonp_eq(body, k, "name")) {
			if (v->type != SG_JSON_STRING ||
			    sg_jsonp_str(body, v, e->name, sizeof(e->name)) < 0 || !name_ok(e->name)) {
				snprintf(why, whysz, "name: 1-%d characters of [A-Za-z0-9._-]",
					 GW_REG_NAME_MAX - 1);
				return -1;
			}
			have_name = 1;
		} else if (sg_jsonp_eq(body, k, "addresses")) {
			size_t j;

			if (v->type != SG_JSON_ARRAY || v->size == 0 || v->size > GW_REG_ADDRS_MAX) {
				snprintf(why, whysz, "addresses: a list of 1-%d IP addresses",
					 GW_REG_ADDRS_MAX);
				return -1;
			}
			for (j = i + 2; j < v->next; j = t[j].next) {
				char ip[64];

				if (e->n_addrs >= GW_REG_ADDRS_MAX || t[j].type != SG_JSON_STRING ||
				    sg_jsonp_str(body, &t[j], ip, sizeof(ip)) < 0 ||
				    sg_addr_parse(ip, strlen(ip), &e->addrs[e->n_addrs]) < 0) {
					if (t[j].type == SG_JSON_STRING)
						snprintf(why, whysz, "addresses: \"%.*s\" is not an IP address",
							 (int)SG_MIN(t[j].end - t[j].start, 64),
							 body + t[j].start);
					else
						snprintf(why, whysz, "addresses: expected strings");
					return -1;
				}
				e->n_addrs++;
			}
			have_addrs = 1;
		} else if (sg_jsonp_eq(body, k, "labels")) {
			size_t j;

			if (v->type != SG_JSON_OBJECT) {
				snprintf(why, whysz, "labels: expected an object of strings");
				return -1;
			}
			for (j = i + 2; j < v->next; j = t[j + 1].next)
				if (t[j].type != SG_JSON_STRING || t[j + 1].type != SG_JSON_STRING) {
					snprintf(why, whysz, "labels: values must be strings");
					return -1;
				}
			if (v->end - v->start >= sizeof(e->labels)) {
				snprintf(why, whysz, "labels: over %d bytes", GW_REG_LABELS_MAX - 1);
				return -1;
			}
			/* Validated JSON, stored as sent and echoed back as is. */
			memcpy(e->labels, body + v->start, v->end - v->start);
			e->labels[v->end - v->start] = '\0';
		} else {
			char key[64];

			if (sg_jsonp_str(body, k, key, sizeof(key)) < 0)
				snprintf(key, sizeof(key), "?");
			snprintf(why, whysz, "unknown field \"%s\"", key);
			return -1;
		}
	}
	if (!have_name || !have_addrs) {
		snprintf(why, whysz, "%s is required", !have_name ? "name" : "addresses");
		return -1;
	}
	e->registered_at = (int64_t)time(NULL);
	return 0;
}

static void register_sandbox(struct admin_conn *c, const char *body, size_t len)
{
	struct gw_reg_entry *e = malloc(sizeof(*e));
	char why[256];
	int rc;

	if (!e) {
		respond_error(c, 500, "out of memory");
		return;
	}
	if (parse_entry(body, len, e, why, sizeof(why)) < 0) {
		respond_error(c, 400, why);
		free(e);
		return;
	}
	rc = gw_register(c->a->d, e, why, sizeof(why));
	if (rc < 0) {
		respond_error(c, rc == SG_EINVAL ? 409 : 500, why);
		free(e);
		return;
	}
	respond_entry(c, 201, e);
	free(e);
}

/* 200 with name's current entry, or 404. */
static void respond_named(struct admin_conn *c, const char *name)
{
	struct gw_registry *r = gw_registry_current(c->a->d);
	const struct gw_reg_entry *e = gw_registry_find(r, name);

	if (e)
		respond_entry(c, 200, e);
	else
		respond_error(c, 404, "no such sandbox");
	gw_registry_put(r);
}

/* A reason code: what a stop records ("operator_stop" when none). */
static int reason_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n >= GW_REG_REASON_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

static void stop_sandbox(struct admin_conn *c, const char *name, const char *body, size_t len)
{
	struct sg_jsonp_tok t[16];
	char reason[GW_REG_REASON_MAX] = "operator_stop";
	size_t off = 0, i;
	int n;

	if (len > 0) {
		n = sg_jsonp_parse(body, len, t, 16, &off);
		if (n < 0 || t[0].type != SG_JSON_OBJECT) {
			respond_error(c, 400, "expected {\"reason\": \"snake_case_code\"}");
			return;
		}
		for (i = 1; i < t[0].next; i = t[i + 1].next) {
			if (!sg_jsonp_eq(body, &t[i], "reason") || t[i + 1].type != SG_JSON_STRING ||
			    sg_jsonp_str(body, &t[i + 1], reason, sizeof(reason)) < 0 ||
			    !reason_ok(reason)) {
				respond_error(c, 400, "expected {\"reason\": \"snake_case_code\"} "
					      "(a-z, 0-9, _; under 64 bytes)");
				return;
			}
		}
	}
	if (gw_stop_sandbox(c->a->d, name, reason) < 0) {
		respond_error(c, 404, "no such sandbox");
		return;
	}
	respond_named(c, name);
}

/* A waiter's answer, once there is one: 200 with the stopped entry, 410
 * when the name is gone. 0: nothing yet. */
static int wait_check(struct admin_conn *c)
{
	struct gw_registry *r = gw_registry_current(c->a->d);
	const struct gw_reg_entry *e = gw_registry_find(r, c->wait_name);
	int done = 1;

	if (!e)
		respond_error(c, 410, "unregistered");
	else if (e->stopped[0])
		respond_entry(c, 200, e);
	else
		done = 0;
	gw_registry_put(r);
	return done;
}

static void conn_io(struct gw_loop *l, struct gw_io *io, uint32_t ev);
static void conn_timeout(struct gw_loop *l, struct gw_timer *t);

/* Stops can come from any thread (a worker seeing a secret violation):
 * waiters look at the registry on a short tick instead of being told. */
static void wait_tick(struct gw_loop *l, struct gw_timer *t)
{
	struct admin_conn *c = sg_container_of(t, struct admin_conn, timer);

	if (wait_check(c)) {
		c->waiting = 0;
		c->a->n_waiting--;
		/* A peer that does not read its answer is not kept for ever. */
		gw_timer_init(&c->timer, conn_timeout);
		gw_timer_set(l, &c->timer, ADMIN_TIMEOUT_MS);
		conn_io(l, &c->io, EPOLLOUT);   /* edge-triggered: flush now */
		return;
	}
	gw_timer_set(l, &c->timer, ADMIN_WAIT_TICK_MS);
}

static void wait_sandbox(struct admin_conn *c, const char *name)
{
	snprintf(c->wait_name, sizeof(c->wait_name), "%s", name);
	{
		struct gw_registry *r = gw_registry_current(c->a->d);
		int found = gw_registry_find(r, name) != NULL;

		gw_registry_put(r);
		if (!found) {
			respond_error(c, 404, "no such sandbox");
			return;
		}
	}
	if (wait_check(c))
		return;
	if (c->a->n_waiting >= ADMIN_WAITERS_MAX) {
		respond_error(c, 503, "too many waiters");
		return;
	}
	/* No request timeout while waiting: the adapter holds this for the
	 * sandbox's life. A client that goes away is noticed by conn_io. The
	 * request buffer is not needed any more. */
	free(c->buf);
	c->buf = NULL;
	c->a->n_waiting++;
	c->waiting = 1;
	gw_timer_cancel(c->a->loop, &c->timer);
	gw_timer_init(&c->timer, wait_tick);
	gw_timer_set(c->a->loop, &c->timer, ADMIN_WAIT_TICK_MS);
}

/* -------------------------------------------------------------- routing */

static void route(struct admin_conn *c, const struct http1_request *req, const char *body,
		  size_t body_len)
{
	struct gw_daemon *d = c->a->d;
	const char *path = req->target;
	size_t plen = req->target_len;
	int get = req->method_len == 3 && !memcmp(req->method, "GET", 3);
	int post = req->method_len == 4 && !memcmp(req->method, "POST", 4);
	int del = req->method_len == 6 && !memcmp(req->method, "DELETE", 6);
	const char *q = memchr(path, '?', plen);

	if (q)
		plen = (size_t)(q - path);
#define IS(p) (plen == sizeof(p) - 1 && !memcmp(path, p, plen))
	if (IS("/healthz")) {
		if (!get)
			goto method;
		if (gw_healthy(d))
			respond(c, 200, "application/json", "{\"status\":\"ok\"}\n", 16);
		else
			respond(c, 503, "application/json", "{\"status\":\"audit_failing\"}\n", 27);
	} else if (IS("/metrics")) {
		struct sg_sbuf b;

		if (!get)
			goto method;
		sg_sbuf_init(&b);
		gw_metrics_text(d, &b);
		if (b.oom)
			respond_error(c, 500, "out of memory");
		else
			respond(c, 200, "text/plain; version=0.0.4", b.p ? b.p : "", b.len);
		sg_sbuf_free(&b);
	} else if (IS("/v1/sandboxes")) {
		if (get)
			list_sandboxes(c);
		else if (post)
			register_sandbox(c, body, body_len);
		else
			goto method;
	} else if (plen > 14 && !memcmp(path, "/v1/sandboxes/", 14)) {
		char name[GW_REG_NAME_MAX];
		const char *n = path + 14, *slash = memchr(n, '/', plen - 14);
		size_t nlen = slash ? (size_t)(slash - n) : plen - 14;
		size_t rest = plen - 14 - nlen;

		if (nlen == 0 || nlen >= sizeof(name)) {
			respond_error(c, 404, "no such sandbox");
			return;
		}
		memcpy(name, n, nlen);
		name[nlen] = '\0';
		if (rest == 0 && del) {
			if (gw_unregister(d, name) == 0)
				respond(c, 204, "application/json", "", 0);
			else
				respond_error(c, 404, "no such sandbox");
		} else if (rest == 0 && get) {
			respond_named(c, name);
		} else if (rest == 5 && !memcmp(slash, "/stop", 5)) {
			if (!post)
				goto method;
			stop_sandbox(c, name, body, body_len);
		} else if (rest == 5 && !memcmp(slash, "/wait", 5)) {
			if (!get)
				goto method;
			wait_sandbox(c, name);
		} else if (rest == 0) {
			goto method;
		} else {
			respond_error(c, 404, "no such endpoint");
		}
	} else if (IS("/v1/reload")) {
		char err[512];
		struct sg_sbuf b;

		if (!post)
			goto method;
		if (gw_reload(d, err, sizeof(err)) < 0) {
			respond_error(c, 400, err);
			return;
		}
		sg_sbuf_init(&b);
		sg_sbuf_printf(&b, "{\"reloaded\":true,\"generation\":%llu}\n",
			       (unsigned long long)gw_generation(d));
		respond_json(c, 200, &b);
		sg_sbuf_free(&b);
	} else {
		respond_error(c, 404, "no such endpoint");
	}
	return;
method:
	respond_error(c, 405, "method not allowed");
#undef IS
}

/* A TCP listener needs the bearer token; compared in constant time. */
static int authorized(struct gw_admin *a, const struct http1_request *req)
{
	size_t i;

	if (a->is_unix)
		return 1;
	for (i = 0; i < req->num_headers; i++) {
		const struct http1_header *h = &req->headers[i];

		if (http1_header_is(h, "Authorization") && h->value_len == 7 + a->token_len &&
		    !strncasecmp(h->value, "Bearer ", 7) &&
		    CRYPTO_memcmp(h->value + 7, a->token, a->token_len) == 0)
			return 1;
	}
	return 0;
}

static void conn_request(struct admin_conn *c)
{
	struct http1_request req;
	int rc = http1_parse_request((const uint8_t *)c->buf, c->len, ADMIN_HEAD_MAX, &req);
	size_t need;

	if (rc == SG_AGAIN)
		return;
	if (rc != SG_OK) {
		respond_error(c, 400, req.error ? req.error : "not an HTTP request");
		return;
	}
	if (req.has_te) {
		respond_error(c, 400, "send a Content-Length body");
		return;
	}
	if (req.content_length > ADMIN_BODY_MAX) {
		respond_error(c, 413, "body over 64 KiB");
		return;
	}
	need = req.head_len + (size_t)SG_MAX(req.content_length, 0);
	if (c->len < need)
		return;
	if (!authorized(c->a, &req)) {
		respond_error(c, 401, "a bearer token is required");
		return;
	}
	route(c, &req, c->buf + req.head_len, need - req.head_len);
}

static void conn_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct admin_conn *c = sg_container_of(io, struct admin_conn, io);

	SG_UNUSED(l);
	SG_UNUSED(ev);
	while (c->waiting) {
		char junk[1];
		ssize_t n = recv(io->fd, junk, sizeof(junk), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		/* The waiter went away, or sent more on a connection that
		 * asks one thing: either way it is done. */
		conn_free(c);
		return;
	}
	while (!c->responding) {
		ssize_t n;

		if (c->len == ADMIN_HEAD_MAX + ADMIN_BODY_MAX) {
			respond_error(c, 413, "request too large");
			break;
		}
		n = recv(io->fd, c->buf + c->len, ADMIN_HEAD_MAX + ADMIN_BODY_MAX - c->len, 0);
		if (n > 0) {
			c->len += (size_t)n;
			conn_request(c);
			if (c->waiting)
				return; /* held: see the waiting loop above */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		conn_free(c);           /* EOF or error before a whole request */
		return;
	}
	while (c->out_off < c->out.len) {
		ssize_t n = send(io->fd, c->out.p + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL);

		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		break;
	}
	conn_free(c);
}

static void conn_timeout(struct gw_loop *l, struct gw_timer *t)
{
	SG_UNUSED(l);
	conn_free(sg_container_of(t, struct admin_conn, timer));
}

static void listener_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct gw_admin *a = sg_container_of(io, struct gw_admin, io);

	SG_UNUSED(ev);
	for (;;) {
		int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct admin_conn *c;

		if (fd < 0)
			return;
		c = calloc(1, sizeof(*c));
		if (c)
			c->buf = malloc(ADMIN_HEAD_MAX + ADMIN_BODY_MAX);
		if (!c || !c->buf) {
			if (c)
				free(c);
			close(fd);
			continue;
		}
		c->a = a;
		sg_sbuf_init(&c->out);
		c->next = a->conns;
		if (c->next)
			c->next->pprev = &c->next;
		c->pprev = &a->conns;
		a->conns = c;
		gw_timer_init(&c->timer, conn_timeout);
		gw_timer_set(l, &c->timer, ADMIN_TIMEOUT_MS);
		if (gw_io_add(l, &c->io, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, conn_io) < 0) {
			c->io.fd = fd;
			conn_free(c);
		}
	}
}

/* ------------------------------------------------------------ lifecycle */

static int unix_listen(struct gw_admin *a, const char *path, char *err, size_t errsz)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errsz, "admin socket path too long: %s", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	/* A stale socket from a crashed run is ours to replace; anything else
	 * at that path is not. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errsz, "admin socket %s: exists and is not a socket", path);
			return -1;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errsz, "admin socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0177);      /* born 0600: no window where others may connect */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 64) < 0) {
		umask(old);
		snprintf(err, errsz, "admin socket %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	chmod(path, 0600);
	a->path = strdup(path);
	return fd;
}

struct gw_admin *gw_admin_start(struct gw_daemon *d, struct gw_loop *l, const char *spec,
				const char *token, size_t token_len, char *err, size_t errsz)
{
	struct gw_admin *a = calloc(1, sizeof(*a));
	int fd, port;

	if (!a) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	a->d = d;
	a->loop = l;
	if (!strncmp(spec, "unix:", 5)) {
		a->is_unix = 1;
		fd = unix_listen(a, spec + 5, err, errsz);
	} else {
		if (!token || !token_len) {
			snprintf(err, errsz, "gateway.listen.admin on TCP needs gateway.admin_token");
			free(a);
			return NULL;
		}
		a->token = malloc(token_len);
		if (!a->token) {
			snprintf(err, errsz, "out of memory");
			free(a);
			return NULL;
		}
		memcpy(a->token, token, token_len);
		a->token_len = token_len;
		fd = gw_listen_socket(spec, 0, 0, err, errsz, &port);
		if (fd >= 0)
			sg_info("control API on %s (bearer token required)", spec);
	}
	if (fd < 0 || gw_io_add(l, &a->io, fd, EPOLLIN, listener_io) < 0) {
		if (fd >= 0)
			close(fd);
		gw_admin_stop(a);
		return NULL;
	}
	if (a->is_unix)
		sg_info("control API on %s", spec);
	return a;
}

void gw_admin_stop(struct gw_admin *a)
{
	if (!a)
		return;
	while (a->conns)
		conn_free(a->conns);
	if (a->io.registered) {
		gw_io_del(a->loop, &a->io);
		close(a->io.fd);
	}
	if (a->path) {
		unlink(a->path);
		free(a->path);
	}
	if (a->token) {
		OPENSSL_cleanse(a->token, a->token_len);
		free(a->token);
	}
	free(a);
}
