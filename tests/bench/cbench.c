/*
 * cbench - a small HTTPS load client that can speak CONNECT first.
 *
 * wrk cannot go through a proxy, so the explicit-proxy rows of
 * tests/bench/run use this instead, and the direct baseline for those rows
 * is measured with it too (same client on both sides of every ratio).
 * It behaves like wrk: one epoll loop per thread, a fixed number of
 * connections, TLS without certificate verification and without session
 * resumption (every new connection is a full handshake), TCP_NODELAY, one
 * request in flight per connection, and on "Connection: close" a new
 * connection as soon as the response is complete.
 *
 *   cbench -a IP:PORT -s NAME [-C HOST:PORT] [-u PATH] [-k] [-c N] [-t N] [-d SEC]
 *   cbench -a IP:PORT -s NAME [-C HOST:PORT] -i N      hold N idle connections
 *
 *   -a   where to connect (the proxy, or the server)
 *   -C   send "CONNECT HOST:PORT" first and expect a 200
 *   -s   TLS server name (SNI) and Host header
 *   -u   request path (default /1k)
 *   -k   keep-alive: many requests per connection (default: one, Connection: close)
 *   -c   connections (default 32), -t threads (default 2), -d seconds (default 5)
 *   -i   idle mode: open N connections (at most -c at a time in setup), make
 *        one keep-alive request on each, print "ready N", then hold them
 *        until SIGTERM (or until stdin closes, when stdin is a pipe); prints
 *        "held N dropped D" at the end
 *
 * Output (load mode), one line:
 *   requests=R connects=K errors=E seconds=S rps=X
 * A response is counted only if its status is 200 and its body has exactly
 * the Content-Length it announced. The Host header carries the port
 * unless it is 443.
 *
 * Build: cc -O2 -o cbench cbench.c -lssl -lcrypto -lpthread
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum st { S_CONNECTING, S_PROXY_SEND, S_PROXY_RECV, S_TLS, S_SEND, S_RECV, S_IDLE, S_DEAD };

struct conn {
	int fd;
	enum st st;
	SSL *ssl;
	char buf[16384];        /* response head (and the CONNECT answer) */
	size_t blen;
	size_t req_off;         /* CONNECT request bytes sent */
	long body_left;         /* -1: head not complete yet */
	int status;
	int requests;           /* on this connection */
	struct worker *w;
};

struct worker {
	pthread_t th;
	int ep;
	int nconns;
	struct conn *conns;
	uint64_t requests, connects, errors;
	/* idle mode */
	int target, opened, ready, dropped;
};

static struct sockaddr_storage g_addr;
static socklen_t g_addrlen;
static const char *g_sni, *g_connect, *g_path = "/1k";
static int g_keepalive, g_conns = 32, g_threads = 2, g_idle;
static double g_secs = 5;
static SSL_CTX *g_ctx;
static char g_req[1024], g_creq[512];
static size_t g_req_len, g_creq_len;
static volatile sig_atomic_t g_stop;
static double g_deadline;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *m)
{
	fprintf(stderr, "cbench: %s\n", m);
	exit(2);
}

static int parse_addr(const char *s)
{
	char host[256];
	const char *colon = strrchr(s, ':');
	struct sockaddr_in *a4 = (struct sockaddr_in *)&g_addr;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&g_addr;
	size_t hl;

	if (!colon || colon == s)
		return -1;
	hl = (size_t)(colon - s);
	if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
		s++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = 0;
	memset(&g_addr, 0, sizeof(g_addr));
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)atoi(colon + 1));
		g_addrlen = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)atoi(colon + 1));
		g_addrlen = sizeof(*a6);
		return 0;
	}
	return -1;
}

static void conn_start(struct worker *w, struct conn *c);

static void conn_drop(struct conn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0) {
		close(c->fd);   /* also leaves the epoll set */
		c->fd = -1;
	}
	c->st = S_DEAD;
}

/* A finished or failed connection: in load mode, open the next one. */
static void conn_restart(struct worker *w, struct conn *c, int failed)
{
	if (failed)
		w->errors++;
	if (!failed && c->ssl) {
		/* close_notify, like wrk; never waits for the answer */
		SSL_set_quiet_shutdown(c->ssl, 0);
		SSL_shutdown(c->ssl);
	}
	conn_drop(c);
	if (g_idle) {
		if (failed)
			w->dropped++;
		return;
	}
	if (!g_stop && now() < g_deadline)
		conn_start(w, c);
}

