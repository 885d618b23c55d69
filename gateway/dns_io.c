/*
 * dns_io.c - the DNS responder's sockets (see dns.h): per worker one
 * SO_REUSEPORT UDP socket read with recvmmsg() and answered with
 * sendmmsg() in batches, one TCP listener and its clients (RFC 7766), and
 * the responder's lifecycle (bind, start, drain, stop, free). dns.c
 * decides what each query gets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "sg.h"
#include "sg_log.h"
#include "gateway/dns_int.h"
#include "sg_poison.h"

/* ------------------------------------------------------------------- UDP */

/* Keep where the datagram came from and which local address it hit. */
static void meta_from_msg(struct dns_udp_meta *m, const struct msghdr *mh)
{
	struct cmsghdr *cm;

	memcpy(&m->peer, mh->msg_name, mh->msg_namelen);
	m->peer_len = mh->msg_namelen;
	m->pi_family = 0;
	for (cm = CMSG_FIRSTHDR((struct msghdr *)mh); cm;
	     cm = CMSG_NXTHDR((struct msghdr *)mh, cm)) {
		if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
			memcpy(&m->pi.v6, CMSG_DATA(cm), sizeof(m->pi.v6));
			m->pi_family = AF_INET6;
		} else if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO) {
			memcpy(&m->pi.v4, CMSG_DATA(cm), sizeof(m->pi.v4));
			m->pi_family = AF_INET;
		}
	}
}

/* The reply leaves from the address the query was sent to. */
static void msg_for(struct msghdr *mh, struct iovec *iov, uint8_t *ctl,
		    const struct dns_udp_meta *m, const uint8_t *p, size_t n)
{
	struct cmsghdr *cm;

	iov->iov_base = (void *)p;
	iov->iov_len = n;
	memset(mh, 0, sizeof(*mh));
	mh->msg_name = (void *)&m->peer;
	mh->msg_namelen = m->peer_len;
	mh->msg_iov = iov;
	mh->msg_iovlen = 1;
	if (!m->pi_family)
		return;
	mh->msg_control = ctl;
	mh->msg_controllen = CTL_SPACE;
	memset(ctl, 0, CTL_SPACE);
	cm = CMSG_FIRSTHDR(mh);
	if (m->pi_family == AF_INET6) {
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(struct in6_pktinfo));
		memcpy(CMSG_DATA(cm), &m->pi.v6, sizeof(m->pi.v6));
		mh->msg_controllen = CMSG_SPACE(sizeof(struct in6_pktinfo));
	} else {
		struct in_pktinfo pi = { .ipi_ifindex = 0, .ipi_spec_dst = m->pi.v4.ipi_addr };

		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
		mh->msg_controllen = CMSG_SPACE(sizeof(pi));
	}
}

void dns_udp_send_one(struct gw_dns_worker *dw, const struct dns_udp_meta *m,
			 const uint8_t *p, size_t n)
{
	struct msghdr mh;
	struct iovec iov;
	uint8_t ctl[CTL_SPACE] __attribute__((aligned(8)));

	if (dw->udp.fd < 0)
		return;
	msg_for(&mh, &iov, ctl, m, p, n);
	/* A full socket buffer drops the answer; the client asks again. */
	if (sendmsg(dw->udp.fd, &mh, MSG_DONTWAIT) < 0 && errno != EAGAIN)
		sg_debug("dns: sendmsg: %s", strerror(errno));
}

/*
 * The socket is level-triggered: read up to DNS_RX_ROUNDS batches, then
 * let the loop serve other events (TCP clients, resolver answers) and come
 * back. Answers decided at once go out in one sendmmsg() per batch; a
 * query that waits for the resolver is answered alone when it can be.
 */
