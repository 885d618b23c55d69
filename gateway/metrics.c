#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "gateway/metrics.h"
#include "sg_poison.h"

void gw_metrics_init(struct gw_metrics *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->mu, NULL);
}

void gw_metrics_destroy(struct gw_metrics *m)
{
	pthread_mutex_destroy(&m->mu);
}

static uint32_t hash3(const char *a, const char *b, const char *c)
{
	uint32_t h = 2166136261u;
	const char *p;

	for (p = a; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	h = (h ^ 0xff) * 16777619u;
	for (p = b; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	h = (h ^ 0xff) * 16777619u;
	for (p = c; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h;
}

/* The row for a key, created if absent; NULL when the table is full. */
static struct gw_metric_row *row_get(struct gw_metric_row *rows, const char *sandbox,
				     const char *decision, const char *reason)
{
	size_t s = hash3(sandbox, decision, reason) % GW_METRIC_ROWS, i;

	for (i = 0; i < GW_METRIC_ROWS; i++, s = (s + 1) % GW_METRIC_ROWS) {
		struct gw_metric_row *r = &rows[s];

		if (!r->decision) {
			size_t n = strlen(sandbox);

			if (n >= sizeof(r->sandbox))
				n = sizeof(r->sandbox) - 1;
			memcpy(r->sandbox, sandbox, n);
			r->sandbox[n] = '\0';
			r->decision = decision;
			r->reason = reason;
			return r;
		}
		if (!strncmp(r->sandbox, sandbox, sizeof(r->sandbox) - 1) &&
		    !strcmp(r->decision, decision) && !strcmp(r->reason, reason))
			return r;
	}
	return NULL;
}

void gw_metrics_count(struct gw_metrics *m, const char *sandbox, const char *decision,
		      const char *reason)
{
	struct gw_metric_row *r;

	pthread_mutex_lock(&m->mu);
	r = row_get(m->rows, sandbox ? sandbox : "", decision, reason ? reason : "");
	if (r)
		r->count++;
	else
		m->overflow++;
	pthread_mutex_unlock(&m->mu);
}

void gw_metrics_label(struct sg_sbuf *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			sg_sbuf_add(out, "\\", 1);
		if (*s == '\n')
			sg_sbuf_add(out, "\\n", 2);
		else
			sg_sbuf_add(out, s, 1);
	}
}

void gw_metrics_write(struct gw_metrics *const *ms, size_t n, struct sg_sbuf *out)
{
	struct gw_metric_row *sum = calloc(GW_METRIC_ROWS, sizeof(*sum));
	uint64_t overflow = 0;
	size_t i, j;

	if (!sum) {
		out->oom = 1;
		return;
	}
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&ms[i]->mu);
		for (j = 0; j < GW_METRIC_ROWS; j++) {
			const struct gw_metric_row *r = &ms[i]->rows[j];
			struct gw_metric_row *t;

			if (!r->decision)
				continue;
			t = row_get(sum, r->sandbox, r->decision, r->reason);
			if (t)
				t->count += r->count;
			else
				overflow += r->count;
		}
		overflow += ms[i]->overflow;
		pthread_mutex_unlock(&ms[i]->mu);
	}
	sg_sbuf_puts(out, "# HELP sandgate_decisions_total Connections and requests decided, by sandbox, decision and reason.\n"
		     "# TYPE sandgate_decisions_total counter\n");
	for (j = 0; j < GW_METRIC_ROWS; j++) {
		if (!sum[j].decision)
			continue;
		sg_sbuf_puts(out, "sandgate_decisions_total{sandbox=\"");
		gw_metrics_label(out, sum[j].sandbox);
		sg_sbuf_printf(out, "\",decision=\"%s\",reason=\"", sum[j].decision);
		gw_metrics_label(out, sum[j].reason);
		sg_sbuf_printf(out, "\"} %llu\n", (unsigned long long)sum[j].count);
	}
	sg_sbuf_printf(out, "# HELP sandgate_decisions_unlabelled_total Decisions counted past the label table's size.\n"
		       "# TYPE sandgate_decisions_unlabelled_total counter\n"
		       "sandgate_decisions_unlabelled_total %llu\n", (unsigned long long)overflow);
	free(sum);
}
