/*
 * aud_syslog.c - the RFC 5424 sender thread (contract in aud_syslog.h).
 *
 * The queue is a list of copies bounded by AUD_SYSLOG_QUEUE_MAX; the
 * sender takes the head, delivers it, and only then unlinks it, so a TCP
 * message that did not go out is retried after a reconnect. Blocking
 * calls (getaddrinfo, connect, send) happen only on this thread, each
 * bounded by a poll() timeout so that close() is never held up for long.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_log.h"
#include "sg_str.h"
#include "audit/aud_chain.h"
#include "audit/aud_syslog.h"
#include "sg_poison.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000
#define IO_TIMEOUT_MS 2000
#define FLUSH_ON_CLOSE_MS 1000

struct smsg {
	struct smsg *next;
	size_t len;
	char rec[];
};

struct aud_syslog {
	int tcp;
	char host[256];
	char port[8];
	char hostname[256];     /* ours, for the header */
	int pid;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct smsg *head, *tail;       /* owned, under mu */
	size_t qn;
	int stop;
	int64_t stop_deadline;
	atomic_uint_fast64_t sent, dropped;
	/* the sender thread's own */
	int fd;
	int backoff_ms;
	int64_t next_try;
	int down_logged;
	char buf[AUD_LINE_MAX + 600];
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int aud_syslog_url_parse(const char *url, int *tcp, char *host, size_t hostsz,
			 int *port)
{
	const char *hp;

	if (!strncmp(url, "udp://", 6))
		*tcp = 0;
	else if (!strncmp(url, "tcp://", 6))
		*tcp = 1;
	else
		return SG_EINVAL;
	hp = url + 6;
	if (sg_hostport_split(hp, strlen(hp), host, hostsz, -1, port) < 0 ||
	    !*host || *port < 1 || *port > 65535)
		return SG_EINVAL;
	return 0;
}

/* ------------------------------------------------------------- network */

static void peer_down(struct aud_syslog *s, const char *what, int e)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	if (!s->down_logged) {
		/* Once per outage: a dead peer must not flood the log either. */
		sg_warn("audit: syslog %s:%s: %s: %s; records are queued (up to %d) "
			"and dropped past that", s->host, s->port, what, strerror(e),
			AUD_SYSLOG_QUEUE_MAX);
		s->down_logged = 1;
	}
	s->next_try = mono_ms() + s->backoff_ms;
	s->backoff_ms = SG_MIN(s->backoff_ms * 2, BACKOFF_MAX_MS);
}

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int rc;

	do
		rc = poll(&p, 1, ms);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		errno = ETIMEDOUT;
	return rc > 0 && !(p.revents & (POLLERR | POLLNVAL)) ? 0 : -1;
}

static int peer_connect(struct aud_syslog *s)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC }, *res = NULL, *ai;
	int fd = -1, e = EHOSTUNREACH, rc;

	hints.ai_socktype = s->tcp ? SOCK_STREAM : SOCK_DGRAM;
	rc = getaddrinfo(s->host, s->port, &hints, &res);
	if (rc) {
		peer_down(s, "resolve", rc == EAI_SYSTEM ? errno : EHOSTUNREACH);
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		socklen_t sl = sizeof(e);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			e = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		if (e == EINPROGRESS && wait_fd(fd, POLLOUT, IO_TIMEOUT_MS) == 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) == 0 && e == 0)
			break;
		if (e == EINPROGRESS)
			e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		peer_down(s, "connect", e);
		return -1;
	}
	s->fd = fd;
	if (s->down_logged)
		sg_info("audit: syslog %s:%s: connected", s->host, s->port);
	s->down_logged = 0;
	s->backoff_ms = BACKOFF_MIN_MS;
	return 0;
}

/* RFC 5424 6.2.1: PRI = facility * 8 + severity. */
static int severity(const char *rec, size_t len)
{
	if (memmem(rec, len, "\"event\":\"secret_violation\"", 26))
		return 4;
	if (memmem(rec, len, "\"decision\":\"deny\"", 17))
		return 5;
	return 6;
}

/* The record's ts is already RFC 3339 UTC with 6 fractional digits, which
 * RFC 5424 6.2.3 allows (TIME-SECFRAC of 1 to 6 digits). */
static size_t format(struct aud_syslog *s, const char *rec, size_t len)
{
	char ts[40] = "-";
	const char *t = memmem(rec, SG_MIN(len, (size_t)80), "\"ts\":\"", 6), *te;
	size_t hl, off;
	int n;

	if (t) {
		t += 6;
		te = memchr(t, '"', (size_t)(rec + len - t));
		if (te && (size_t)(te - t) < sizeof(ts)) {
			memcpy(ts, t, (size_t)(te - t));
			ts[te - t] = '\0';
		}
	}
	/* Leave room in front for the TCP frame length ("NNNN "). */
	off = 12;
	n = snprintf(s->buf + off, sizeof(s->buf) - off, "<%d>1 %s %s sandgate %d - - ",
		     AUD_SYSLOG_FACILITY * 8 + severity(rec, len), ts, s->hostname, s->pid);
	hl = (size_t)n;
	if (off + hl + len > sizeof(s->buf))
		len = sizeof(s->buf) - off - hl;        /* cannot happen: AUD_LINE_MAX */
	memcpy(s->buf + off + hl, rec, len);
	return hl + len;
}