static void udp_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct gw_dns_worker *dw = sg_container_of(io, struct gw_dns_worker, udp);
	int round, i, n, ns;

	SG_UNUSED(l);
	SG_UNUSED(ev);
	for (round = 0; round < DNS_RX_ROUNDS; round++) {
		for (i = 0; i < DNS_BATCH; i++) {
			struct msghdr *mh = &dw->rmsg[i].msg_hdr;

			dw->riov[i].iov_base = dw->rbuf[i];
			dw->riov[i].iov_len = DNS_RBUF;
			mh->msg_name = &dw->rpeer[i];
			mh->msg_namelen = sizeof(dw->rpeer[i]);
			mh->msg_iov = &dw->riov[i];
			mh->msg_iovlen = 1;
			mh->msg_control = dw->rctl[i];
			mh->msg_controllen = CTL_SPACE;
			mh->msg_flags = 0;
		}
		n = recvmmsg(io->fd, dw->rmsg, DNS_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		ns = 0;
		for (i = 0; i < n; i++) {
			struct msghdr *mh = &dw->rmsg[i].msg_hdr;
			struct dns_udp_meta *m = &dw->smeta[ns];
			struct dns_ctx c;
			long len;
			int port;

			atomic_fetch_add_explicit(&dw->udp_queries, 1, memory_order_relaxed);
			meta_from_msg(m, mh);
			port = sg_addr_from_sa((struct sockaddr *)&m->peer, &c.src);
			if (port < 0)
				continue;
			c.src_port = (uint16_t)port;
			c.tcp = 0;
			/* A datagram cut by our buffer is no query we can read:
			 * its header alone gets FORMERR. */
			len = dns_process(dw, &c, dw->rbuf[i],
				      (mh->msg_flags & MSG_TRUNC) ? SG_MIN(dw->rmsg[i].msg_len, 12u) :
				      dw->rmsg[i].msg_len, dw->sbuf[ns], DNS_UDP_MAX);
			if (len == DNS_PEND && dns_pend_start(dw, &c, NULL, m) < 0)
				len = dns_overloaded(dw, &c, dw->sbuf[ns], DNS_UDP_MAX);
			if (len <= 0)
				continue;
			msg_for(&dw->smsg[ns].msg_hdr, &dw->siov[ns], dw->sctl[ns], m,
				dw->sbuf[ns], (size_t)len);
			ns++;
		}
		if (ns > 0 && sendmmsg(io->fd, dw->smsg, (unsigned)ns, MSG_DONTWAIT) < 0 &&
		    errno != EAGAIN)
			sg_debug("dns: sendmmsg: %s", strerror(errno));
		if (n < DNS_BATCH)
			break;
	}
}

/* ------------------------------------------------------------------- TCP */

static void tcp_timer(struct gw_loop *l, struct gw_timer *tm)
{
	struct dns_tcp *t = sg_container_of(tm, struct dns_tcp, timer);

	SG_UNUSED(l);
	/* Waiting for the resolver is not idleness: it has its own timeout. */
	if (t->pend) {
		gw_timer_set(l, tm, cfg_of(t->dw)->dns_tcp_idle_ms);
		return;
	}
	dns_tcp_close(t);
}

void dns_tcp_close(struct dns_tcp *t)
{
	struct gw_dns_worker *dw = t->dw;

	if (t->closed)
		return;
	t->closed = 1;
	if (t->pend) {
		gw_resolve_cancel(dw->w->resolver, &t->pend->rw);
		dns_pend_release(dw, t->pend);
		t->pend = NULL;
	}
	gw_timer_cancel(dw->w->loop, &t->timer);
	gw_io_del(dw->w->loop, &t->io);
	close(t->io.fd);
	*t->pprev = t->next;
	if (t->next)
		t->next->pprev = t->pprev;
	/* Freed before sleep: an event for it may still be in this batch. */
	t->next = dw->tcp_closed;
	dw->tcp_closed = t;
	dw->n_tcp--;
	atomic_store_explicit(&dw->open_tcp, (long)dw->n_tcp, memory_order_relaxed);
}

/* Append one answer, length-prefixed, to what t has to send. */
int dns_tcp_queue(struct dns_tcp *t, const uint8_t *p, size_t n)
{
	if (t->wlen + 2 + n > t->wcap) {
		size_t nc = SG_MAX(t->wcap * 2, t->wlen + 2 + n);
		uint8_t *nb = realloc(t->wbuf, nc);

		if (!nb)
			return SG_ENOMEM;
		t->wbuf = nb;
		t->wcap = nc;
	}
	t->wbuf[t->wlen] = (uint8_t)(n >> 8);
	t->wbuf[t->wlen + 1] = (uint8_t)n;
	memcpy(t->wbuf + t->wlen + 2, p, n);
	t->wlen += 2 + n;
	return 0;
}

