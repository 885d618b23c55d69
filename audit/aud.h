/*
 * aud.h - the audit record writer.
 *
 * Workers build a record body (a JSON object without "v" and "seq") with
 * aud_rec_*() on their own stack and hand it to aud_submit(), which only
 * copies it onto a queue. One writer thread owns the file: it assigns
 * "seq" (strictly increasing, continued from the last record already in
 * the file), prefixes {"v":1,"seq":N, and writes each record with one
 * write() on an O_APPEND descriptor, then fsyncs per the configured mode.
 * So a slow disk never blocks an event loop.
 *
 * With a key (audit.key) every record ends with ,"chain":"HEX" (the chain
 * of aud_verify.h), computed in the writer thread; the chain continues
 * from the last complete record of an existing file, across rotations
 * (an audit_rotate record opens each new file) and across restarts (the
 * anchor PATH.head). Without a key records carry no chain field at all,
 * never a fake one, and aud_open() warns that they are not tamper-evident.
 *
 * If a record cannot be written (disk full, permission lost) the writer
 * keeps it and retries every 100 ms; aud_failing() turns true, and with
 * on_failure: deny the gateway refuses new connections until a write
 * succeeds again. Nothing queued is dropped, up to queue_max records;
 * past that, records are counted as lost (aud_lost()) and the next record
 * written says how many ("lost_before"), inside the chain.
 *
 * The syslog copy (audit.syslog) is handed each written line; its sender
 * runs on its own thread and can only drop, never slow the file.
 * No secret value is ever passed here; the key never leaves OpenSSL once
 * aud_open() returns.
 */
#ifndef AUD_H
#define AUD_H

#include <stddef.h>
#include <stdint.h>

#include "sg_json.h"
#include "policy/pol.h"

#define AUD_REC_MAX 4096
#define AUD_QUEUE_MAX 100000

struct aud_writer;

/* What aud_open() needs; every pointer is borrowed for the call only. */
struct aud_config {
	const char *path;               /* "-" is stdout (no chain file work) */
	enum aud_fsync_mode fsync_mode;
	const char *key_spec;           /* file:PATH | env:NAME; NULL: no chain */
	uint64_t rotate_size;           /* bytes; 0: no size rotation */
	int rotate_keep;                /* rotated files kept (PATH.1..N); 0: 10 */
	const char *syslog;             /* udp://HOST:PORT | tcp://HOST:PORT, or NULL */
	size_t queue_max;               /* 0: AUD_QUEUE_MAX (tests lower it) */
};

/* Counters for /metrics; a snapshot, each value read atomically. */
struct aud_stats {
	uint64_t written;               /* records written to the file */
	uint64_t lost;                  /* records dropped (queue full, shutdown) */
	uint64_t rotations;             /* files started by size, SIGUSR1 or restart */
	uint64_t syslog_sent, syslog_dropped;
	int failing;                    /* the last write failed */
	int chained;                    /* records carry a chain */
};

/*
 * Opens (or continues) the file, loads the key, starts the writer and the
 * syslog sender. Returns NULL with err set ("audit: ..."; never key bytes).
 */
struct aud_writer *aud_open(const struct aud_config *cfg, char *err, size_t errsz);
/* Flushes what is queued, fsyncs, writes the anchor, joins the threads. NULL ok. */
void aud_close(struct aud_writer *a);
/*
 * SIGUSR1 (logrotate renamed the file): reopen the path. If it is now
 * another file, it starts with an audit_rotate record linking the chain.
 */
void aud_reopen(struct aud_writer *a);
/* Queue one record body; it is copied. Returns 0, or SG_ENOMEM (counted lost). */
int aud_submit(struct aud_writer *a, const char *body, size_t len);
int aud_failing(const struct aud_writer *a);
uint64_t aud_lost(const struct aud_writer *a);
uint64_t aud_written(const struct aud_writer *a);
void aud_stats_get(const struct aud_writer *a, struct aud_stats *out);

/*
 * Record builder: a JSON object in a caller's buffer, with ts and event
 * written first. Finish with aud_rec_submit().
 */
struct aud_rec {
	struct sg_json j;
	char buf[AUD_REC_MAX];
};

void aud_rec_begin(struct aud_rec *r, const char *event);
/* The decision fields every record carries. */
void aud_rec_decision(struct aud_rec *r, const char *sandbox, const char *decision,
		      const char *reason, const char *rule);
int aud_rec_submit(struct aud_writer *a, struct aud_rec *r);
/* "2026-11-30T07:44:33.123456Z" */
void aud_ts_now(char *out, size_t outsz);

#endif