static void conn_start(struct worker *w, struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET };
	int one = 1;

	c->w = w;
	c->blen = 0;
	c->req_off = 0;
	c->requests = 0;
	c->fd = socket(g_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		w->errors++;
		w->dropped += g_idle != 0;
		c->st = S_DEAD;
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&g_addr, g_addrlen) < 0 && errno != EINPROGRESS) {
		conn_drop(c);
		w->errors++;
		w->dropped += g_idle != 0;
		return;
	}
	c->st = S_CONNECTING;
	ev.data.ptr = c;
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
		conn_drop(c);
		w->errors++;
		w->dropped += g_idle != 0;
		return;
	}
	w->connects++;
}

/* The response head is in c->buf: status and Content-Length. */
static int parse_head(struct conn *c, size_t head_len)
{
	const char *p = c->buf, *end = c->buf + head_len;
	long cl = -1;

	if (head_len < 12 || memcmp(p, "HTTP/1.", 7))
		return -1;
	c->status = atoi(p + 9);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			break;
		if ((size_t)(nl - p) > 15 && !strncasecmp(p, "content-length:", 15))
			cl = strtol(p + 15, NULL, 10);
		p = nl + 1;
	}
	if (cl < 0)
		return -1;
	c->body_left = cl;
	return 0;
}

static void start_request(struct conn *c)
{
	c->st = S_SEND;
	c->blen = 0;
	c->body_left = -1;
}