/* Send what is queued; 0 ok (maybe partly), -1 the client is gone. */
static int tcp_flush(struct dns_tcp *t)
{
	while (t->woff < t->wlen && t->wr) {
		ssize_t n = send(t->io.fd, t->wbuf + t->woff, t->wlen - t->woff, MSG_NOSIGNAL);

		if (n > 0) {
			t->woff += (size_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			t->wr = 0;
		} else if (n < 0 && errno != EINTR) {
			return -1;
		}
	}
	if (t->woff == t->wlen)
		t->woff = t->wlen = 0;
	return 0;
}

/*
 * Read, answer complete queries in order (RFC 7766 6.2.1: several per
 * connection, pipelined), write. One query at a time waits for the
 * resolver; the ones behind it wait in rbuf, so answers stay in order.
 */
void dns_tcp_run(struct dns_tcp *t)
{
	struct gw_dns_worker *dw = t->dw;

	for (;;) {
		const uint8_t *msg;
		size_t mlen;
		int rc;

		while (t->rd && t->rlen < 2 + DNS_TCP_QMAX) {
			ssize_t n = recv(t->io.fd, t->rbuf + t->rlen, 2 + DNS_TCP_QMAX - t->rlen, 0);

			if (n > 0) {
				t->rlen += (size_t)n;
				gw_timer_set(dw->w->loop, &t->timer, cfg_of(dw)->dns_tcp_idle_ms);
			} else if (n == 0) {
				t->eof = 1;
				t->rd = 0;
			} else if (errno == EAGAIN) {
				t->rd = 0;
			} else if (errno != EINTR) {
				dns_tcp_close(t);
				return;
			}
		}
		if (t->pend || t->wlen >= DNS_TCP_OUTMAX || dw->draining)
			break;
		rc = dns_tcp_frame(t->rbuf, t->rlen, &msg, &mlen);
		if (rc == SG_AGAIN && t->rlen >= 2 && ((size_t)t->rbuf[0] << 8 | t->rbuf[1]) > DNS_TCP_QMAX)
			rc = SG_ERROR;  /* longer than any query we take */
		if (rc == SG_ERROR) {
			dns_tcp_close(t);
			return;
		}
		if (rc == SG_AGAIN)
			break;
		{
			struct dns_ctx c;
			long len;

			c.src = t->src;
			c.src_port = t->src_port;
			c.tcp = 1;
			atomic_fetch_add_explicit(&dw->tcp_queries, 1, memory_order_relaxed);
			len = dns_process(dw, &c, msg, mlen, dw->scratch, DNS_SCRATCH);
			if (len == DNS_PEND && dns_pend_start(dw, &c, t, NULL) < 0)
				len = dns_overloaded(dw, &c, dw->scratch, DNS_SCRATCH);
			memmove(t->rbuf, t->rbuf + 2 + mlen, t->rlen - 2 - mlen);
			t->rlen -= 2 + mlen;
			if (len > 0 && dns_tcp_queue(t, dw->scratch, (size_t)len) < 0) {
				dns_tcp_close(t);
				return;
			}
		}
	}
	if (tcp_flush(t) < 0) {
		dns_tcp_close(t);
		return;
	}
	/* The client closed its side and everything it asked is answered
	 * (what is left in rbuf is not a whole query). */
	if (!t->pend && t->wlen == 0 && (t->eof || dw->draining))
		dns_tcp_close(t);
}

/* Edge-triggered, like connections: the flags remember readiness until
 * a call says EAGAIN, so no epoll_ctl() per query. */
static void tcp_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct dns_tcp *t = sg_container_of(io, struct dns_tcp, io);

	SG_UNUSED(l);
	if (t->closed)
		return;
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		t->rd = 1;
	if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		t->wr = 1;
	dns_tcp_run(t);
}

static void tcp_accept_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct gw_dns_worker *dw = sg_container_of(io, struct gw_dns_worker, tcp);
	int n;

	SG_UNUSED(l);
	SG_UNUSED(ev);
	for (n = 0; n < 64; n++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(io->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct dns_tcp *t;
		struct sg_addr src;
		int p;

		if (fd < 0)
			break;
		if (dw->n_tcp >= DNS_TCP_CONNS || dw->draining) {
			atomic_fetch_add_explicit(&dw->tcp_refused, 1, memory_order_relaxed);
			close(fd);
			continue;
		}
		p = sg_addr_from_sa((struct sockaddr *)&ss, &src);
		t = p < 0 ? NULL : calloc(1, sizeof(*t));
		if (t && !(t->rbuf = malloc(2 + DNS_TCP_QMAX))) {
			free(t);
			t = NULL;
		}
		if (!t) {
			close(fd);
			continue;
		}
		t->dw = dw;
		t->src = src;
		t->src_port = (uint16_t)p;
		gw_timer_init(&t->timer, tcp_timer);
		t->next = dw->tcps;
		if (t->next)
			t->next->pprev = &t->next;
		t->pprev = &dw->tcps;
		dw->tcps = t;
		dw->n_tcp++;
		atomic_store_explicit(&dw->open_tcp, (long)dw->n_tcp, memory_order_relaxed);
		if (gw_io_add(dw->w->loop, &t->io, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
			      tcp_io) < 0) {
			t->io.fd = fd;
			dns_tcp_close(t);
			continue;
		}
		gw_timer_set(dw->w->loop, &t->timer, cfg_of(dw)->dns_tcp_idle_ms);
	}
}

