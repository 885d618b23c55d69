/*
 * metrics.h - decision counters for /metrics, kept per worker.
 *
 * Each worker counts into its own table under its own mutex (uncontended
 * except while the control API reads it), so counting costs a hash probe
 * and no shared cache line. Rows are keyed by sandbox (the policy's
 * sandbox key, a bounded set, never a run-time registered name, so
 * label cardinality stays bounded), decision and reason (static strings).
 */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "sg_sbuf.h"

#define GW_METRIC_ROWS 1024
#define GW_METRIC_SBX 128

struct gw_metric_row {
	char sandbox[GW_METRIC_SBX];
	const char *decision;   /* static */
	const char *reason;     /* static */
	uint64_t count;
};

struct gw_metrics {
	pthread_mutex_t mu;
	struct gw_metric_row rows[GW_METRIC_ROWS];
	uint64_t overflow;      /* counts that found no free row */
};

void gw_metrics_init(struct gw_metrics *m);
void gw_metrics_destroy(struct gw_metrics *m);
void gw_metrics_count(struct gw_metrics *m, const char *sandbox, const char *decision,
		      const char *reason);
/* A Prometheus label value: \, " and newline escaped. */
void gw_metrics_label(struct sg_sbuf *out, const char *s);
/* Sum the tables of n workers and write them as Prometheus text. */
void gw_metrics_write(struct gw_metrics *const *ms, size_t n, struct sg_sbuf *out);

#endif