/* Move the connection as far as it goes; returns when it would block. */
static void drive(struct worker *w, struct conn *c)
{
	for (;;) {
		switch (c->st) {
		case S_CONNECTING: {
			int err = 0;
			socklen_t el = sizeof(err);

			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
			if (err) {
				conn_restart(w, c, 1);
				return;
			}
			/* not yet connected: EPOLLOUT comes later (ET) */
			{
				struct sockaddr_storage ss;
				socklen_t sl = sizeof(ss);

				if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) < 0)
					return;
			}
			c->st = g_connect ? S_PROXY_SEND : S_TLS;
			break;
		}
		case S_PROXY_SEND: {
			ssize_t n = send(c->fd, g_creq + c->req_off, g_creq_len - c->req_off,
					 MSG_NOSIGNAL);

			if (n < 0) {
				if (errno == EAGAIN)
					return;
				conn_restart(w, c, 1);
				return;
			}
			c->req_off += (size_t)n;
			if (c->req_off == g_creq_len) {
				c->st = S_PROXY_RECV;
				c->blen = 0;
			}
			break;
		}
		case S_PROXY_RECV: {
			/* Read only up to the end of the answer head: the bytes
			 * after it belong to TLS. One byte at a time would be slow;
			 * peek, then consume exactly the head. */
			ssize_t n = recv(c->fd, c->buf, sizeof(c->buf) - 1, MSG_PEEK);
			char *e;

			if (n < 0 && errno == EAGAIN)
				return;
			if (n <= 0) {
				conn_restart(w, c, 1);
				return;
			}
			c->buf[n] = 0;
			e = memmem(c->buf, (size_t)n, "\r\n\r\n", 4);
			if (!e) {
				if ((size_t)n >= sizeof(c->buf) - 1) {
					conn_restart(w, c, 1);
					return;
				}
				/* wait for more (edge-triggered: more data = new edge) */
				return;
			}
			if (recv(c->fd, c->buf, (size_t)(e + 4 - c->buf), 0) != e + 4 - c->buf ||
			    strncmp(c->buf, "HTTP/1.", 7) || atoi(c->buf + 9) != 200) {
				conn_restart(w, c, 1);
				return;
			}
			c->st = S_TLS;
			break;
		}
		case S_TLS: {
			int r;

			if (!c->ssl) {
				c->ssl = SSL_new(g_ctx);
				if (!c->ssl) {
					conn_restart(w, c, 1);
					return;
				}
				SSL_set_fd(c->ssl, c->fd);
				SSL_set_tlsext_host_name(c->ssl, g_sni);
				SSL_set_connect_state(c->ssl);
			}
			r = SSL_do_handshake(c->ssl);
			if (r == 1) {
				start_request(c);
				break;
			}
			r = SSL_get_error(c->ssl, r);
			if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE)
				return;
			ERR_clear_error();
			conn_restart(w, c, 1);
			return;
		}
		case S_SEND: {
			int r = SSL_write(c->ssl, g_req, (int)g_req_len);

			if (r <= 0) {
				r = SSL_get_error(c->ssl, r);
				if (r == SSL_ERROR_WANT_READ || r == SSL_ERROR_WANT_WRITE)
					return;
				ERR_clear_error();
				conn_restart(w, c, 1);
				return;
			}
			c->st = S_RECV;
			break;
		}
		case S_RECV: {
			char tmp[16384];
			int r;

			if (c->body_left < 0) {
				r = SSL_read(c->ssl, c->buf + c->blen, (int)(sizeof(c->buf) - 1 - c->blen));
			} else {
				r = SSL_read(c->ssl, tmp, (int)(c->body_left < (long)sizeof(tmp) ?
								 c->body_left : (long)sizeof(tmp)));
			}
			if (r <= 0) {
				int e = SSL_get_error(c->ssl, r);

				if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
					return;
				ERR_clear_error();
				/* A keep-alive connection the server closed between
				 * requests is reopened, not an error. */
				conn_restart(w, c, !(c->requests > 0 && c->blen == 0 &&
						     c->body_left < 0));
				return;
			}
			if (c->body_left < 0) {
				char *e;

				c->blen += (size_t)r;
				c->buf[c->blen] = 0;
				e = memmem(c->buf, c->blen, "\r\n\r\n", 4);
				if (!e) {
					if (c->blen >= sizeof(c->buf) - 1) {
						conn_restart(w, c, 1);
						return;
					}
					break;
				}
				if (parse_head(c, (size_t)(e + 4 - c->buf)) < 0) {
					conn_restart(w, c, 1);
					return;
				}
				c->body_left -= (long)(c->blen - (size_t)(e + 4 - c->buf));
			} else {
				c->body_left -= r;
			}
			if (c->body_left < 0) {
				conn_restart(w, c, 1);  /* more than announced */
				return;
			}
			if (c->body_left == 0) {
				if (c->status != 200) {
					conn_restart(w, c, 1);
					return;
				}
				c->requests++;
				if (g_idle) {
					c->st = S_IDLE;
					w->ready++;
					return;
				}
				if (now() < g_deadline)
					w->requests++;
				if (g_keepalive && !g_stop && now() < g_deadline) {
					start_request(c);
					break;
				}
				conn_restart(w, c, 0);
				return;
			}
			break;
		}
		case S_IDLE: {
			/* Anything but silence means the far end gave up on us. */
			char b[256];
			ssize_t n = recv(c->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

			if (n < 0 && errno == EAGAIN)
				return;
			if (n > 0)
				return;         /* e.g. a late TLS record; still open */
			w->ready--;
			conn_restart(w, c, 1);
			return;
		}
		case S_DEAD:
			return;
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[256];
	int i;

	if (!g_idle)
		for (i = 0; i < w->nconns; i++)
			conn_start(w, &w->conns[i]);
	while (!g_stop) {
		double t = now();
		int n;

		if (!g_idle && t >= g_deadline)
			break;
		if (g_idle) {
			/* keep at most g_conns handshakes in flight */
			int busy = w->opened - w->ready - w->dropped;

			while (w->opened < w->target && busy < g_conns) {
				conn_start(w, &w->conns[w->opened++]);
				busy++;
			}
			if (w->opened == w->target && busy == 0)
				break;
		}
		n = epoll_wait(w->ep, evs, 256, 20);
		for (i = 0; i < n; i++)
			drive(w, evs[i].data.ptr);
	}
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: cbench -a IP:PORT -s NAME [-C HOST:PORT] [-u PATH] [-k] "
		"[-c N] [-t N] [-d SEC] [-i N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct worker *ws;
	int opt, i;
	double t0, t1;
	uint64_t req = 0, con = 0, err = 0;

	while ((opt = getopt(argc, argv, "a:C:s:u:kc:t:d:i:")) != -1) {
		switch (opt) {
		case 'a': if (parse_addr(optarg) < 0) die("bad -a"); break;
		case 'C': g_connect = optarg; break;
		case 's': g_sni = optarg; break;
		case 'u': g_path = optarg; break;
		case 'k': g_keepalive = 1; break;
		case 'c': g_conns = atoi(optarg); break;
		case 't': g_threads = atoi(optarg); break;
		case 'd': g_secs = atof(optarg); break;
		case 'i': g_idle = atoi(optarg); break;
		default: usage();
		}
	}
	if (!g_addrlen || !g_sni || g_conns < 1 || g_threads < 1)
		usage();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);

	g_ctx = SSL_CTX_new(TLS_client_method());
	if (!g_ctx)
		die("SSL_CTX_new");
	SSL_CTX_set_min_proto_version(g_ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(g_ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_session_cache_mode(g_ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(g_ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_mode(g_ctx, SSL_MODE_RELEASE_BUFFERS);

	/* Host carries the port unless it is 443 (RFC 9110 7.2), as curl and
	 * wrk send it: an intercepting proxy routes the request by it. The
	 * port is the CONNECT target's, or the one dialled. */
	{
		const char *pc = g_connect ? strrchr(g_connect, ':') : NULL;
		int port = pc ? atoi(pc + 1) : ntohs(g_addr.ss_family == AF_INET6 ?
			((struct sockaddr_in6 *)&g_addr)->sin6_port :
			((struct sockaddr_in *)&g_addr)->sin_port);
		char host[300];

		if (port == 443)
			snprintf(host, sizeof(host), "%s", g_sni);
		else
			snprintf(host, sizeof(host), "%s:%d", g_sni, port);
		g_req_len = (size_t)snprintf(g_req, sizeof(g_req),
					     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: cbench\r\n%s\r\n",
					     g_path, host,
					     g_keepalive || g_idle ? "" : "Connection: close\r\n");
	}
	if (g_connect)
		g_creq_len = (size_t)snprintf(g_creq, sizeof(g_creq),
					      "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
					      g_connect, g_connect);

	if (g_idle) {
		/* one thread: simple and enough for setup */
		g_threads = 1;
	}
	ws = calloc((size_t)g_threads, sizeof(*ws));
	for (i = 0; i < g_threads; i++) {
		struct worker *w = &ws[i];
		int n = g_idle ? g_idle : g_conns / g_threads + (i < g_conns % g_threads);

		w->ep = epoll_create1(EPOLL_CLOEXEC);
		w->nconns = n;
		w->target = g_idle;
		w->conns = calloc((size_t)n, sizeof(*w->conns));
		for (int j = 0; j < n; j++) {
			w->conns[j].fd = -1;
			w->conns[j].st = S_DEAD;
		}
	}
	t0 = now();
	g_deadline = t0 + (g_idle ? 60 : g_secs);
	for (i = 0; i < g_threads; i++)
		pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
	for (i = 0; i < g_threads; i++)
		pthread_join(ws[i].th, NULL);
	t1 = now();

	if (g_idle) {
		struct worker *w = &ws[0];
		struct epoll_event evs[64];

		printf("ready %d\n", w->ready);
		fflush(stdout);
		/* Hold: watch for drops until SIGTERM, or until stdin closes
		 * when stdin is a pipe. */
		{
			struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = NULL };
			struct stat st;

			if (fstat(0, &st) == 0 && S_ISFIFO(st.st_mode))
				epoll_ctl(w->ep, EPOLL_CTL_ADD, 0, &ev);
		}
		while (!g_stop) {
			int n = epoll_wait(w->ep, evs, 64, 200);
			int quit = 0;

			for (i = 0; i < n; i++) {
				if (!evs[i].data.ptr) {
					char b[64];

					if (read(0, b, sizeof(b)) <= 0)
						quit = 1;
					continue;
				}
				drive(w, evs[i].data.ptr);
			}
			if (quit)
				break;
		}
		printf("held %d dropped %d\n", w->ready, w->dropped);
		return 0;
	}
	for (i = 0; i < g_threads; i++) {
		req += ws[i].requests;
		con += ws[i].connects;
		err += ws[i].errors;
	}
	{
		double secs = g_secs < t1 - t0 ? g_secs : t1 - t0;

		printf("requests=%llu connects=%llu errors=%llu seconds=%.3f rps=%.1f\n",
		       (unsigned long long)req, (unsigned long long)con,
		       (unsigned long long)err, secs, (double)req / secs);
	}
	return 0;
}
