/*
 * aud_writer.c - the audit writer thread (contract in aud.h; the chain in
 * aud_verify.h, the anchor in aud_chain.h).
 *
 * Everything that touches the file, the chain or the anchor happens on
 * the writer thread (or in aud_open() before it starts), so none of that
 * state needs a lock; submitters share only the queue (mu) and a few
 * atomic counters.
 *
 * Start-up decides how the chain continues (tail_start):
 *   empty file, valid anchor   -> the new file opens with audit_rotate
 *                                 "restart", linked to the anchor
 *   empty file, no anchor      -> a new chain from 64 '0'
 *   last record verifies       -> continue its seq and chain
 *   last record has no chain   -> the file is rotated away; the new file
 *    (key newly set)              opens with audit_rotate "chain_start"
 *   last record does not verify-> rotated away, "chain_mismatch" (warned)
 *   anchor ahead of the file   -> rotated away, "anchor_mismatch": records
 *    (truncated while stopped)    were removed; verify reports it
 *   last line unreadable       -> rotated away, "unreadable_tail"
 * A torn last line (no '\n': a crash mid-write) is never extended: the
 * next record starts a new line and says "recovered_torn_tail":true with
 * "torn_bytes", and the chain continues from the last complete record.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_log.h"
#include "audit/aud.h"
#include "audit/aud_chain.h"
#include "audit/aud_syslog.h"
#include "sg_poison.h"

#define BATCH_FSYNC_MS 100
#define HEAD_EVERY_MS 100
#define RETRY_MS 100
#define SHUTDOWN_TRIES 50       /* x RETRY_MS: give up on a dead disk at exit */
#define TAIL_MAX (64 * 1024)    /* enough for several records of AUD_LINE_MAX */
#define KEEP_DEFAULT 10
#define AUD_NAP_MS 2            /* batch records for this long before sleeping */
#define AUD_WAKE_BATCH 512      /* queued records that wake a napping writer early */
#define AUD_NAP_BUSY 8          /* a batch this large means records come faster than wakeups */
#define AUD_BUSY_GAP_MS 10      /* a batch this soon after the last one: busy too */

struct qrec {
	struct qrec *next;
	uint64_t lost_at;       /* a->lost when this record was queued */
	size_t len;
	char body[];            /* a JSON object: {"ts":...} */
};

struct aud_writer {
	/* set by aud_open(), read-only afterwards */
	char *path;                     /* owned; NULL for stdout */
	char *head_path, *head_tmp;     /* owned; NULL without a key or file */
	const char *base;               /* borrowed from path: its basename */
	enum aud_fsync_mode fsync_mode;
	uint64_t rotate_size;
	int rotate_keep;
	size_t queue_max;
	struct aud_mac *mac;            /* owned; NULL: records carry no chain */
	struct aud_syslog *syslog;      /* owned; NULL: no copy */
	pthread_t thread;
	int started;

	/* shared with submitters */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int sleeping;                   /* in an untimed wait: submitters must signal (mu) */
	int busy;                       /* records come fast: nap between batches (mu) */
	int64_t last_take;              /* mono_ms() of the last non-empty batch (mu) */
	struct qrec *head, *tail;       /* owned queue, under mu */
	int stop, reopen;               /* under mu */
	atomic_size_t queued;           /* queue + pend, for queue_max */
	atomic_int failing;
	atomic_uint_fast64_t lost, written, rotations;

