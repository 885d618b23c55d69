/*
 * dns_bench.c - a bounded UDP DNS load client (dnsperf-like) for the DNS
 * responder: S sockets (each its own source port, so SO_REUSEPORT spreads
 * them over the gateway's workers), W queries in flight on each, for D
 * seconds; answers per second, latency percentiles and rcodes.
 *
 *   dns_bench -p PORT [-s 127.0.0.1] [-d SECONDS] [-S SOCKETS] [-w INFLIGHT]
 *             [-t THREADS] [-T A|AAAA] -n NAME-PATTERN [-N DISTINCT]
 *
 * NAME-PATTERN may hold one %u, replaced by 0..DISTINCT-1 in turn (e.g.
 * "nx%u.bench.test" for denied names). Bounded: memory is fixed at start
 * (S x 65536 send stamps), a query unanswered for 1 s is counted lost and
 * its slot reused, the run ends at D seconds whatever happens.
 * Prints one line: answered/s, lost, p50/p90/p99 in microseconds, rcodes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define LAT_BUCKETS 200000      /* microseconds, 0..200 ms */
#define LOST_US 1000000

struct sock {
	int fd;
	uint16_t next_id;
	unsigned inflight;
	int64_t *sent;          /* [65536] send time in us, 0: free */
};

struct worker {
	pthread_t th;
	struct sock *socks;
	int n_socks;
	uint64_t answered, lost, rcodes[16];
	uint32_t *lat;          /* histogram, LAT_BUCKETS + 1 */
	unsigned name_seq;
};

static struct sockaddr_in server;
static int64_t deadline_us;
static unsigned inflight_max = 64, distinct = 1;
static uint16_t qtype = 1;
static const char *pattern;

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static size_t build_query(uint8_t *out, uint16_t id, unsigned seq)
{
	char name[256];
	size_t o = 12;
	char *p, *lab;

	snprintf(name, sizeof(name), pattern, seq % distinct);
	memset(out, 0, 12);
	out[0] = (uint8_t)(id >> 8);
	out[1] = (uint8_t)id;
	out[2] = 0x01;          /* RD */
	out[5] = 1;             /* QDCOUNT */
	for (lab = name; lab && *lab; lab = p ? p + 1 : NULL) {
		size_t n;

		p = strchr(lab, '.');
		n = p ? (size_t)(p - lab) : strlen(lab);
		out[o++] = (uint8_t)n;
		memcpy(out + o, lab, n);
		o += n;
	}
	out[o++] = 0;
	out[o++] = (uint8_t)(qtype >> 8);
	out[o++] = (uint8_t)qtype;
	out[o++] = 0;
	out[o++] = 1;
	return o;
}

static void fill(struct worker *w, struct sock *s)
{
	static __thread uint8_t bufs[BATCH][300];
	struct mmsghdr msg[BATCH];
	struct iovec iov[BATCH];
	int64_t t = now_us();
	unsigned n = 0, i;

	while (s->inflight + n < inflight_max && n < BATCH) {
		uint16_t id = s->next_id++;

		if (s->sent[id])
			continue;       /* still out: skip this id */
		s->sent[id] = t;
		iov[n].iov_base = bufs[n];
		iov[n].iov_len = build_query(bufs[n], id, w->name_seq++);
		memset(&msg[n], 0, sizeof(msg[n]));
		msg[n].msg_hdr.msg_name = &server;
		msg[n].msg_hdr.msg_namelen = sizeof(server);
		msg[n].msg_hdr.msg_iov = &iov[n];
		msg[n].msg_hdr.msg_iovlen = 1;
		n++;
	}
	if (!n)
		return;
	{
		int k = sendmmsg(s->fd, msg, n, MSG_DONTWAIT);

		if (k < 0)
			k = 0;
		/* what was not sent is freed again */
		for (i = (unsigned)k; i < n; i++) {
			uint16_t id = (uint16_t)(bufs[i][0] << 8 | bufs[i][1]);

			s->sent[id] = 0;
		}
		s->inflight += (unsigned)k;
	}
}

