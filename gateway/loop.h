/*
 * loop.h - the event loop: one per worker thread (Redis ae.c in spirit).
 *
 * epoll, a binary min-heap of timers embedded in their owners, and a
 * before-sleep hook. File descriptors are registered once, edge-triggered,
 * for both directions; the owner keeps its own readiness flags and clears
 * them when a call returns EAGAIN, so no epoll_ctl() happens per event.
 *
 * Nothing here allocates per event: the heap grows by doubling only when
 * more timers are armed than ever before.
 */
#ifndef GW_LOOP_H
#define GW_LOOP_H

#include <stddef.h>
#include <stdint.h>

struct gw_loop;
struct gw_io;
struct gw_timer;

typedef void gw_io_cb(struct gw_loop *l, struct gw_io *io, uint32_t events);
typedef void gw_timer_cb(struct gw_loop *l, struct gw_timer *t);
typedef void gw_hook_cb(struct gw_loop *l, void *arg);

struct gw_io {
	int fd;
	int registered;
	gw_io_cb *cb;
};

struct gw_timer {
	int64_t when;           /* monotonic ms; valid while armed */
	size_t idx;             /* position in the heap; SIZE_MAX when not armed */
	gw_timer_cb *cb;
};

struct gw_loop *gw_loop_new(void);
void gw_loop_free(struct gw_loop *l);

/* Register fd for events (EPOLLIN/EPOLLOUT/EPOLLRDHUP/EPOLLET...). */
int gw_io_add(struct gw_loop *l, struct gw_io *io, int fd, uint32_t events, gw_io_cb *cb);
int gw_io_mod(struct gw_loop *l, struct gw_io *io, uint32_t events);
/* Deregister (does not close fd). Safe on an unregistered io. */
void gw_io_del(struct gw_loop *l, struct gw_io *io);
/* For an fd about to be closed (and never dup'ed): closing removes it from
 * epoll, so only our mark is dropped and the syscall is saved. */
static inline void gw_io_forget(struct gw_io *io) { io->registered = 0; }

void gw_timer_init(struct gw_timer *t, gw_timer_cb *cb);
/* Arm (or re-arm) to fire after ms milliseconds. */
int gw_timer_set(struct gw_loop *l, struct gw_timer *t, int64_t ms);
void gw_timer_cancel(struct gw_loop *l, struct gw_timer *t);
static inline int gw_timer_armed(const struct gw_timer *t) { return t->idx != (size_t)-1; }

/* Called before every epoll_wait() (free closed objects, re-arm c-ares). */
void gw_loop_set_hook(struct gw_loop *l, gw_hook_cb *cb, void *arg);
/* Monotonic milliseconds, cached at the start of each iteration. */
int64_t gw_loop_now(const struct gw_loop *l);
int64_t gw_now_ms(void);
/* Run until gw_loop_stop(). */
void gw_loop_run(struct gw_loop *l);
void gw_loop_stop(struct gw_loop *l);

#endif
