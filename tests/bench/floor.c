/*
 * floor - the least a user-space TCP relay can do, as a reference row.
 *
 * It accepts on IP:PORT, connects each client to one fixed upstream and
 * moves bytes both ways: no peek, no policy, no resolver, no audit, no
 * timers, no limits. Small reads are copied (recv into a 16 KiB buffer,
 * send at once); a read that fills the buffer switches that direction to
 * splice(2) through a pipe until the socket is drained, as sandgate's relay
 * does. Whatever a relay costs beyond this is its own overhead; what this
 * costs is the kernel's price for one more TCP hop on this machine.
 *
 * It is a measuring tool for tests/bench/run (the "floor" row), not a
 * proxy: it trusts its peers, never times out and keeps going on errors by
 * closing the pair.
 *
 *   floor LISTEN_IP:PORT UPSTREAM_IP:PORT
 *
 * Build: cc -O2 -o floor floor.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 16384
#define PIPE_CAP 65536

struct dir {
	int src, dst;
	int p[2];               /* -1 until a pipe is needed */
	size_t in_pipe;
	int rd, wr;             /* edge-triggered readiness, cleared on EAGAIN */
	int hup;                /* the source reported EOF: read until it shows */
	int eof, shut, bulk;
};

struct pair {
	int fd[2];              /* client, upstream */
	struct dir d[2];        /* c->u, u->c */
	int connected;
	int dead;
};

struct ref {                    /* epoll data: which pair, which side */
	struct pair *p;
	int side;
};

static char buf[BUF];

static int parse(const char *s, struct sockaddr_in *a)
{
	char host[64];
	const char *c = strrchr(s, ':');

	if (!c || (size_t)(c - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(c - s));
	host[c - s] = 0;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(c + 1));
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void pair_free(struct pair *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		close(p->fd[i]);
		if (p->d[i].p[0] >= 0) {
			close(p->d[i].p[0]);
			close(p->d[i].p[1]);
		}
	}
}

/* Move what can move in one direction. -1: the pair is broken. */
static int pump(struct dir *d)
{
	for (;;) {
		int moved = 0;

		if (!d->eof && d->rd && d->wr && !d->bulk && d->in_pipe == 0) {
			ssize_t n = recv(d->src, buf, BUF, MSG_DONTWAIT), m;

			if (n == 0) {
				d->eof = 1;
			} else if (n < 0) {
				if (errno != EAGAIN)
					return -1;
				d->rd = 0;
			} else {
				m = send(d->dst, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
				if (m < 0 && errno != EAGAIN)
					return -1;
				if (m < 0)
					m = 0;
				if (m < n) {
					d->wr = 0;
					if (d->p[0] < 0 && pipe2(d->p, O_NONBLOCK) < 0)
						return -1;
					if (write(d->p[1], buf + m, (size_t)(n - m)) != n - m)
						return -1;
					d->in_pipe += (size_t)(n - m);
				}
				if (n == BUF)
					d->bulk = 1;
				else if (!d->hup)
					d->rd = 0;      /* short read: drained */
				moved = 1;
			}
		}
		if (!d->eof && d->rd && d->in_pipe < PIPE_CAP && (d->bulk || d->in_pipe)) {
			ssize_t n;

			if (d->p[0] < 0 && pipe2(d->p, O_NONBLOCK) < 0)
				return -1;
			n = splice(d->src, NULL, d->p[1], NULL, PIPE_CAP - d->in_pipe,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				d->in_pipe += (size_t)n;
				moved = 1;
			} else if (n == 0) {
				d->eof = 1;
				moved = 1;
			} else if (errno == EAGAIN) {
				d->rd = 0;
				if (d->in_pipe == 0)
					d->bulk = 0;
			} else {
				return -1;
			}
		}
		if (d->in_pipe && d->wr) {
			ssize_t n = splice(d->p[0], NULL, d->dst, NULL, d->in_pipe,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

			if (n > 0) {
				d->in_pipe -= (size_t)n;
				moved = 1;
			} else if (errno == EAGAIN) {
				d->wr = 0;
			} else {
				return -1;
			}
		}
		if (!moved)
			break;
	}
	if (d->eof && d->in_pipe == 0 && !d->shut) {
		d->shut = 1;
		shutdown(d->dst, SHUT_WR);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in la, ua;
	struct epoll_event evs[256];
	struct ref lref = { NULL, -1 };
	struct pair *dead[256];
	int lfd, ep, one = 1;

	if (argc != 3 || parse(argv[1], &la) < 0 || parse(argv[2], &ua) < 0) {
		fprintf(stderr, "usage: floor LISTEN_IP:PORT UPSTREAM_IP:PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&la, sizeof(la)) < 0 || listen(lfd, 4096) < 0) {
		perror("floor: listen");
		return 1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &lref };

		epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	}
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1), i, nd = 0;

		for (i = 0; i < n; i++) {
			struct ref *r = evs[i].data.ptr;
			struct pair *p;
			uint32_t e = evs[i].events;

			if (r == &lref) {
				for (;;) {
					int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), s;
					struct ref *rr;

					if (cfd < 0)
						break;
					p = calloc(1, sizeof(*p) + 2 * sizeof(struct ref));
					rr = (struct ref *)(p + 1);
					p->fd[0] = cfd;
					p->fd[1] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
					setsockopt(p->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					connect(p->fd[1], (struct sockaddr *)&ua, sizeof(ua));
					for (s = 0; s < 2; s++) {
						struct epoll_event ev = {
							.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
							.data.ptr = &rr[s] };

						rr[s].p = p;
						rr[s].side = s;
						p->d[s].src = p->fd[s];
						p->d[s].dst = p->fd[!s];
						p->d[s].p[0] = p->d[s].p[1] = -1;
						epoll_ctl(ep, EPOLL_CTL_ADD, p->fd[s], &ev);
					}
				}
				continue;
			}
			p = r->p;
			if (p->dead)
				continue;
			if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				p->d[r->side].rd = 1;
			if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				p->d[r->side].hup = 1;
			if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
				p->d[!r->side].wr = 1;
			if (pump(&p->d[0]) < 0 || pump(&p->d[1]) < 0 ||
			    (p->d[0].shut && p->d[1].shut)) {
				p->dead = 1;
				dead[nd++] = p;
			}
		}
		/* Freed after the batch: a later event may still name the pair. */
		for (i = 0; i < nd; i++) {
			pair_free(dead[i]);
			free(dead[i]);
		}
	}
}