	/* the writer thread's own */
	int fd;
	struct qrec *pend, *pend_tail;  /* taken off the queue, not yet written */
	uint64_t seq;                   /* last seq written (0: none) */
	char chain[AUD_CHAIN_HEX + 1];  /* last chain written, or the start */
	uint64_t size;                  /* bytes in the current file */
	int torn_nl;                    /* the file ends mid-line: begin with '\n' */
	int torn_announce;              /* the next record says recovered_torn_tail */
	uint64_t torn_bytes;
	uint64_t lost_reported;         /* lost count already announced */
	int dirty, head_dirty;
	int64_t last_sync, last_head;
	int want_reopen;                /* a new file is due (SIGUSR1, size) */
	const char *reopen_reason;      /* static */
	char reopen_prev[NAME_MAX + 1]; /* basename the old file went to, or "" */
	int64_t retry_at;               /* for want_reopen and failed rotations */
	int head_warned, reopen_warned;
	char line[AUD_LINE_MAX];
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void aud_ts_now(char *out, size_t outsz)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(out, outsz, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

void aud_rec_begin(struct aud_rec *r, const char *event)
{
	char ts[40];

	aud_ts_now(ts, sizeof(ts));
	sg_json_init(&r->j, r->buf, sizeof(r->buf));
	sg_json_begin(&r->j);
	sg_json_str(&r->j, "ts", ts);
	sg_json_str(&r->j, "event", event);
}

void aud_rec_decision(struct aud_rec *r, const char *sandbox, const char *decision,
		      const char *reason, const char *rule)
{
	sg_json_str(&r->j, "sandbox", sandbox);
	sg_json_str(&r->j, "decision", decision);
	sg_json_str(&r->j, "reason", reason);
	sg_json_str(&r->j, "rule", rule);
}

int aud_rec_submit(struct aud_writer *a, struct aud_rec *r)
{
	int n = sg_json_end(&r->j);

	if (n < 0) {
		/* Cannot happen with bounded fields; never write a torn record. */
		sg_err("audit: record over %d bytes dropped", AUD_REC_MAX);
		if (a)
			atomic_fetch_add(&a->lost, 1);
		return SG_EINVAL;
	}
	if (!a)
		return 0;
	return aud_submit(a, r->buf, (size_t)n);
}

/* ------------------------------------------------------------ the queue */

static struct qrec *qrec_new(const char *body, size_t len)
{
	struct qrec *q = malloc(sizeof(*q) + len);

	if (!q)
		return NULL;
	q->next = NULL;
	q->lost_at = 0;
	q->len = len;
	memcpy(q->body, body, len);
	return q;
}

static void pend_push_front(struct aud_writer *a, struct qrec *q)
{
	q->next = a->pend;
	a->pend = q;
	if (!a->pend_tail)
		a->pend_tail = q;
	atomic_fetch_add(&a->queued, 1);
}

static void pend_pop(struct aud_writer *a)
{
	struct qrec *q = a->pend;

	a->pend = q->next;
	if (!a->pend)
		a->pend_tail = NULL;
	free(q);
	atomic_fetch_sub(&a->queued, 1);
}

/* Called with mu held: the shared queue joins the writer's pending list. */
static void pend_take_queue(struct aud_writer *a)
{
	const struct qrec *q;
	unsigned n = 0;

	/* How busy we are decides whether the writer naps (see writer_main):
	 * a large batch, or records coming again soon after the last batch
	 * (one wake-up per record would otherwise keep every batch small). */
	for (q = a->head; q && n < AUD_NAP_BUSY; q = q->next)
		n++;
	if (a->head) {
		int64_t now = mono_ms();

		a->busy = n >= AUD_NAP_BUSY || now - a->last_take < AUD_BUSY_GAP_MS;
		a->last_take = now;
	} else {
		a->busy = 0;
	}
	if (!a->head)
		return;
	if (a->pend_tail)
		a->pend_tail->next = a->head;
	else
		a->pend = a->head;
	a->pend_tail = a->tail;
	a->head = a->tail = NULL;
}

/*
 * The record that opens a new file: it carries the link to the previous
 * one (prev_seq, prev_chain) and is chained from prev_chain like any
 * record. prev_chain NULL: the chain starts again from zeros.
 */
static int push_rotate(struct aud_writer *a, const char *reason, const char *prev_file,
		       int prev_file_json, int has_seq, uint64_t prev_seq,
		       const char *prev_chain, const struct aud_head *anchor)
{
	char pc[AUD_CHAIN_HEX + 1];
	struct aud_rec r;
	struct qrec *q;
	int n;

	if (!has_seq)
		prev_chain = NULL;      /* nothing before it: the chain starts at zeros */
	if (prev_chain) {
		/* it may point into a line: exactly 64 characters */
		memcpy(pc, prev_chain, AUD_CHAIN_HEX);
		pc[AUD_CHAIN_HEX] = '\0';
		prev_chain = pc;
	}
	aud_rec_begin(&r, "audit_rotate");
	aud_rec_decision(&r, NULL, "allow", reason, NULL);
	if (prev_file && prev_file_json) {
		/* already JSON-escaped (read back from the anchor) */
		char tmp[sizeof(((struct aud_head *)0)->file) + 2];

		n = snprintf(tmp, sizeof(tmp), "\"%s\"", prev_file);
		sg_json_raw(&r.j, "prev_file", tmp, (size_t)n);
	} else {
		sg_json_str(&r.j, "prev_file", prev_file && *prev_file ? prev_file : NULL);
	}
	if (has_seq)
		sg_json_int(&r.j, "prev_seq", (int64_t)prev_seq);
	else
		sg_json_null(&r.j, "prev_seq");
	sg_json_str(&r.j, "prev_chain", a->mac ? prev_chain : NULL);
	if (anchor) {
		sg_json_int(&r.j, "anchor_seq", (int64_t)anchor->seq);
		sg_json_str(&r.j, "anchor_chain", anchor->chain);
	}
	n = sg_json_end(&r.j);
	if (n < 0 || !(q = qrec_new(r.buf, (size_t)n)))
		return SG_ENOMEM;
	q->lost_at = a->lost_reported;  /* a loss is announced by the next record */
	pend_push_front(a, q);
	a->seq = has_seq ? prev_seq : 0;
	memcpy(a->chain, a->mac && prev_chain ? prev_chain : aud_chain_zero, AUD_CHAIN_HEX);
	a->chain[AUD_CHAIN_HEX] = '\0';
	atomic_fetch_add(&a->rotations, 1);
	return 0;
}

/* ------------------------------------------------------------ the files */

static int open_path(struct aud_writer *a)
{
	/* O_RDWR: the tail is read back at start-up and after a reopen */
	int fd = open(a->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0640);

	return fd < 0 ? -errno : fd;
}

static void sync_file(struct aud_writer *a)
{
	if (a->dirty && a->fsync_mode != AUD_FSYNC_NEVER && a->fd > STDERR_FILENO)
		fdatasync(a->fd);
	a->dirty = 0;
	a->last_sync = mono_ms();
}

/* PATH.(i) -> PATH.(i+1) for the kept ones, then PATH -> PATH.1. */
static int shift_files(struct aud_writer *a)
{
	char from[PATH_MAX], to[PATH_MAX];
	int i;

	for (i = a->rotate_keep - 1; i >= 1; i--) {
		snprintf(from, sizeof(from), "%s.%d", a->path, i);
		snprintf(to, sizeof(to), "%s.%d", a->path, i + 1);
		if (rename(from, to) < 0 && errno != ENOENT)
			return -errno;
	}
	snprintf(to, sizeof(to), "%s.1", a->path);
	if (rename(a->path, to) < 0)
		return -errno;
	return 0;
}

/* Where did the file behind fd go (logrotate renamed it)? Its basename. */
static void fd_name(int fd, char *out, size_t outsz)
{
	char link[64], buf[PATH_MAX];
	ssize_t n;
	const char *b;

	out[0] = '\0';
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (n > 10 && !strcmp(buf + n - 10, " (deleted)"))
		return;                 /* removed, not renamed: no name to give */
	b = strrchr(buf, '/');
	b = b ? b + 1 : buf;
	if (strlen(b) < outsz)
		memcpy(out, b, strlen(b) + 1);
}

/* "BASE.1" into out, or "" when it does not fit (the field becomes null). */
static void name_dot1(char *out, size_t outsz, const char *base)
{
	size_t n = strlen(base);

	out[0] = '\0';
	if (n + 3 <= outsz) {
		memcpy(out, base, n);
		memcpy(out + n, ".1", 3);
	}
}

/* The file does not end in '\n': the next record must start a new line. */
static void check_torn(struct aud_writer *a, uint64_t size)
{
	char c;

	if (size && pread(a->fd, &c, 1, (off_t)size - 1) == 1 && c != '\n') {
		a->torn_nl = 1;
		a->torn_announce = 1;
		a->torn_bytes = 0;      /* unknown here; the tail scan knows better */
	}
}

/*
 * Open the path again; if it is another file now, it begins with an
 * audit_rotate record. Failure keeps the old descriptor (records keep
 * their chain in the renamed file) and is retried.
 */
static void try_reopen(struct aud_writer *a)
{
	struct stat old_st, new_st;
	int fd = open_path(a);

	if (fd < 0) {
		if (!a->reopen_warned)
			sg_err("audit: reopen %s: %s; still writing to the old file",
			       a->path, strerror(-fd));
		a->reopen_warned = 1;
		a->retry_at = mono_ms() + RETRY_MS * 10;
		return;
	}
	a->reopen_warned = 0;
	a->want_reopen = 0;
	if (fstat(fd, &new_st) == 0 && fstat(a->fd, &old_st) == 0 &&
	    new_st.st_dev == old_st.st_dev && new_st.st_ino == old_st.st_ino) {
		close(fd);              /* not renamed: nothing to rotate */
		return;
	}
	if (!a->reopen_prev[0] && strcmp(a->reopen_reason, "size"))
		fd_name(a->fd, a->reopen_prev, sizeof(a->reopen_prev));
	sync_file(a);
	close(a->fd);
	a->fd = fd;
	a->size = (uint64_t)new_st.st_size;
	/* A torn tail of the old file is announced by the rotate record; the
	 * new file starts clean unless it too ends mid-line. */
	a->torn_nl = 0;
	check_torn(a, a->size);
	if (push_rotate(a, a->reopen_reason, a->reopen_prev, 0, a->seq > 0, a->seq,
			a->chain, NULL) < 0)
		sg_err("audit: out of memory for the audit_rotate record");
	a->head_dirty = 1;
	sg_info("audit: %s: new file (%s)", a->path, a->reopen_reason);
}

static void rotate_by_size(struct aud_writer *a)
{
	int rc;

	sync_file(a);
	rc = shift_files(a);
	if (rc < 0) {
		sg_err("audit: rotating %s: %s; will retry in 10 s", a->path, strerror(-rc));
		a->retry_at = mono_ms() + 10000;
		return;
	}
	a->want_reopen = 1;
	a->reopen_reason = "size";
	name_dot1(a->reopen_prev, sizeof(a->reopen_prev), a->base);
	try_reopen(a);
}

/* ----------------------------------------------------------- the anchor */

static void write_head(struct aud_writer *a)
{
	char buf[AUD_HEAD_MAX];
	int n, fd, ok = 0;

	a->head_dirty = 0;
	a->last_head = mono_ms();
	if (!a->mac || !a->head_path || a->seq == 0)
		return;
	n = aud_head_format(a->mac, a->base, a->seq, a->chain, buf, sizeof(buf));
	fd = n > 0 ? open(a->head_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640) : -1;
	if (fd >= 0) {
		ok = write(fd, buf, (size_t)n) == n &&
		     (a->fsync_mode == AUD_FSYNC_NEVER || fdatasync(fd) == 0);
		close(fd);
		/* rename() replaces it whole: a reader never sees half an anchor */
		ok = ok && rename(a->head_tmp, a->head_path) == 0;
		if (!ok)
			unlink(a->head_tmp);
	}
	if (!ok && !a->head_warned)
		sg_warn("audit: cannot write the anchor %s: %s", a->head_path, strerror(errno));
	a->head_warned = !ok;
}

static int read_head(struct aud_writer *a, struct aud_head *h)
{
	char buf[AUD_HEAD_MAX];
	ssize_t n;
	int fd, rc;

	if (!a->mac || !a->head_path)
		return -1;
	fd = open(a->head_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	rc = n > 0 ? aud_head_parse(a->mac, buf, (size_t)n, h) : SG_EINVAL;
	if (rc == SG_ERROR)
		sg_warn("audit: the anchor %s does not verify with this key (the key "
			"changed, or the anchor was edited); it is replaced", a->head_path);
	else if (rc < 0)
		sg_warn("audit: the anchor %s is malformed; it is replaced", a->head_path);
	return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------- start-up */

struct tail {
	char *buf;              /* owned */
	size_t n;               /* bytes read: the file's last n */
	uint64_t off;           /* file offset of buf[0] */
};

/*
 * The complete line ending just before index end (end is one past its
 * '\n' ... exclusive of it): sets *start. 0, or -1 if the window does not
 * reach its beginning.
 */
static int line_before(const struct tail *t, size_t end, size_t *start)
{
	const char *nl = end ? memrchr(t->buf, '\n', end) : NULL;

	if (nl) {
		*start = (size_t)(nl - t->buf) + 1;
		return 0;
	}
	if (t->off == 0) {
		*start = 0;
		return 0;
	}
	return -1;
}

/*
 * The chain a record was computed from, looking back at most a few lines
 * (skipping torn fragments). 0 and prev set, or -1: cannot tell.
 */
static int prev_chain_of(const struct tail *t, size_t lstart, const struct aud_line *l,
			 const char *line, size_t len, char *prev)
{
	size_t end = lstart, s;
	int i, has;
	uint64_t ps;
	const char *pc;

	if (aud_line_is(l, "audit_rotate")) {
		if (aud_line_rotate_link(line, len, &has, &ps, &pc) < 0)
			return -1;
		memcpy(prev, pc ? pc : aud_chain_zero, AUD_CHAIN_HEX);
		return 0;
	}
	for (i = 0; i < 4; i++) {
		struct aud_line pl;

		if (end == 0) {
			if (t->off != 0)
				return -1;
			memcpy(prev, aud_chain_zero, AUD_CHAIN_HEX);
			return 0;
		}
		if (line_before(t, end - 1, &s) < 0)
			return -1;
		if (aud_line_parse(t->buf + s, end - 1 - s, &pl) == 0) {
			if (!pl.chain)
				return -1;
			memcpy(prev, pl.chain, AUD_CHAIN_HEX);
			return 0;
		}
		end = s;
	}
	return -1;
}

/* Move the existing file away and open a fresh one; it starts with an
 * audit_rotate record (push_rotate by the caller). */
static int start_rotate_away(struct aud_writer *a, char *err, size_t errsz)
{
	int rc = shift_files(a), fd;

	if (rc == 0) {
		fd = open_path(a);
		if (fd < 0) {
			rc = fd;
		} else {
			close(a->fd);
			a->fd = fd;
			a->size = 0;
			a->torn_nl = 0;
		}
	}
	if (rc < 0)
		snprintf(err, errsz, "audit: moving %s away to start a new chain: %s",
			 a->path, strerror(-rc));
	return rc;
}

static int tail_read(struct aud_writer *a, uint64_t size, struct tail *t)
{
	size_t got = 0;

	t->n = (size_t)SG_MIN(size, (uint64_t)TAIL_MAX);
	t->off = size - t->n;
	t->buf = malloc(t->n);
	if (!t->buf)
		return SG_ENOMEM;
	while (got < t->n) {
		ssize_t r = pread(a->fd, t->buf + got, t->n - got, (off_t)(t->off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return SG_EIO;
		got += (size_t)r;
	}
	return 0;
}

static int tail_start(struct aud_writer *a, char *err, size_t errsz)
{
	struct tail t = { 0 };
	struct aud_head anchor;
	struct aud_line l = { 0 };
	struct stat st;
	int has_anchor, rc = 0;
	size_t end, ls;
	char prev[AUD_CHAIN_HEX + 1], want[AUD_CHAIN_HEX + 1];
	const char *line;
	const char *why = NULL;

	has_anchor = read_head(a, &anchor) == 0;
	if (fstat(a->fd, &st) < 0) {
		snprintf(err, errsz, "audit: %s: %s", a->path, strerror(errno));
		return SG_EIO;
	}
	a->size = (uint64_t)st.st_size;
	if (a->size == 0) {
		if (has_anchor) {
			/* Rotated away while we were down (or deleted): keep the
			 * chain going from the anchor so the files still link. */
			sg_info("audit: %s is new; continuing the chain from the anchor "
				"(seq %llu)", a->path, (unsigned long long)anchor.seq);
			return push_rotate(a, "restart", anchor.file, 1, 1, anchor.seq,
					   anchor.chain, NULL);
		}
		return 0;
	}
	rc = tail_read(a, a->size, &t);
	if (rc < 0) {
		snprintf(err, errsz, "audit: read %s: %s", a->path,
			 rc == SG_ENOMEM ? "out of memory" : strerror(errno));
		goto out;
	}
	end = t.n;
	if (t.buf[t.n - 1] != '\n') {
		const char *nl = memrchr(t.buf, '\n', t.n);

		end = nl ? (size_t)(nl - t.buf) + 1 : 0;
		a->torn_nl = a->torn_announce = 1;
		a->torn_bytes = t.n - end;
		sg_warn("audit: %s ends with %llu bytes of an incomplete record (a crash "
			"mid-write?); it stays, and the next record says so", a->path,
			(unsigned long long)a->torn_bytes);
		if (!nl && t.off == 0) {
			/* nothing complete at all: as if empty, but announced */
			memcpy(a->chain, aud_chain_zero, sizeof(a->chain));
			goto out;
		}
	}
	if (end == 0 || line_before(&t, end - 1, &ls) < 0) {
		why = "unreadable_tail";
		goto away;
	}
	line = t.buf + ls;
	if (aud_line_parse(line, end - 1 - ls, &l) < 0) {
		why = "unreadable_tail";
		goto away;
	}
	a->seq = l.seq;
	if (!a->mac) {
		if (l.chain)
			sg_warn("audit: %s was chained; without audit.key the chain stops "
				"at seq %llu", a->path, (unsigned long long)l.seq);
		goto out;
	}
	if (!l.chain) {
		why = "chain_start";
		goto away;
	}
	if (prev_chain_of(&t, ls, &l, line, end - 1 - ls, prev) == 0) {
		prev[AUD_CHAIN_HEX] = '\0';
		if (aud_chain_compute(a->mac, prev, line, l.body_len, want) < 0 ||
		    memcmp(want, l.chain, AUD_CHAIN_HEX)) {
			why = "chain_mismatch";
			goto away;
		}
	}
	memcpy(a->chain, l.chain, AUD_CHAIN_HEX);
	a->chain[AUD_CHAIN_HEX] = '\0';
	if (has_anchor && (anchor.seq > l.seq ||
			   (anchor.seq == l.seq && memcmp(anchor.chain, l.chain, AUD_CHAIN_HEX)))) {
		why = "anchor_mismatch";
		goto away;
	}
	goto out;
away:
	{
		char prev_file[NAME_MAX + 1];
		int has_seq = !strcmp(why, "unreadable_tail") ? 0 : 1;
		const char *pc = NULL;

		if (!strcmp(why, "chain_mismatch") || !strcmp(why, "anchor_mismatch"))
			pc = l.chain;
		if (!strcmp(why, "chain_start"))
			sg_warn("audit: %s holds records without a chain; it becomes %s.1 "
				"and a chained file starts", a->path, a->path);
		else if (!strcmp(why, "chain_mismatch"))
			sg_warn("audit: the last record of %s does not verify with this key "
				"(the key changed, or the file was edited); it becomes %s.1 and "
				"a new file starts", a->path, a->path);
		else if (!strcmp(why, "anchor_mismatch"))
			sg_err("audit: %s ends at seq %llu but its anchor says seq %llu: "
			       "records were removed while the gateway was stopped; it becomes "
			       "%s.1, and the new file records the finding", a->path,
			       (unsigned long long)l.seq, (unsigned long long)anchor.seq, a->path);
		else
			sg_warn("audit: cannot read the last record of %s; it becomes %s.1 "
				"and a new file starts", a->path, a->path);
		rc = start_rotate_away(a, err, errsz);
		if (rc < 0)
			goto out;
		name_dot1(prev_file, sizeof(prev_file), a->base);
		/* pc points into t.buf: push_rotate copies it before we free */
		rc = push_rotate(a, why, prev_file, 0, has_seq, has_seq ? l.seq : 0, pc,
				 !strcmp(why, "anchor_mismatch") ? &anchor : NULL);
		if (rc < 0)
			snprintf(err, errsz, "audit: out of memory");
	}
out:
	free(t.buf);
	return rc;
}

/* ------------------------------------------------------------ the write */

/* Write the whole line; on failure undo a partial write so that no torn
 * record stays behind, or, if that fails too, remember the tear. */
static int write_line(struct aud_writer *a, const char *p, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(a->fd, p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			if (done && a->path) {
				off_t cur = lseek(a->fd, 0, SEEK_CUR);

				if (cur < 0 || ftruncate(a->fd, cur - (off_t)done) < 0) {
					if (a->torn_nl) {       /* the '\n' did go out */
						done--;
						a->torn_nl = 0;
					}
					if (done) {
						a->torn_nl = a->torn_announce = 1;
						a->torn_bytes = done;
					}
					a->size += done;
				}
			}
			errno = e;
			return -e;
		}
		done += (size_t)n;
	}
	return 0;
}

/*
 * Write the record at the head of pend. 0 written (or dropped as
 * malformed), 1 a rotation put its record first (call again), negative
 * errno on a write failure (the record stays).
 */
static int emit(struct aud_writer *a)
{
	struct qrec *q = a->pend;
	char *line = a->line, hex[AUD_CHAIN_HEX + 1];
	size_t n = 0, start, cap = sizeof(a->line);
	int rc;

	if (q->len < 3 || q->body[0] != '{' || q->body[q->len - 1] != '}' ||
	    q->len + 256 > cap) {
		atomic_fetch_add(&a->lost, 1);  /* never happens: bounded bodies */
		pend_pop(a);
		return 0;
	}
	if (a->torn_nl)
		line[n++] = '\n';
	start = n;
	n += (size_t)snprintf(line + n, cap - n, "{\"v\":1,\"seq\":%llu,",
			      (unsigned long long)(a->seq + 1));
	/* the body without its braces: {"ts":...,"event":...} */
	memcpy(line + n, q->body + 1, q->len - 2);
	n += q->len - 2;
	if (q->lost_at > a->lost_reported)
		n += (size_t)snprintf(line + n, cap - n, ",\"lost_before\":%llu",
				      (unsigned long long)(q->lost_at - a->lost_reported));
	if (a->torn_announce)
		n += (size_t)snprintf(line + n, cap - n,
				      ",\"recovered_torn_tail\":true,\"torn_bytes\":%llu",
				      (unsigned long long)a->torn_bytes);
	if (a->mac) {
		if (aud_chain_compute(a->mac, a->chain, line + start, n - start, hex) < 0)
			return -EIO;
		memcpy(line + n, ",\"chain\":\"", 10);
		memcpy(line + n + 10, hex, AUD_CHAIN_HEX);
		memcpy(line + n + 10 + AUD_CHAIN_HEX, "\"}", 2);
		n += AUD_CHAIN_SUFFIX_LEN;
	} else {
		line[n++] = '}';
	}
	line[n++] = '\n';

	if (a->rotate_size && a->path && a->size > 0 && a->size + n > a->rotate_size &&
	    !a->want_reopen && mono_ms() >= a->retry_at) {
		struct qrec *was = a->pend;

		rotate_by_size(a);
		if (a->pend != was)
			return 1;       /* the audit_rotate record goes first */
	}
	rc = write_line(a, line, n);
	if (rc < 0)
		return rc;
	a->seq++;
	if (a->mac)
		memcpy(a->chain, hex, sizeof(hex));
	if (q->lost_at > a->lost_reported)
		a->lost_reported = q->lost_at;
	a->torn_nl = a->torn_announce = 0;
	a->size += n;
	a->dirty = a->head_dirty = 1;
	atomic_fetch_add(&a->written, 1);
	aud_syslog_send(a->syslog, line + start, n - start - 1);
	if (a->fsync_mode == AUD_FSYNC_ALWAYS && a->fd > STDERR_FILENO)
		fdatasync(a->fd);
	pend_pop(a);
	return 0;
}

/* Write everything pending; stop at the first failure. */
static int drain(struct aud_writer *a)
{
	while (a->pend) {
		int rc = emit(a);

		if (rc < 0) {
			if (!atomic_exchange(&a->failing, 1))
				sg_err("audit: write %s: %s; retrying every %d ms",
				       a->path ? a->path : "stdout", strerror(-rc), RETRY_MS);
			return rc;
		}
		if (rc == 0 && atomic_exchange(&a->failing, 0))
			sg_info("audit: writing again");
	}
	return 0;
}

/* Batch fsync at most every 100 ms; then the anchor, which must never
 * point past what is on disk. */
static void tick(struct aud_writer *a, int final)
{
	int64_t now = mono_ms();

	if (a->dirty && (final || (a->fsync_mode == AUD_FSYNC_BATCH &&
				   now - a->last_sync >= BATCH_FSYNC_MS)))
		sync_file(a);
	if (a->head_dirty && (final || now - a->last_head >= HEAD_EVERY_MS) &&
	    (a->fsync_mode != AUD_FSYNC_BATCH || !a->dirty))
		write_head(a);
}

/* When the writer must wake up without new records: 0 = never. */
static int64_t tick_deadline(const struct aud_writer *a)
{
	int64_t d = 0;

#define SOONER(t) do { int64_t t_ = (t); if (!d || t_ < d) d = t_; } while (0)
	if (a->dirty && a->fsync_mode == AUD_FSYNC_BATCH)
		SOONER(a->last_sync + BATCH_FSYNC_MS);
	if (a->head_dirty && a->mac && a->head_path)
		SOONER(SG_MAX(a->last_head + HEAD_EVERY_MS,
			      a->fsync_mode == AUD_FSYNC_BATCH && a->dirty ?
			      a->last_sync + BATCH_FSYNC_MS : 0));
	if (a->want_reopen)
		SOONER(a->retry_at);
#undef SOONER
	return d;
}

/* With mu held: wait until deadline (monotonic ms) or a wake-up. */
static int wait_until(struct aud_writer *a, int64_t deadline)
{
	struct timespec dl;
	int64_t left = deadline - mono_ms();

	if (left <= 0)
		return ETIMEDOUT;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += left / 1000;
	dl.tv_nsec += (left % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	return pthread_cond_timedwait(&a->cv, &a->mu, &dl);
}

static void drop_all(struct aud_writer *a)
{
	uint64_t n = 0;

	pthread_mutex_lock(&a->mu);
	pend_take_queue(a);
	pthread_mutex_unlock(&a->mu);
	while (a->pend) {
		pend_pop(a);
		n++;
	}
	atomic_fetch_add(&a->lost, n);
	sg_err("audit: %llu records lost at shutdown: %s cannot be written",
	       (unsigned long long)n, a->path ? a->path : "stdout");
}

static void *writer_main(void *arg)
{
	struct aud_writer *a = arg;
	int give_up = 0, napped = 0;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		int reopen, stop, rc;

		while (!a->head && !a->stop && !a->reopen && !a->pend) {
			int64_t d = tick_deadline(a);

			if (!napped && a->busy) {
				/* Busy: nap before sleeping for good, so records that
				 * arrive meanwhile are collected without waking us one
				 * by one (submitters only signal a sleeping writer).
				 * The nap ends at the fsync tick if that comes first.
				 * Idle gateways write each record at once. */
				int64_t nap = mono_ms() + AUD_NAP_MS;

				napped = 1;
				wait_until(a, d && d < nap ? d : nap);
			} else if (d) {
				int timed_out;

				/* Waiting for the fsync tick: a new record must
				 * still wake us. */
				a->sleeping = 1;
				timed_out = wait_until(a, d) == ETIMEDOUT;
				a->sleeping = 0;
				if (timed_out)
					break;
			} else {
				a->sleeping = 1;
				pthread_cond_wait(&a->cv, &a->mu);
				a->sleeping = 0;
			}
		}
		napped = 0;
		pend_take_queue(a);
		reopen = a->reopen;
		a->reopen = 0;
		stop = a->stop;
		pthread_mutex_unlock(&a->mu);

		if (reopen && a->path) {
			a->want_reopen = 1;
			a->reopen_reason = "reopen";
			a->reopen_prev[0] = '\0';
			a->retry_at = 0;
		}
		if (a->want_reopen && mono_ms() >= a->retry_at)
			try_reopen(a);
		rc = drain(a);
		tick(a, 0);

		if (rc < 0) {
			if (stop && ++give_up > SHUTDOWN_TRIES) {
				drop_all(a);
				pthread_mutex_lock(&a->mu);
				break;
			}
			/* Retry in RETRY_MS; neither new records nor stop hurry a
			 * dead disk (stop gives it SHUTDOWN_TRIES), SIGUSR1 does. */
			pthread_mutex_lock(&a->mu);
			{
				int64_t d = mono_ms() + RETRY_MS;

				while (!a->reopen && wait_until(a, d) != ETIMEDOUT)
					;
			}
			continue;
		}
		pthread_mutex_lock(&a->mu);
		if (a->stop && !a->head && !a->pend)
			break;
	}
	pthread_mutex_unlock(&a->mu);
	tick(a, 1);
	return NULL;
}

/* ------------------------------------------------------------------ API */

static int key_setup(struct aud_writer *a, const char *spec, char *err, size_t errsz)
{
	struct aud_key key;
	struct stat st;
	int rc = aud_key_load(spec, &key, err, errsz);

	if (rc < 0)
		return rc;
	a->mac = aud_mac_new(&key, err, errsz);
	aud_key_free(&key);     /* OpenSSL has its own copy now */
	if (!a->mac)
		return SG_ERROR;
	if (!strncmp(spec, "file:", 5) && stat(spec + 5, &st) == 0 && (st.st_mode & 0004))
		sg_warn("audit: the key file %s is readable by every user (chmod 600)",
			spec + 5);
	return 0;
}

struct aud_writer *aud_open(const struct aud_config *cfg, char *err, size_t errsz)
{
	struct aud_writer *a = calloc(1, sizeof(*a));
	size_t plen;
	int rc;

	if (!a) {
		snprintf(err, errsz, "audit: out of memory");
		return NULL;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->fd = -1;
	a->fsync_mode = cfg->fsync_mode;
	a->rotate_size = cfg->rotate_size;
	a->rotate_keep = cfg->rotate_keep > 0 ? cfg->rotate_keep : KEEP_DEFAULT;
	a->queue_max = cfg->queue_max ? cfg->queue_max : AUD_QUEUE_MAX;
	a->reopen_reason = "reopen";
	memcpy(a->chain, aud_chain_zero, sizeof(a->chain));
	a->last_sync = a->last_head = mono_ms();
	if (cfg->key_spec) {
		if (key_setup(a, cfg->key_spec, err, errsz) < 0)
			goto fail;
	} else {
		sg_warn("audit: audit.key is not set: records are written without a hash "
			"chain and are NOT tamper-evident");
	}
	if (cfg->path && strcmp(cfg->path, "-")) {
		plen = strlen(cfg->path);
		a->path = strdup(cfg->path);
		a->head_path = malloc(plen + sizeof(AUD_HEAD_SUFFIX));
		a->head_tmp = malloc(plen + sizeof(AUD_HEAD_SUFFIX) + 4);
		if (!a->path || !a->head_path || !a->head_tmp) {
			snprintf(err, errsz, "audit: out of memory");
			goto fail;
		}
		snprintf(a->head_path, plen + sizeof(AUD_HEAD_SUFFIX), "%s" AUD_HEAD_SUFFIX,
			 cfg->path);
		snprintf(a->head_tmp, plen + sizeof(AUD_HEAD_SUFFIX) + 4,
			 "%s" AUD_HEAD_SUFFIX ".tmp", cfg->path);
		a->base = strrchr(a->path, '/') ? strrchr(a->path, '/') + 1 : a->path;
		rc = open_path(a);
		if (rc < 0) {
			snprintf(err, errsz, "audit: open %s: %s", a->path, strerror(-rc));
			goto fail;
		}
		a->fd = rc;
		if (tail_start(a, err, errsz) < 0)
			goto fail;
	} else {
		a->fd = STDOUT_FILENO;
		a->rotate_size = 0;
	}
	if (cfg->syslog) {
		a->syslog = aud_syslog_open(cfg->syslog, err, errsz);
		if (!a->syslog)
			goto fail;
	}
	if (pthread_create(&a->thread, NULL, writer_main, a)) {
		snprintf(err, errsz, "audit: cannot start the writer thread");
		goto fail;
	}
	a->started = 1;
	return a;
fail:
	aud_close(a);
	return NULL;
}

void aud_close(struct aud_writer *a)
{
	if (!a)
		return;
	if (a->started) {
		pthread_mutex_lock(&a->mu);
		a->stop = 1;
		pthread_cond_signal(&a->cv);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->thread, NULL);
	}
	aud_syslog_close(a->syslog);
	while (a->pend)
		pend_pop(a);
	while (a->head) {
		struct qrec *q = a->head;

		a->head = q->next;
		free(q);
	}
	if (a->fd > STDERR_FILENO)
		close(a->fd);
	aud_mac_free(a->mac);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	free(a->path);
	free(a->head_path);
	free(a->head_tmp);
	free(a);
}

void aud_reopen(struct aud_writer *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->reopen = 1;
	pthread_cond_signal(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

int aud_submit(struct aud_writer *a, const char *body, size_t len)
{
	struct qrec *q = qrec_new(body, len);

	if (!q) {
		atomic_fetch_add(&a->lost, 1);
		return SG_ENOMEM;
	}
	pthread_mutex_lock(&a->mu);
	if (atomic_load(&a->queued) >= a->queue_max) {
		/* The disk has been failing for a long time: bound memory.
		 * Counted under mu so that lost_at stays ordered with the queue. */
		atomic_fetch_add(&a->lost, 1);
		pthread_mutex_unlock(&a->mu);
		free(q);
		return SG_ENOMEM;
	}
	q->lost_at = atomic_load(&a->lost);
	atomic_fetch_add(&a->queued, 1);
	if (a->tail)
		a->tail->next = q;
	else
		a->head = q;
	a->tail = q;
	/* A napping writer comes back within AUD_NAP_MS on its own; wake it
	 * early only when it sleeps for good or a batch is already large. */
	if (a->sleeping || atomic_load(&a->queued) >= AUD_WAKE_BATCH)
		pthread_cond_signal(&a->cv);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

int aud_failing(const struct aud_writer *a)
{
	return a ? atomic_load(&a->failing) : 0;
}

uint64_t aud_lost(const struct aud_writer *a)
{
	return a ? atomic_load(&a->lost) : 0;
}

uint64_t aud_written(const struct aud_writer *a)
{
	return a ? atomic_load(&a->written) : 0;
}

void aud_stats_get(const struct aud_writer *a, struct aud_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!a)
		return;
	out->written = atomic_load(&a->written);
	out->lost = atomic_load(&a->lost);
	out->rotations = atomic_load(&a->rotations);
	out->failing = atomic_load(&a->failing);
	out->chained = a->mac != NULL;
	out->syslog_sent = aud_syslog_sent(a->syslog);
	out->syslog_dropped = aud_syslog_dropped(a->syslog);
}