/* Before sleep: nothing in this iteration's events can point at them now. */
static void tcp_free_closed(struct gw_dns_worker *dw)
{
	while (dw->tcp_closed) {
		struct dns_tcp *t = dw->tcp_closed;

		dw->tcp_closed = t->next;
		free(t->rbuf);
		free(t->wbuf);
		free(t);
	}
}

/* ----------------------------------------------------------- lifecycle */

/* The daemon-wide sweep (ended windows and bursts), by whichever worker's
 * tick gets there first each second. */
static void tick(struct gw_loop *l, struct gw_timer *t)
{
	struct gw_dns_worker *dw = sg_container_of(t, struct gw_dns_worker, tick);
	int64_t now = gw_loop_now(l), due = atomic_load(&dw->g->next_sweep);

	if (now >= due && atomic_compare_exchange_strong(&dw->g->next_sweep, &due,
							 now + DNS_TICK_MS))
		dns_limits_sweep(dw->g->limits, now, 0);
	gw_timer_set(l, t, DNS_TICK_MS);
}

static int udp_socket(const char *host, int port, int *bound, char *err, size_t errsz)
{
	struct sockaddr_storage ss;
	struct sg_addr a;
	socklen_t sl;
	int fd, one = 1, zero = 0, rcvbuf = 1 << 20;

	if (sg_addr_parse(host, strlen(host), &a) < 0) {
		snprintf(err, errsz, "listen.dns \"%s\": expected an IP address", host);
		return -1;
	}
	sl = sg_addr_to_sa(&a, (uint16_t)port, &ss);
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errsz, "listen.dns: socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* Room for bursts (a sandbox's resolver sends A and AAAA at once, many
	 * processes at a time); the kernel caps it at net.core.rmem_max. */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (ss.ss_family == AF_INET6) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		/* v4 queries on the dual-stack socket come with a v4-mapped
		 * IPV6_PKTINFO, which sendmsg takes back as their source. */
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
	} else {
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		snprintf(err, errsz, "listen.dns \"%s\" port %d (udp): %s", host, port,
			 strerror(errno));
		close(fd);
		return -1;
	}
	sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*bound = sg_addr_from_sa((struct sockaddr *)&ss, &a);
	return fd;
}

int gw_dns_bind(struct gw_daemon *d, const char *spec, char *err, size_t errsz)
{
	char host[INET6_ADDRSTRLEN + 2], tspec[INET6_ADDRSTRLEN + 16];
	const char *colon = strrchr(spec, ':');
	size_t hl;
	int i, port, try, bound = -1;
	struct gw_dns *g;

	if (!colon || (hl = (size_t)(colon - spec)) == 0 || hl >= sizeof(host)) {
		snprintf(err, errsz, "listen.dns \"%s\": expected HOST:PORT", spec);
		return -1;
	}
	memcpy(host, spec, hl);
	host[hl] = '\0';
	port = atoi(colon + 1);
	g = calloc(1, sizeof(*g));
	if (!g || !(g->learn = dns_learn_new()) || !(g->limits = dns_limits_new(dns_audit, g))) {
		if (g)
			dns_learn_free(g->learn);
		free(g);
		snprintf(err, errsz, "listen.dns: out of memory");
		return -1;
	}
	g->d = d;
	d->dns = g;
	for (i = 0; i < d->n_workers; i++) {
		struct gw_dns_worker *dw = calloc(1, sizeof(*dw));

		if (!dw || !(dw->cache = calloc(DNS_CACHE_SLOTS, sizeof(*dw->cache))) ||
		    !(dw->scratch = malloc(DNS_SCRATCH))) {
			if (dw) {
				free(dw->cache);
				free(dw);
			}
			snprintf(err, errsz, "listen.dns: out of memory");
			return -1;
		}
		dw->w = &d->workers[i];
		dw->g = g;
		dw->udp.fd = dw->tcp.fd = -1;
		gw_metrics_init(&dw->metrics);
		d->workers[i].dns = dw;
	}
	/* Port 0: the kernel picks a UDP port; the TCP listener must get the
	 * same one, which someone may hold: try a few. */
	for (try = 0; try < 20; try++) {
		for (i = 0; i < d->n_workers; i++) {
			struct gw_dns_worker *dw = d->workers[i].dns;
			int p = i == 0 ? port : bound, tb;

			dw->udp.fd = udp_socket(host, p, &bound, err, errsz);
			if (dw->udp.fd < 0)
				break;
			snprintf(tspec, sizeof(tspec), "%s:%d", host, bound);
			dw->tcp.fd = gw_listen_socket(tspec, 1, 0, err, errsz, &tb);
			if (dw->tcp.fd < 0)
				break;
		}
		if (i == d->n_workers)
			break;
		for (i = 0; i < d->n_workers; i++) {
			struct gw_dns_worker *dw = d->workers[i].dns;

			if (dw->udp.fd >= 0)
				close(dw->udp.fd);
			if (dw->tcp.fd >= 0)
				close(dw->tcp.fd);
			dw->udp.fd = dw->tcp.fd = -1;
		}
		if (port != 0)
			return -1;
	}
	if (try == 20)
		return -1;
	sg_info("listening dns on %s:%d (udp, tcp)", host, bound);
	return 0;
}

