#include <errno.h>
#include <fcntl.h>
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
#include "sg_poison.h"

#define BATCH_FSYNC_MS 100
#define RETRY_MS 100

struct qrec {
	struct qrec *next;
	size_t len;
	char body[];            /* a JSON object: {"ts":...} */
};

struct aud_writer {
	char *path;                     /* owned; NULL for stdout */
	int fd;
	enum aud_fsync_mode fsync_mode;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct qrec *head, *tail;       /* owned queue */
	size_t qlen;
	atomic_int stop;
	int reopen;
	uint64_t seq;                   /* last seq written */
	atomic_int failing;
	atomic_uint_fast64_t lost, written;
	uint64_t lost_reported;         /* lost count already announced in a record */
};

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

/*
 * The last seq already in the file, so a restarted gateway continues the
 * sequence: read the tail, find the last complete line, take its "seq".
 */
static uint64_t last_seq_in(int fd)
{
	char buf[8192];
	off_t size = lseek(fd, 0, SEEK_END);
	off_t off = size > (off_t)sizeof(buf) ? size - (off_t)sizeof(buf) : 0;
	ssize_t n;
	char *end, *line, *p;

	if (size <= 0)
		return 0;
	n = pread(fd, buf, sizeof(buf) - 1, off);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	end = buf + n;
	while (end > buf && end[-1] == '\n')
		end--;
	*end = '\0';
	line = memrchr(buf, '\n', (size_t)(end - buf));
	line = line ? line + 1 : buf;
	p = strstr(line, "\"seq\":");
	return p ? strtoull(p + 6, NULL, 10) : 0;
}

static int open_file(struct aud_writer *a)
{
	int fd;

	if (!a->path) {
		a->fd = STDOUT_FILENO;
		return 0;
	}
	fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	if (a->fd > STDERR_FILENO)
		close(a->fd);
	a->fd = fd;
	return 0;
}