static void drain(struct worker *w, struct sock *s)
{
	static __thread uint8_t bufs[BATCH][1500];
	struct mmsghdr msg[BATCH];
	struct iovec iov[BATCH];
	int n, i;

	for (;;) {
		for (i = 0; i < BATCH; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = sizeof(bufs[i]);
			memset(&msg[i], 0, sizeof(msg[i]));
			msg[i].msg_hdr.msg_iov = &iov[i];
			msg[i].msg_hdr.msg_iovlen = 1;
		}
		n = recvmmsg(s->fd, msg, BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		{
			int64_t t = now_us();

			for (i = 0; i < n; i++) {
				uint16_t id;
				int64_t us;

				if (msg[i].msg_len < 12)
					continue;
				id = (uint16_t)(bufs[i][0] << 8 | bufs[i][1]);
				if (!s->sent[id])
					continue;       /* late: already counted lost */
				us = t - s->sent[id];
				s->sent[id] = 0;
				s->inflight--;
				w->answered++;
				w->rcodes[bufs[i][3] & 0xf]++;
				w->lat[us < LAT_BUCKETS ? us : LAT_BUCKETS]++;
			}
		}
		if (n < BATCH)
			return;
	}
}

static void reap(struct sock *s, struct worker *w, int64_t t)
{
	unsigned id;

	for (id = 0; id < 65536; id++)
		if (s->sent[id] && t - s->sent[id] > LOST_US) {
			s->sent[id] = 0;
			s->inflight--;
			w->lost++;
		}
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct pollfd *pf = calloc((size_t)w->n_socks, sizeof(*pf));
	int64_t next_reap = now_us() + 250000;
	int i;

	if (!pf)
		return NULL;
	for (i = 0; i < w->n_socks; i++) {
		pf[i].fd = w->socks[i].fd;
		pf[i].events = POLLIN;
	}
	while (now_us() < deadline_us) {
		for (i = 0; i < w->n_socks; i++)
			fill(w, &w->socks[i]);
		if (poll(pf, (nfds_t)w->n_socks, 10) < 0 && errno != EINTR)
			break;
		for (i = 0; i < w->n_socks; i++)
			if (pf[i].revents & POLLIN)
				drain(w, &w->socks[i]);
		if (now_us() >= next_reap) {
			int64_t t = now_us();

			for (i = 0; i < w->n_socks; i++)
				reap(&w->socks[i], w, t);
			next_reap = t + 250000;
		}
	}
	free(pf);
	return NULL;
}

static unsigned pct(const uint32_t *h, uint64_t total, double p)
{
	uint64_t want = (uint64_t)(p * (double)total), acc = 0;
	unsigned i;

	for (i = 0; i <= LAT_BUCKETS; i++) {
		acc += h[i];
		if (acc > want)
			return i;
	}
	return LAT_BUCKETS;
}

int main(int argc, char **argv)
{
	static const char *rc[16] = { "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",
				      "REFUSED" };
	const char *host = "127.0.0.1";
	int port = 0, secs = 5, n_socks = 8, n_threads = 1, opt, i, j;
	struct worker *ws;
	uint64_t answered = 0, lost = 0, rcodes[16] = { 0 };
	uint32_t *lat;
	int64_t start;

	while ((opt = getopt(argc, argv, "s:p:d:S:w:t:T:n:N:")) != -1) {
		switch (opt) {
		case 's': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'd': secs = atoi(optarg); break;
		case 'S': n_socks = atoi(optarg); break;
		case 'w': inflight_max = (unsigned)atoi(optarg); break;
		case 't': n_threads = atoi(optarg); break;
		case 'T': qtype = !strcmp(optarg, "AAAA") ? 28 : 1; break;
		case 'n': pattern = optarg; break;
		case 'N': distinct = (unsigned)atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!port || !pattern || secs < 1 || secs > 600 || n_socks < 1 || n_socks > 1024 ||
	    inflight_max < 1 || inflight_max > 4096 || n_threads < 1 || n_threads > 64 ||
	    n_threads > n_socks || distinct < 1)
		goto usage;
	memset(&server, 0, sizeof(server));
	server.sin_family = AF_INET;
	server.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &server.sin_addr) != 1)
		goto usage;
	ws = calloc((size_t)n_threads, sizeof(*ws));
	lat = calloc(LAT_BUCKETS + 1, sizeof(*lat));
	if (!ws || !lat)
		return 1;
	for (i = 0; i < n_threads; i++) {
		struct worker *w = &ws[i];

		w->n_socks = n_socks / n_threads + (i < n_socks % n_threads);
		w->socks = calloc((size_t)w->n_socks, sizeof(*w->socks));
		w->lat = calloc(LAT_BUCKETS + 1, sizeof(*w->lat));
		w->name_seq = (unsigned)i * 7919u;
		if (!w->socks || !w->lat)
			return 1;
		for (j = 0; j < w->n_socks; j++) {
			struct sock *s = &w->socks[j];
			int rcvbuf = 4 << 20;

			s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
			s->sent = calloc(65536, sizeof(*s->sent));
			if (s->fd < 0 || !s->sent)
				return 1;
			setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
			s->next_id = (uint16_t)(rand() & 0xffff);
		}
	}
	start = now_us();
	deadline_us = start + (int64_t)secs * 1000000;
	for (i = 0; i < n_threads; i++)
		pthread_create(&ws[i].th, NULL, run, &ws[i]);
	for (i = 0; i < n_threads; i++) {
		pthread_join(ws[i].th, NULL);
		answered += ws[i].answered;
		lost += ws[i].lost;
		for (j = 0; j < 16; j++)
			rcodes[j] += ws[i].rcodes[j];
		for (j = 0; j <= LAT_BUCKETS; j++)
			lat[j] += ws[i].lat[j];
	}
	printf("%.0f answered/s  lost %llu  p50 %u us  p90 %u us  p99 %u us  ",
	       (double)answered / ((double)(now_us() - start) / 1e6), (unsigned long long)lost,
	       pct(lat, answered, 0.5), pct(lat, answered, 0.9), pct(lat, answered, 0.99));
	for (j = 0; j < 16; j++)
		if (rcodes[j])
			printf(" %s %.1f%%", rc[j] ? rc[j] : "other",
			       100.0 * (double)rcodes[j] / (double)answered);
	printf("\n");
	return 0;
usage:
	fprintf(stderr, "usage: dns_bench -p PORT -n NAME-PATTERN [-s IP] [-d SECONDS] "
		"[-S SOCKETS] [-w INFLIGHT] [-t THREADS] [-T A|AAAA] [-N DISTINCT]\n");
	return 2;
}
