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
 * If a record cannot be written (disk full, permission lost) the writer
 * keeps it at the head of the queue and retries every 100 ms;
 * aud_failing() turns true, and with on_failure: deny the gateway
 * refuses new connections until a write succeeds again. Nothing queued
 * is dropped, up to AUD_QUEUE_MAX records; past that, records are counted
 * as lost (aud_lost()) and the next written record says how many.
 *
 * The hash chain ("chain") arrives with the audit issue; until then the
 * field is absent, never faked. No secret value is ever passed here.
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

/* path "-" is stdout. Returns NULL with err set. */
struct aud_writer *aud_open(const char *path, enum aud_fsync_mode fsync_mode,
			    char *err, size_t errsz);
/* Flushes what is queued, fsyncs, joins the thread. NULL ok. */
void aud_close(struct aud_writer *a);
/* Reopen the file (SIGUSR1, logrotate). */
void aud_reopen(struct aud_writer *a);
/* Queue one record body; it is copied. Returns 0, or SG_ENOMEM (counted lost). */
int aud_submit(struct aud_writer *a, const char *body, size_t len);
int aud_failing(const struct aud_writer *a);
uint64_t aud_lost(const struct aud_writer *a);
uint64_t aud_written(const struct aud_writer *a);

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