/* Write one whole record; a short write is completed, never left torn. */
static int write_rec(struct aud_writer *a, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(a->fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int emit(struct aud_writer *a, struct qrec *q)
{
	char line[AUD_REC_MAX + 64];
	int hl;
	uint64_t lost = atomic_load(&a->lost);

	/* {"v":1,"seq":N, + the body without its "{" */
	hl = snprintf(line, sizeof(line), "{\"v\":1,\"seq\":%llu,",
		      (unsigned long long)(a->seq + 1));
	if (q->len < 2 || (size_t)hl + q->len + 32 > sizeof(line))
		return 0;                       /* malformed body: skip (never happens) */
	memcpy(line + hl, q->body + 1, q->len - 1);
	hl += (int)q->len - 1;
	if (lost != a->lost_reported) {
		/* Say in the log itself that records went missing. */
		hl--;                           /* reopen the object */
		hl += snprintf(line + hl, sizeof(line) - (size_t)hl,
			       ",\"lost_before\":%llu}",
			       (unsigned long long)(lost - a->lost_reported));
	}
	line[hl++] = '\n';
	if (write_rec(a, line, (size_t)hl) < 0)
		return -1;
	a->lost_reported = lost;
	a->seq++;
	atomic_fetch_add(&a->written, 1);
	return 0;
}

static void *writer_main(void *arg)
{
	struct aud_writer *a = arg;
	int dirty = 0, give_up = 0;
	struct timespec last_sync;

	clock_gettime(CLOCK_MONOTONIC, &last_sync);
	pthread_mutex_lock(&a->mu);
	for (;;) {
		struct qrec *batch;
		struct timespec now;

		while (!a->head && !a->stop && !a->reopen) {
			if (dirty && a->fsync_mode == AUD_FSYNC_BATCH) {
				struct timespec dl;

				clock_gettime(CLOCK_REALTIME, &dl);
				dl.tv_nsec += BATCH_FSYNC_MS * 1000000L;
				if (dl.tv_nsec >= 1000000000L) {
					dl.tv_sec++;
					dl.tv_nsec -= 1000000000L;
				}
				if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT)
					break;
			} else {
				pthread_cond_wait(&a->cv, &a->mu);
			}
		}
		if (a->reopen) {
			a->reopen = 0;
			if (open_file(a) < 0)
				sg_err("audit: reopen %s: %s", a->path, strerror(errno));
		}
		batch = a->head;
		a->head = a->tail = NULL;
		a->qlen = 0;
		pthread_mutex_unlock(&a->mu);

		while (batch) {
			struct qrec *q = batch;

			if (emit(a, q) < 0) {
				int e = errno;

				if (!atomic_exchange(&a->failing, 1))
					sg_err("audit: write %s: %s; retrying",
					       a->path ? a->path : "stdout", strerror(e));
				/* Keep the record and everything after it; retry.
				 * On shutdown give up after ~5 s and count the rest. */
				if (atomic_load(&a->stop) && ++give_up > 50) {
					while (batch) {
						q = batch;
						batch = q->next;
						free(q);
						atomic_fetch_add(&a->lost, 1);
					}
					break;
				}
				usleep(RETRY_MS * 1000);
				continue;
			}
			if (atomic_exchange(&a->failing, 0))
				sg_info("audit: writing again");
			batch = q->next;
			free(q);
			dirty = 1;
			if (a->fsync_mode == AUD_FSYNC_ALWAYS)
				fdatasync(a->fd);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (dirty && a->fsync_mode == AUD_FSYNC_BATCH &&
		    ((now.tv_sec - last_sync.tv_sec) * 1000 +
		     (now.tv_nsec - last_sync.tv_nsec) / 1000000 >= BATCH_FSYNC_MS || a->stop)) {
			fdatasync(a->fd);
			last_sync = now;
			dirty = 0;
		}
		pthread_mutex_lock(&a->mu);
		if (a->stop && !a->head)
			break;
	}
	pthread_mutex_unlock(&a->mu);
	if (dirty && a->fsync_mode != AUD_FSYNC_NEVER)
		fdatasync(a->fd);
	return NULL;
}

struct aud_writer *aud_open(const char *path, enum aud_fsync_mode fsync_mode,
			    char *err, size_t errsz)
{
	struct aud_writer *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		goto oom;
	a->fd = -1;
	a->fsync_mode = fsync_mode;
	if (path && strcmp(path, "-")) {
		a->path = strdup(path);
		if (!a->path)
			goto oom;
	}
	rc = open_file(a);
	if (rc < 0) {
		snprintf(err, errsz, "audit: open %s: %s", path, strerror(-rc));
		goto fail;
	}
	if (a->path)
		a->seq = last_seq_in(a->fd);
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	if (pthread_create(&a->thread, NULL, writer_main, a)) {
		snprintf(err, errsz, "audit: cannot start the writer thread");
		goto fail;
	}
	return a;
oom:
	snprintf(err, errsz, "audit: out of memory");
fail:
	if (a) {
		if (a->fd > STDERR_FILENO)
			close(a->fd);
		free(a->path);
		free(a);
	}
	return NULL;
}

void aud_close(struct aud_writer *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->mu);
	a->stop = 1;
	pthread_cond_signal(&a->cv);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->thread, NULL);
	if (a->fd > STDERR_FILENO)
		close(a->fd);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	free(a->path);
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
	struct qrec *q;

	q = malloc(sizeof(*q) + len);
	if (!q) {
		atomic_fetch_add(&a->lost, 1);
		return SG_ENOMEM;
	}
	q->next = NULL;
	q->len = len;
	memcpy(q->body, body, len);
	pthread_mutex_lock(&a->mu);
	if (a->qlen >= AUD_QUEUE_MAX) {
		/* The disk has been failing for a long time: bound memory. */
		pthread_mutex_unlock(&a->mu);
		free(q);
		atomic_fetch_add(&a->lost, 1);
		return SG_ENOMEM;
	}
	if (a->tail)
		a->tail->next = q;
	else
		a->head = q;
	a->tail = q;
	a->qlen++;
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