/* The sockets were bound on the main thread (so a bind error stops the
 * start); each worker registers its own on its loop. */
int gw_dns_worker_init(struct gw_worker *w, char *err, size_t errsz)
{
	struct gw_dns_worker *dw = w->dns;
	int ufd = dw->udp.fd, tfd = dw->tcp.fd;

	/* Level-triggered listeners, bounded work per wakeup. */
	if (gw_io_add(w->loop, &dw->udp, ufd, EPOLLIN, udp_io) < 0 ||
	    gw_io_add(w->loop, &dw->tcp, tfd, EPOLLIN, tcp_accept_io) < 0) {
		snprintf(err, errsz, "dns: epoll: %s", strerror(errno));
		return -1;
	}
	gw_timer_init(&dw->tick, tick);
	gw_timer_set(w->loop, &dw->tick, DNS_TICK_MS);
	return 0;
}

static void close_listeners(struct gw_dns_worker *dw)
{
	if (dw->udp.fd >= 0) {
		gw_io_del(dw->w->loop, &dw->udp);
		close(dw->udp.fd);
		dw->udp.fd = -1;
	}
	if (dw->tcp.fd >= 0) {
		gw_io_del(dw->w->loop, &dw->tcp);
		close(dw->tcp.fd);
		dw->tcp.fd = -1;
	}
}

void gw_dns_worker_drain(struct gw_worker *w)
{
	struct gw_dns_worker *dw = w->dns;

	if (!dw || dw->draining)
		return;
	dw->draining = 1;
	/* Queries already taken are answered; new ones go to nobody (the
	 * sandbox's resolver retries elsewhere, or it fails closed). */
	close_listeners(dw);
	while (dw->tcps) {
		struct dns_tcp *t = dw->tcps;

		dns_tcp_close(t);
	}
}

void gw_dns_before_sleep(struct gw_worker *w)
{
	if (w->dns)
		tcp_free_closed(w->dns);
}

/*
 * After the worker's loop: cancel the waiters first, since they are
 * linked into the resolver's lists, which gw_resolver_free() takes down
 * right after (serve.c daemon_free). Their memory stays on the free list
 * until gw_dns_free().
 */
void gw_dns_worker_stop(struct gw_worker *w)
{
	struct gw_dns_worker *dw = w->dns;

	if (!dw)
		return;
	dw->draining = 1;
	close_listeners(dw);
	while (dw->tcps)
		dns_tcp_close(dw->tcps);
	while (dw->pending) {
		gw_resolve_cancel(w->resolver, &dw->pending->rw);
		dns_pend_release(dw, dw->pending);
	}
	gw_timer_cancel(w->loop, &dw->tick);
	tcp_free_closed(dw);
}

void gw_dns_free(struct gw_daemon *d)
{
	int i;

	if (!d->dns)
		return;
	for (i = 0; d->workers && i < d->n_workers; i++) {
		struct gw_dns_worker *dw = d->workers[i].dns;

		if (!dw)
			continue;
		if (dw->udp.fd >= 0)
			close(dw->udp.fd);
		if (dw->tcp.fd >= 0)
			close(dw->tcp.fd);
		while (dw->pend_free) {
			struct dns_pend *p = dw->pend_free;

			dw->pend_free = p->next;
			free(p);
		}
		dns_worker_cache_free(dw);
		free(dw->scratch);
		gw_metrics_destroy(&dw->metrics);
		free(dw);
		d->workers[i].dns = NULL;
	}
	dns_limits_free(d->dns->limits);
	dns_learn_free(d->dns->learn);
	free(d->dns);
	d->dns = NULL;
}
