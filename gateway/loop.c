#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_log.h"
#include "gateway/loop.h"
#include "sg_poison.h"

#define LOOP_MAX_EVENTS 256

struct gw_loop {
	int epfd;
	int stop;
	int64_t now;
	struct gw_timer **heap;         /* owned array of borrowed timers */
	size_t nheap, capheap;
	gw_hook_cb *hook;
	void *hook_arg;
};

int64_t gw_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct gw_loop *gw_loop_new(void)
{
	struct gw_loop *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	l->now = gw_now_ms();
	return l;
}

void gw_loop_free(struct gw_loop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l->heap);
	free(l);
}

int gw_io_add(struct gw_loop *l, struct gw_io *io, int fd, uint32_t events, gw_io_cb *cb)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	io->fd = fd;
	io->cb = cb;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	io->registered = 1;
	return 0;
}

int gw_io_mod(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
		return -errno;
	return 0;
}

void gw_io_del(struct gw_loop *l, struct gw_io *io)
{
	if (!io->registered)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL);
	io->registered = 0;
}

/* ---- timers: binary min-heap on ->when, each timer knows its slot ---- */

static void heap_swap(struct gw_loop *l, size_t a, size_t b)
{
	struct gw_timer *t = l->heap[a];

	l->heap[a] = l->heap[b];
	l->heap[b] = t;
	l->heap[a]->idx = a;
	l->heap[b]->idx = b;
}

static void heap_up(struct gw_loop *l, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (l->heap[p]->when <= l->heap[i]->when)
			break;
		heap_swap(l, i, p);
		i = p;
	}
}

static void heap_down(struct gw_loop *l, size_t i)
{
	for (;;) {
		size_t c = 2 * i + 1, m = i;

		if (c < l->nheap && l->heap[c]->when < l->heap[m]->when)
			m = c;
		if (c + 1 < l->nheap && l->heap[c + 1]->when < l->heap[m]->when)
			m = c + 1;
		if (m == i)
			break;
		heap_swap(l, i, m);
		i = m;
	}
}

void gw_timer_init(struct gw_timer *t, gw_timer_cb *cb)
{
	t->idx = (size_t)-1;
	t->when = 0;
	t->cb = cb;
}

int gw_timer_set(struct gw_loop *l, struct gw_timer *t, int64_t ms)
{
	int64_t when = l->now + ms;

	if (gw_timer_armed(t)) {
		int64_t old = t->when;

		t->when = when;
		if (when < old)
			heap_up(l, t->idx);
		else
			heap_down(l, t->idx);
		return 0;
	}
	if (l->nheap == l->capheap) {
		size_t cap = l->capheap ? l->capheap * 2 : 64;
		struct gw_timer **h = realloc(l->heap, cap * sizeof(*h));

		if (!h)
			return SG_ENOMEM;
		l->heap = h;
		l->capheap = cap;
	}
	t->when = when;
	t->idx = l->nheap;
	l->heap[l->nheap++] = t;
	heap_up(l, t->idx);
	return 0;
}

void gw_timer_cancel(struct gw_loop *l, struct gw_timer *t)
{
	size_t i = t->idx;

	if (!gw_timer_armed(t))
		return;
	t->idx = (size_t)-1;
	l->nheap--;
	if (i == l->nheap)
		return;
	l->heap[i] = l->heap[l->nheap];
	l->heap[i]->idx = i;
	heap_up(l, i);
	heap_down(l, l->heap[i]->idx);
}

void gw_loop_set_hook(struct gw_loop *l, gw_hook_cb *cb, void *arg)
{
	l->hook = cb;
	l->hook_arg = arg;
}

int64_t gw_loop_now(const struct gw_loop *l)
{
	return l->now;
}

void gw_loop_stop(struct gw_loop *l)
{
	l->stop = 1;
}

static void run_timers(struct gw_loop *l)
{
	while (l->nheap && l->heap[0]->when <= l->now) {
		struct gw_timer *t = l->heap[0];

		gw_timer_cancel(l, t);
		t->cb(l, t);
	}
}

void gw_loop_run(struct gw_loop *l)
{
	struct epoll_event evs[LOOP_MAX_EVENTS];

	while (!l->stop) {
		int timeout = -1, n, i;

		if (l->hook)
			l->hook(l, l->hook_arg);
		if (l->stop)
			break;
		if (l->nheap) {
			int64_t d = l->heap[0]->when - gw_now_ms();

			timeout = d < 0 ? 0 : (d > 60000 ? 60000 : (int)d);
		}
		n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, timeout);
		l->now = gw_now_ms();
		if (n < 0) {
			if (errno != EINTR)
				sg_err("epoll_wait: %s", strerror(errno));
			continue;
		}
		for (i = 0; i < n; i++) {
			struct gw_io *io = evs[i].data.ptr;

			/* An io deregistered earlier in this batch (its owner closed)
			 * is marked, not freed, until the hook runs: safe to test. */
			if (io->registered)
				io->cb(l, io, evs[i].events);
		}
		run_timers(l);
	}
}