/* 0 delivered (or given up: dropped), 1 try again later. */
static int deliver(struct aud_syslog *s, const char *rec, size_t len)
{
	size_t n = format(s, rec, len), done = 0;
	char *p = s->buf + 12;
	char peek;

	if (s->fd < 0) {
		if (mono_ms() < s->next_try || peer_connect(s) < 0)
			return 1;
	}
	if (!s->tcp) {
		if (send(s->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* An earlier datagram's ICMP error, or a full buffer:
			 * UDP has no retry, the record is gone from this copy. */
			atomic_fetch_add(&s->dropped, 1);
			return 0;
		}
		atomic_fetch_add(&s->sent, 1);
		return 0;
	}
	/* A peer that went away shows as EOF before our send would: better
	 * to notice now than to write into a dead connection. */
	if (recv(s->fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
		peer_down(s, "connection closed", ECONNRESET);
		return 1;
	}
	/* RFC 6587 3.4.1: MSG-LEN SP SYSLOG-MSG */
	{
		char pre[12];
		int pl = snprintf(pre, sizeof(pre), "%zu ", n);

		p -= pl;
		memcpy(p, pre, (size_t)pl);
		n += (size_t)pl;
	}
	while (done < n) {
		ssize_t w = send(s->fd, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w > 0) {
			done += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
		    wait_fd(s->fd, POLLOUT, IO_TIMEOUT_MS) == 0)
			continue;
		peer_down(s, "send", errno);
		return 1;
	}
	atomic_fetch_add(&s->sent, 1);
	return 0;
}

/* --------------------------------------------------------------- thread */

static void *sender_main(void *arg)
{
	struct aud_syslog *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct smsg *m;
		int rc;

		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->head || (s->stop && mono_ms() >= s->stop_deadline))
			break;
		m = s->head;
		pthread_mutex_unlock(&s->mu);
		rc = deliver(s, m->rec, m->len);
		pthread_mutex_lock(&s->mu);
		if (rc == 0) {
			s->head = m->next;
			if (!s->head)
				s->tail = NULL;
			s->qn--;
			free(m);
			continue;
		}
		/* Peer down while stopping: what is left is dropped below
		 * (retrying until the deadline would only spin). */
		if (s->stop)
			break;
		/* Peer down: sleep until the next attempt. */
		while (!s->stop) {
			struct timespec dl;
			int64_t left = s->next_try - mono_ms();

			if (left <= 0)
				break;
			clock_gettime(CLOCK_REALTIME, &dl);
			dl.tv_sec += left / 1000;
			dl.tv_nsec += (left % 1000) * 1000000L;
			if (dl.tv_nsec >= 1000000000L) {
				dl.tv_sec++;
				dl.tv_nsec -= 1000000000L;
			}
			if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT)
				break;
		}
	}
	/* Whatever is left could not be delivered in time. */
	while (s->head) {
		struct smsg *m = s->head;

		s->head = m->next;
		free(m);
		atomic_fetch_add(&s->dropped, 1);
	}
	s->tail = NULL;
	s->qn = 0;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

struct aud_syslog *aud_syslog_open(const char *url, char *err, size_t errsz)
{
	struct aud_syslog *s = calloc(1, sizeof(*s));
	int port;

	if (!s) {
		snprintf(err, errsz, "audit: out of memory");
		return NULL;
	}
	if (aud_syslog_url_parse(url, &s->tcp, s->host, sizeof(s->host), &port) < 0) {
		snprintf(err, errsz, "audit.syslog \"%s\": expected udp://HOST:PORT or "
			 "tcp://HOST:PORT", url);
		free(s);
		return NULL;
	}
	snprintf(s->port, sizeof(s->port), "%d", port);
	/* RFC 5424 6.2.4: HOSTNAME is printable US-ASCII, NILVALUE if unknown */
	if (gethostname(s->hostname, sizeof(s->hostname) - 1) < 0 || !s->hostname[0])
		snprintf(s->hostname, sizeof(s->hostname), "-");
	for (char *h = s->hostname; *h; h++)
		if (*h <= ' ' || *h > '~')
			*h = '_';
	s->pid = (int)getpid();
	s->fd = -1;
	s->backoff_ms = BACKOFF_MIN_MS;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->thread, NULL, sender_main, s)) {
		snprintf(err, errsz, "audit: cannot start the syslog sender thread");
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		free(s);
		return NULL;
	}
	return s;
}

void aud_syslog_close(struct aud_syslog *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	s->stop_deadline = mono_ms() + FLUSH_ON_CLOSE_MS;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	if (s->fd >= 0)
		close(s->fd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

void aud_syslog_send(struct aud_syslog *s, const char *rec, size_t len)
{
	struct smsg *m;

	if (!s)
		return;
	m = malloc(sizeof(*m) + len);
	if (!m) {
		atomic_fetch_add(&s->dropped, 1);
		return;
	}
	m->next = NULL;
	m->len = len;
	memcpy(m->rec, rec, len);
	pthread_mutex_lock(&s->mu);
	if (s->qn >= AUD_SYSLOG_QUEUE_MAX || s->stop) {
		pthread_mutex_unlock(&s->mu);
		free(m);
		atomic_fetch_add(&s->dropped, 1);
		return;
	}
	if (s->tail)
		s->tail->next = m;
	else
		s->head = m;
	s->tail = m;
	s->qn++;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

uint64_t aud_syslog_sent(const struct aud_syslog *s)
{
	return s ? atomic_load(&s->sent) : 0;
}

uint64_t aud_syslog_dropped(const struct aud_syslog *s)
{
	return s ? atomic_load(&s->dropped) : 0;
}
