/*
 * relay.c - moving bytes once the decision is made.
 *
 * First whatever we hold for the upstream (the peeked ClientHello, a
 * rewritten HTTP head) is written; after that each direction copies small
 * reads through one per-worker buffer (recv, then send at once) and runs
 * bulk data src -> pipe -> dst with splice(2), so large payloads never
 * enter user space (dir_copy says when it switches). A direction takes a
 * pipe from the worker's pool only while bytes are in flight and returns
 * it when the pipe drains: an idle connection holds no pipe. Half-close is forwarded (EOF from one side shuts the other's
 * write side once the pipe is empty); a reset on one side resets the
 * other. Readiness is edge-triggered: the c_rd/u_wr... flags are set by
 * epoll and cleared only when a call returns EAGAIN.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sg.h"
#include "sg_log.h"
#include "gateway/conn_int.h"
#include "sg_poison.h"

#define PIPE_CAP (64 * 1024)    /* Linux default pipe size: 16 pages */

int gw_pipe_get(struct gw_worker *w, struct gw_pipe *p)
{
	if (w->n_pipes > 0) {
		*p = w->pipes[--w->n_pipes];
		return 0;
	}
	if (pipe2(p->fds, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	return 0;
}

void gw_pipe_put(struct gw_worker *w, struct gw_pipe *p)
{
	if (w->n_pipes < GW_PIPE_POOL) {
		w->pipes[w->n_pipes++] = *p;
	} else {
		close(p->fds[0]);
		close(p->fds[1]);
	}
}

/* A pipe that still holds bytes cannot go back to the pool. */
static void dir_release(struct gw_worker *w, struct relay_dir *d)
{
	if (!d->has_pipe)
		return;
	if (d->in_pipe == 0) {
		gw_pipe_put(w, &d->pipe);
	} else {
		close(d->pipe.fds[0]);
		close(d->pipe.fds[1]);
	}
	d->has_pipe = 0;
	d->in_pipe = 0;
}

void gw_relay_release(struct gw_conn *c)
{
	dir_release(c->w, &c->c2u);
	dir_release(c->w, &c->u2c);
}

int gw_out_flush(int fd, struct out_buf *o, unsigned *wr_ready)
{
	while (o->off < o->len) {
		ssize_t n = send(fd, o->p + o->off, o->len - o->off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				*wr_ready = 0;
				return 0;
			}
			return -errno;
		}
		o->off += (size_t)n;
	}
	return 1;
}

/*
 * A chunked request body is spliced like any other, but its end must be
 * found: peek at what is queued (the kernel keeps it), let the framing
 * scanner say how much of it is body, and allow exactly that much through.
 * Bytes after the body (a pipelined request) are never forwarded.
 * Returns 1 on progress, 0 if nothing is queued, or a negative errno.
 */
static int chunk_peek(struct relay_dir *d, int src, unsigned *src_rd)
{
	uint8_t peek[16384];
	ssize_t n;
	long k;

	if (d->ch.done) {
		d->eof = 1;
		return 1;
	}
	n = recv(src, peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
	if (n == 0) {
		d->eof = 1;             /* the client gave up mid-body */
		d->no_shut = 0;
		return 1;
	}
	if (n < 0)
		return errno == EAGAIN ? (*src_rd = 0, 0) : errno == EINTR ? 0 : -errno;
	k = http1_chunked_scan(&d->ch, peek, (size_t)n);
	if (k < 0)
		return -EPROTO;
	d->limit = k;
	if (k == 0 && d->ch.done)
		d->eof = 1;
	return 1;
}

/*
 * Small messages (requests, responses of a keep-alive exchange) cost fewer
 * syscalls copied than spliced: one recv and one send instead of two
 * splices and a third that finds the socket empty. A read shorter than
 * the buffer means the socket is drained (edge-triggered epoll reports
 * any later arrival; an EOF already signalled by EPOLLRDHUP still needs a
 * read to see it, so then we keep reading). A read that fills the buffer
 * switches the direction to splice until it is drained again: bulk data
 * never goes through user space. What the destination does not take goes
 * into a pooled pipe, so ordering holds and an idle connection holds no
 * buffer. Returns 1 on progress, 0 if not applicable now, or -errno.
 */
static int dir_copy(struct gw_worker *w, struct relay_dir *d, int src, int dst,
		    unsigned *src_rd, unsigned *dst_wr, unsigned src_hup)
{
	size_t want = sizeof(w->relay_buf);
	ssize_t n, m;

	if (d->eof || !*src_rd || !*dst_wr || d->in_pipe || d->bulk || d->limit == 0)
		return 0;
	if (d->limit > 0 && (int64_t)want > d->limit)
		want = (size_t)d->limit;
	n = recv(src, w->relay_buf, want, MSG_DONTWAIT);
	if (n == 0) {
		d->eof = 1;
		d->no_shut = 0;
		return 1;
	}
	if (n < 0) {
		if (errno == EAGAIN) {
			*src_rd = 0;
			return 0;
		}
		return errno == EINTR ? 0 : -errno;
	}
	if (d->limit > 0) {
		d->limit -= n;
		if (d->limit == 0 && (!d->chunked || d->ch.done))
			d->eof = 1;
	}
	m = send(dst, w->relay_buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (m < 0) {
		if (errno != EAGAIN)
			return -errno;
		m = 0;
	}
	d->bytes += (uint64_t)m;
	if (m < n) {
		/* The rest waits in a pipe (empty, 64 KiB: the write is whole). */
		*dst_wr = 0;
		if (!d->has_pipe) {
			int rc = gw_pipe_get(w, &d->pipe);

			if (rc < 0)
				return rc;
			d->has_pipe = 1;
		}
		if (write(d->pipe.fds[1], w->relay_buf + m, (size_t)(n - m)) != n - m)
			return -EIO;
		d->in_pipe += (size_t)(n - m);
	}
	if ((size_t)n == sizeof(w->relay_buf))
		d->bulk = 1;
	else if (!src_hup && (size_t)n < want)
		*src_rd = 0;
	return 1;
}

/*
 * Pump one direction as far as it goes without blocking.
 * Returns 1 if progress was made, 0 if not, or a negative errno.
 */
static int dir_pump(struct gw_worker *w, struct relay_dir *d, int src, int dst,
		    unsigned *src_rd, unsigned *dst_wr, unsigned src_hup)
{
	int progress = 0;

	for (;;) {
		int moved = dir_copy(w, d, src, dst, src_rd, dst_wr, src_hup);

		if (moved < 0)
			return moved;

		if (!d->eof && *src_rd && d->in_pipe < PIPE_CAP && d->chunked && d->limit == 0) {
			int rc = chunk_peek(d, src, src_rd);

			if (rc < 0)
				return rc;
			if (rc > 0)
				moved = 1;
		}
		if (!d->eof && *src_rd && d->in_pipe < PIPE_CAP && d->limit != 0) {
			size_t want = PIPE_CAP - d->in_pipe;
			ssize_t n;

			if (d->limit > 0 && (int64_t)want > d->limit)
				want = (size_t)d->limit;
			if (!d->has_pipe) {
				int rc = gw_pipe_get(w, &d->pipe);

				if (rc < 0)
					return rc;
				d->has_pipe = 1;
			}
			n = splice(src, NULL, d->pipe.fds[1], NULL, want,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				d->in_pipe += (size_t)n;
				if (d->limit > 0) {
					d->limit -= n;
					if (d->limit == 0 && (!d->chunked || d->ch.done))
						d->eof = 1;
				}
				moved = 1;
			} else if (n == 0) {
				d->eof = 1;
				d->no_shut = 0;
				moved = 1;
			} else if (errno == EAGAIN) {
				*src_rd = 0;
				if (d->in_pipe == 0)
					d->bulk = 0;    /* drained: small messages again */
			} else if (errno != EINTR) {
				return -errno;
			}
		}
		if (d->in_pipe > 0 && *dst_wr) {
			ssize_t n = splice(d->pipe.fds[0], NULL, dst, NULL, d->in_pipe,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

			if (n > 0) {
				d->in_pipe -= (size_t)n;
				d->bytes += (uint64_t)n;
				moved = 1;
			} else if (n < 0 && errno == EAGAIN) {
				*dst_wr = 0;
			} else if (n < 0 && errno != EINTR) {
				return -errno;
			}
		}
		if (!moved)
			break;
		progress = 1;
	}
	if (d->in_pipe == 0 && d->has_pipe)
		dir_release(w, d);
	if (d->eof && d->in_pipe == 0 && !d->shut) {
		d->shut = 1;
		if (!d->no_shut)
			shutdown(dst, SHUT_WR);
		progress = 1;
	}
	return progress;
}

static void reset_fd(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

void gw_relay_start(struct gw_conn *c)
{
	c->state = CS_RELAY;
	c->last_active = gw_loop_now(c->w->loop);
	gw_timer_set(c->w->loop, &c->timer, c->snap->cfg->idle_timeout_ms);
	gw_relay_run(c);
}

void gw_relay_run(struct gw_conn *c)
{
	struct gw_hs *hs = c->hs;
	int a, b;

	if (hs) {
		/* What we hold for the upstream goes first, in order. */
		int rc = gw_out_flush(c->uio.fd, &hs->uout, &c->u_wr);

		if (rc < 0) {
			gw_conn_close(c, "upstream write failed");
			return;
		}
		if (rc == 0)
			return;
		c->c2u.bytes += hs->uout.len;
		if (hs->cout.off < hs->cout.len) {
			rc = gw_out_flush(c->cio.fd, &hs->cout, &c->c_wr);
			if (rc < 0) {
				gw_conn_close(c, "client write failed");
				return;
			}
			if (rc == 0)
				return;
		}
		/* The handshake is over: free what only it needed. */
		free(hs->buf);
		free(hs->head);
		free(hs);
		c->hs = NULL;
	}
	if (c->http && !c->status_peeked && c->u_rd) {
		/* The upstream's status line, for the audit record: peeked, so
		 * the bytes still go by splice. A 1xx interim answer says
		 * nothing final; the status then stays unknown. */
		uint8_t line[12];
		ssize_t n = recv(c->uio.fd, line, sizeof(line), MSG_PEEK | MSG_DONTWAIT);

		/* Whatever came first decides: a short first segment is
		 * spliced on and the status stays unknown. */
		if (!(n < 0 && errno == EAGAIN)) {
			int code = n > 0 ? http1_response_status(line, (size_t)n) : SG_DECLINED;

			c->status_peeked = 1;
			if (code >= 200)
				c->status = code;
		}
	}
	a = dir_pump(c->w, &c->c2u, c->cio.fd, c->uio.fd, &c->c_rd, &c->u_wr, c->c_hup);
	b = dir_pump(c->w, &c->u2c, c->uio.fd, c->cio.fd, &c->u_rd, &c->c_wr, c->u_hup);
	if (a < 0 || b < 0) {
		/* A reset on one side becomes a reset on the other. */
		reset_fd(c->cio.fd);
		reset_fd(c->uio.fd);
		gw_conn_close(c, "reset");
		return;
	}
	if (a || b)
		c->last_active = gw_loop_now(c->w->loop);
	if (c->c2u.shut && c->u2c.shut)
		gw_conn_close(c, "done");
}
