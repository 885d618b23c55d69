/*
 * aud_report.c - `sandgate audit report [--key SPEC] --html OUT [filters] FILE...`
 *
 * Writes one self-contained HTML page for a reviewer: the verification
 * status of the chain (aud_verify_files), summary counts, connections over
 * time per sandbox, the top allowed and denied destinations, every secret
 * violation and every policy reload. No network: inline CSS, charts drawn
 * here as inline SVG, no script at all, and a Content-Security-Policy that
 * forbids fetching anything, so even a bug in the escaping below could not
 * make the page call out or run code.
 *
 * Every string taken from the log is attacker-influenced (host names, SNI,
 * paths, error texts): it goes through html_text() - control and bidi
 * characters replaced, & < > " ' escaped - and nowhere else.
 *
 * The page is built in memory and renamed over OUT, so a reviewer never
 * opens half a report. Exit: 0 written (verified, or no key given), 1
 * written but the chain did not verify / the key did not load / a file
 * could not be read or held invalid lines (or OUT could not be written),
 * 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "audit/aud_chain.h"
#include "audit/aud_cmd.h"
#include "audit/aud_jsonl.h"
#include "audit/aud_verify.h"
#include "policy/pol.h"
#include "sg_poison.h"

#define TOP_N 10
#define SERIES_MAX 8            /* sandboxes with their own colour; the rest are "other" */
#define BUCKETS_MAX 60
#define ROWS_MAX 10000          /* per table: a flood of violations must not make a 1 GB page */
#define CELL_MAX 300            /* code points shown of one table cell */

/* ---- a growable buffer -------------------------------------------------- */

struct sbuf {
	char *p;                /* owned */
	size_t len, cap;
	int oom;                /* latched: every later call is a no-op */
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->cap - b->len < n + 1) {
		size_t nc = b->cap ? b->cap : 65536;
		char *np;

		while (nc - b->len < n + 1)
			nc *= 2;
		np = realloc(b->p, nc);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

/* Only for our own markup and numbers: never a string from the log. */
__attribute__((format(printf, 2, 3)))
static void sb_fmt(struct sbuf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->oom = 1;     /* a programming error: our fragments are short */
		return;
	}
	sb_put(b, tmp, (size_t)n);
}

/*
 * Text from the log as HTML character data or a quoted attribute value:
 * cleaned (aud_text_clean), cut to max_cols code points, then & < > " '
 * as entities (HTML 13.1.2.6 lists no other character that ends text or
 * a quoted attribute).
 */
static void html_text(struct sbuf *b, const char *s, size_t n, size_t max_cols)
{
	char stack[1024], *tmp = stack, *p;
	size_t cap = SG_MIN(n, max_cols) * 4 + 8, run;

	if (cap > sizeof(stack)) {
		tmp = malloc(cap);
		if (!tmp) {
			b->oom = 1;
			return;
		}
	}
	aud_text_clean(s, n, max_cols, tmp, cap);
	for (p = tmp; *p; p += run) {
		run = strcspn(p, "&<>\"'");
		sb_put(b, p, run);
		switch (p[run]) {
		case '&': sb_str(b, "&amp;"); break;
		case '<': sb_str(b, "&lt;"); break;
		case '>': sb_str(b, "&gt;"); break;
		case '"': sb_str(b, "&quot;"); break;
		case '\'': sb_str(b, "&#39;"); break;
		default: continue;      /* the terminating NUL */
		}
		run++;
	}
	if (tmp != stack)
		free(tmp);
}

static void html_cstr(struct sbuf *b, const char *s, size_t max_cols)
{
	html_text(b, s, strlen(s), max_cols);
}

/* A field, or an em dash for null / absent. */
static void html_field(struct sbuf *b, const struct aud_str *s)
{
	if (s->p && s->n)
		html_text(b, s->p, s->n, CELL_MAX);
	else
		sb_str(b, "<span class=\"none\">\xe2\x80\x94</span>");
}

/* ---- aggregation -------------------------------------------------------- */

struct pt {
	int64_t ts_us;
	uint32_t sbx;           /* index into r_ctx.sandboxes */
};

struct r_ctx {
	const struct aud_filter *f;
	const char *file;
	char *scratch;                  /* owned */
	uint64_t bad, unreadable;
	char first_bad[600];
	int oom;
	uint64_t records, traffic, allowed, denied, would_deny;
	uint64_t reload_ok, reload_bad;
	int64_t first_us, last_us;
	struct aud_tally sandboxes;     /* every sandbox seen: count = traffic records */
	struct aud_tally allow_dst;     /* aux[0] bytes up, aux[1] bytes down */
	struct aud_tally deny_dst;      /* aux[0] would_deny; note = latest reason */
	struct pt *pts;                 /* owned: traffic records for the time chart */
	size_t npts, pts_cap;
	struct sbuf violations, reloads;        /* <tr> rows, already escaped */
	uint64_t n_violations, n_reloads;
};

static int is_traffic(const struct aud_recv *r)
{
	return (r->event.n == 10 && !memcmp(r->event.p, "connection", 10)) ||
	       (r->event.n == 7 && !memcmp(r->event.p, "request", 7));
}

static int str_is(const struct aud_str *s, const char *lit)
{
	return s->p && s->n == strlen(lit) && !memcmp(s->p, lit, s->n);
}

/* "2026-11-30 07:55:19" (UTC) */
static void fmt_ts(int64_t us, char *out, size_t outsz)
{
	time_t sec = (time_t)(us >= 0 ? us / 1000000 : (us - 999999) / 1000000);
	struct tm tm;

	if (!gmtime_r(&sec, &tm))
		snprintf(out, outsz, "?");
	else
		strftime(out, outsz, "%Y-%m-%d %H:%M:%S", &tm);
}

static void html_dest(struct sbuf *b, const struct aud_recv *r)
{
	const struct aud_str *h = r->dst_host.p ? &r->dst_host : &r->dst_ip;

	html_field(b, h);
	if (r->dst_port >= 0)
		sb_fmt(b, ":%" PRId64, r->dst_port);
}

static void row_violation(struct r_ctx *c, const struct aud_recv *r)
{
	struct sbuf *b = &c->violations;
	struct aud_jval e;
	char ts[40], name[512];
	size_t off = 0;
	int first = 1, n;

	if (++c->n_violations > ROWS_MAX)
		return;
	fmt_ts(r->ts_us, ts, sizeof(ts));
	sb_fmt(b, "<tr><td class=\"t\">%s</td><td>", ts);
	html_field(b, &r->sandbox);
	sb_str(b, "</td><td>");
	if (r->secret.p) {
		html_field(b, &r->secret);
		first = 0;
	}
	while (r->secrets.type == AUD_J_ARRAY && aud_jsonl_arr_next(&r->secrets, &off, &e) == 1) {
		n = e.n < sizeof(name) ? aud_jsonl_str(&e, name, sizeof(name)) : -1;
		if (!first)
			sb_str(b, ", ");
		if (n >= 0)
			html_text(b, name, (size_t)n, CELL_MAX);
		else
			sb_str(b, "\xe2\x80\xa6");
		first = 0;
	}
	if (first)
		sb_str(b, "<span class=\"none\">\xe2\x80\x94</span>");
	sb_str(b, "</td><td>");
	html_dest(b, r);
	sb_str(b, "</td><td>");
	if (r->method.p || r->path.p) {
		if (r->method.p) {
			html_text(b, r->method.p, r->method.n, 16);
			sb_str(b, " ");
		}
		if (r->path.p)
			html_text(b, r->path.p, r->path.n, CELL_MAX);
	} else {
		sb_str(b, "<span class=\"none\">\xe2\x80\x94</span>");
	}
	sb_str(b, "</td><td>");
	html_field(b, &r->decision);
	sb_str(b, "</td><td>");
	html_field(b, &r->reason);
	sb_str(b, "</td></tr>\n");
}

static void row_reload(struct r_ctx *c, const struct aud_recv *r)
{
	struct sbuf *b = &c->reloads;
	char ts[40];
	int ok = str_is(&r->decision, "allow");

	if (ok)
		c->reload_ok++;
	else
		c->reload_bad++;
	if (++c->n_reloads > ROWS_MAX)
		return;
	fmt_ts(r->ts_us, ts, sizeof(ts));
	sb_fmt(b, "<tr class=\"%s\"><td class=\"t\">%s</td><td>", ok ? "ok" : "bad", ts);
	html_field(b, &r->decision);
	sb_str(b, "</td><td>");
	html_field(b, &r->reason);
	sb_str(b, "</td><td class=\"err\">");
	html_field(b, &r->error);
	sb_str(b, "</td></tr>\n");
}

static const struct aud_str no_dst = { "(no destination)", 16 };

static int add_traffic(struct r_ctx *c, const struct aud_recv *r)
{
	const struct aud_str *h = r->dst_host.p ? &r->dst_host : &r->dst_ip;
	const char *sb = r->sandbox.p ? r->sandbox.p : "(unknown source)";
	size_t sbn = r->sandbox.p ? r->sandbox.n : strlen(sb);
	long si, di;
	struct aud_tally_ent *e;

	c->traffic++;
	si = aud_tally_add(&c->sandboxes, sb, sbn, 1);
	if (si < 0)
		return SG_ENOMEM;
	if (c->npts == c->pts_cap) {
		size_t nc = c->pts_cap ? c->pts_cap * 2 : 1024;
		struct pt *np = realloc(c->pts, nc * sizeof(*np));

		if (!np)
			return SG_ENOMEM;
		c->pts = np;
		c->pts_cap = nc;
	}
	c->pts[c->npts].ts_us = r->ts_us;
	c->pts[c->npts].sbx = (uint32_t)si;
	c->npts++;
	if (!h->p)
		h = &no_dst;
	if (str_is(&r->decision, "allow")) {
		c->allowed++;
		di = aud_tally_add(&c->allow_dst, h->p, h->n, 1);
		if (di < 0)
			return SG_ENOMEM;
		e = &c->allow_dst.ents[di];
		e->aux[0] += r->bytes_up > 0 ? (uint64_t)r->bytes_up : 0;
		e->aux[1] += r->bytes_down > 0 ? (uint64_t)r->bytes_down : 0;
	} else {
		int would = str_is(&r->decision, "would_deny");

		if (would)
			c->would_deny++;
		else
			c->denied++;
		di = aud_tally_add(&c->deny_dst, h->p, h->n, 1);
		if (di < 0)
			return SG_ENOMEM;
		e = &c->deny_dst.ents[di];
		e->aux[0] += (uint64_t)would;
		if (r->reason.p && (!e->note || strlen(e->note) != r->reason.n ||
				    memcmp(e->note, r->reason.p, r->reason.n)) &&
		    aud_tally_note(e, r->reason.p, r->reason.n) < 0)
			return SG_ENOMEM;
	}
	return 0;
}

/*
 * One line: counted in the summary, and for connection/request records in
 * the time chart and the destination lists. Only the first invalid line
 * is kept for the page; stderr gets the same.
 */
static int r_line(void *ctx, const char *line, size_t len, int nl, uint64_t lineno)
{
	struct r_ctx *c = ctx;
	struct aud_recv r;
	const char *why = "line longer than 64 KiB";

	if (!line || aud_recv_parse(line, len, &r, c->scratch, AUD_JSONL_LINE_MAX + 1, &why) < 0) {
		if (!c->bad++)
			snprintf(c->first_bad, sizeof(c->first_bad), "%s:%" PRIu64 ": %s%s", c->file,
				 lineno, why, nl ? "" : " (last line, no newline)");
		return 0;
	}
	if (!aud_filter_match(c->f, &r))
		return 0;
	c->records++;
	if (c->records == 1 || r.ts_us < c->first_us)
		c->first_us = r.ts_us;
	if (c->records == 1 || r.ts_us > c->last_us)
		c->last_us = r.ts_us;
	if (is_traffic(&r) && add_traffic(c, &r) < 0) {
		c->oom = 1;
		return SG_ENOMEM;
	}
	if (str_is(&r.event, "secret_violation"))
		row_violation(c, &r);
	else if (str_is(&r.event, "policy_reload"))
		row_reload(c, &r);
	if (c->violations.oom || c->reloads.oom) {
		c->oom = 1;
		return SG_ENOMEM;
	}
	return 0;
}

/* ---- charts ------------------------------------------------------------- */

/* Colour-blind-safe palette (Okabe-Ito), then grey for "other". */
static const char *const palette[SERIES_MAX + 1] = {
	"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
	"#000000", "#999999",
};

/* The grid step: 1, 2 or 5 x 10^k, so that max needs at most four steps. */
static uint64_t nice_step(uint64_t max)
{
	uint64_t p = 1;

	for (;;) {
		if (max <= p * 4)
			return p;
		if (max <= p * 8)
			return p * 2;
		if (max <= p * 20 || p > UINT64_MAX / 100)
			return p * 5;
		p *= 10;
	}
}

static const struct { int64_t sec; const char *label; } steps[] = {
	{ 60, "minute" }, { 120, "2 minutes" }, { 300, "5 minutes" }, { 600, "10 minutes" },
	{ 900, "15 minutes" }, { 1800, "30 minutes" }, { 3600, "hour" }, { 7200, "2 hours" },
	{ 10800, "3 hours" }, { 21600, "6 hours" }, { 43200, "12 hours" }, { 86400, "day" },
	{ 172800, "2 days" }, { 604800, "7 days" }, { 1209600, "14 days" },
	{ 2592000, "30 days" }, { 7776000, "90 days" }, { 31536000, "365 days" },
};

/* Bucket label: the unit decides how much of the date is worth showing. */
static void bucket_label(int64_t sec, int64_t step, char *out, size_t outsz)
{
	time_t t = (time_t)sec;
	struct tm tm;

	if (!gmtime_r(&t, &tm)) {
		snprintf(out, outsz, "?");
		return;
	}
	strftime(out, outsz, step < 3600 ? "%H:%M" : step < 86400 ? "%m-%d %H:00" : "%Y-%m-%d",
		 &tm);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/*
 * Stacked bars of traffic records per time bucket, one colour per
 * sandbox (the SERIES_MAX busiest; the rest together as "other"). The
 * step is the smallest of steps[] that keeps the chart within
 * BUCKETS_MAX bars, aligned on UTC multiples of itself.
 */
static void chart_time(struct sbuf *b, const struct r_ctx *c)
{
	uint64_t cnt[BUCKETS_MAX + 1][SERIES_MAX + 1];
	const double W = 1100, H = 300, L = 56, R = 12, T = 12, B = 44;
	size_t *order = NULL, nseries, i, k, nb, s;
	uint32_t *series_of = NULL;
	int64_t first = INT64_MAX, last = INT64_MIN, step = 0, base;
	uint64_t max = 0, ystep, ymax, tot;
	double bw, x, y, h;
	char lab[64], from[40], to[40], unit[40];

	if (!c->npts) {
		sb_str(b, "<p class=\"empty\">No connections or requests in these records.</p>\n");
		return;
	}
	for (i = 0; i < c->npts; i++) {
		first = SG_MIN(first, c->pts[i].ts_us / 1000000);
		last = SG_MAX(last, c->pts[i].ts_us / 1000000);
	}
	for (k = 0; k < SG_ARRAY_LEN(steps); k++) {
		step = steps[k].sec;
		if (floor_div(last, step) - floor_div(first, step) + 1 <= BUCKETS_MAX)
			break;
	}
	if (k == SG_ARRAY_LEN(steps)) {
		/* centuries of records (or forged times): whole days, 60 bars */
		step = ((last - first) / BUCKETS_MAX / 86400 + 1) * 86400;
		snprintf(unit, sizeof(unit), "%" PRId64 " days", step / 86400);
	} else {
		snprintf(unit, sizeof(unit), "%s", steps[k].label);
	}
	base = floor_div(first, step) * step;
	nb = (size_t)SG_MIN(floor_div(last, step) - floor_div(first, step) + 1, BUCKETS_MAX);
	if (aud_tally_sorted(&c->sandboxes, &order) < 0 ||
	    !(series_of = calloc(c->sandboxes.len + 1, sizeof(*series_of)))) {
		free(order);
		sb_str(b, "<p class=\"empty\">Out of memory drawing the chart.</p>\n");
		return;
	}
	nseries = SG_MIN(c->sandboxes.len, (size_t)SERIES_MAX);
	for (i = 0; i < c->sandboxes.len; i++)
		series_of[order[i]] = (uint32_t)SG_MIN(i, (size_t)SERIES_MAX);
	memset(cnt, 0, sizeof(cnt));
	for (i = 0; i < c->npts; i++) {
		int64_t bi = floor_div(c->pts[i].ts_us / 1000000 - base, step);

		if (bi >= 0 && (size_t)bi < nb)
			cnt[bi][series_of[c->pts[i].sbx]]++;
	}
	for (i = 0; i < nb; i++) {
		for (tot = 0, s = 0; s <= SERIES_MAX; s++)
			tot += cnt[i][s];
		max = SG_MAX(max, tot);
	}
	ystep = nice_step(max);
	ymax = SG_MAX((max + ystep - 1) / ystep * ystep, ystep);
	fmt_ts(first * 1000000, from, sizeof(from));
	fmt_ts(last * 1000000, to, sizeof(to));
	sb_fmt(b, "<p class=\"cap\">Connections and requests per %s (UTC), %s to %s.</p>\n",
	       unit, from, to);
	/* legend as HTML: names are escaped text, not SVG geometry */
	sb_str(b, "<div class=\"legend\">");
	for (s = 0; s < nseries; s++) {
		sb_fmt(b, "<span><i style=\"background:%s\"></i>", palette[s]);
		html_text(b, c->sandboxes.ents[order[s]].key, c->sandboxes.ents[order[s]].n, 60);
		sb_str(b, "</span>");
	}
	if (c->sandboxes.len > SERIES_MAX)
		sb_fmt(b, "<span><i style=\"background:%s\"></i>other (%zu sandboxes)</span>",
		       palette[SERIES_MAX], c->sandboxes.len - SERIES_MAX);
	sb_str(b, "</div>\n");
	sb_fmt(b, "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
	       "aria-label=\"connections over time per sandbox\">\n", W, H);
	for (tot = 0; tot <= ymax; tot += ystep) {
		y = T + (H - T - B) * (1 - (double)tot / (double)ymax);
		sb_fmt(b, "<line class=\"grid\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\"/>"
		       "<text class=\"ax\" x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%" PRIu64 "</text>\n",
		       L, W - R, y, y, L - 6, y + 4, tot);
	}
	/* bars fill 80% of their slot, stacked bottom-up in legend order */
	bw = (W - L - R) / (double)nb;
	for (i = 0; i < nb; i++) {
		x = L + bw * (double)i;
		y = H - B;
		for (s = 0; s <= SERIES_MAX; s++) {
			if (!cnt[i][s])
				continue;
			h = (H - T - B) * (double)cnt[i][s] / (double)ymax;
			y -= h;
			bucket_label(base + (int64_t)i * step, step, lab, sizeof(lab));
			sb_fmt(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			       "fill=\"%s\"><title>", x + bw * 0.1, y, bw * 0.8, h, palette[s]);
			if (s < SERIES_MAX)
				html_text(b, c->sandboxes.ents[order[s]].key,
					  c->sandboxes.ents[order[s]].n, 60);
			else
				sb_str(b, "other");
			sb_fmt(b, ": %" PRIu64 " at %s</title></rect>\n", cnt[i][s], lab);
		}
	}
	/* about eight labels whatever the number of bars */
	for (i = 0; i < nb; i += (nb + 7) / 8) {
		bucket_label(base + (int64_t)i * step, step, lab, sizeof(lab));
		sb_fmt(b, "<text class=\"ax\" x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
		       L + bw * ((double)i + 0.5), H - B + 18, lab);
	}
	sb_fmt(b, "<line class=\"axis\" x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\"/>\n</svg>\n",
	       L, W - R, H - B, H - B);
	free(order);
	free(series_of);
}

/* A byte count as a table cell: binary units, the exact count on hover. */
static void sb_bytes(struct sbuf *b, uint64_t n)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	size_t u = 0;

	while (v >= 1024 && u + 1 < SG_ARRAY_LEN(unit)) {
		v /= 1024;
		u++;
	}
	if (!u)
		sb_fmt(b, "<td class=\"n\">%" PRIu64 " B</td>", n);
	else
		sb_fmt(b, "<td class=\"n\" title=\"%" PRIu64 " bytes\">%.1f %s</td>", n, v, unit[u]);
}

/* Horizontal bars for the first TOP_N destinations of t, then a table. */
static void top_list(struct sbuf *b, const struct aud_tally *t, int denied)
{
	const double W = 540, L = 210, R = 56, RowH = 24;
	size_t *order = NULL, n, i;
	double w;

	/* an empty state is stated, so "nothing denied" is not mistaken for
	 * "the report is broken" */
	if (!t->len) {
		sb_fmt(b, "<p class=\"empty\">No %s connections in these records.</p>\n",
		       denied ? "denied" : "allowed");
		return;
	}
	if (aud_tally_sorted(t, &order) < 0) {
		b->oom = 1;
		return;
	}
	n = SG_MIN(t->len, (size_t)TOP_N);
	sb_fmt(b, "<svg class=\"bars\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
	       "aria-label=\"top %s destinations\">\n", W, RowH * (double)n + 4,
	       denied ? "denied" : "allowed");
	for (i = 0; i < n; i++) {
		const struct aud_tally_ent *e = &t->ents[order[i]];
		double y = RowH * (double)i + 2;

		/* scaled to the first (largest) entry; at least 1 px so a count
		 * of 1 beside a count of 100,000 is still visible */
		w = (W - L - R) * (double)e->count / (double)t->ents[order[0]].count;
		sb_fmt(b, "<text class=\"lab\" x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", L - 8,
		       y + RowH * 0.65);
		html_text(b, e->key, e->n, 30);
		sb_fmt(b, "</text><rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
		       "fill=\"%s\"/><text class=\"ax\" x=\"%.1f\" y=\"%.1f\">%" PRIu64 "</text>\n",
		       L, y + 3, w < 1 ? 1 : w, RowH - 6, denied ? "#cf222e" : "#1a7f37",
		       L + w + 6, y + RowH * 0.65, e->count);
	}
	sb_str(b, "</svg>\n<table class=\"top\"><thead><tr><th>#</th><th>destination</th>"
	       "<th class=\"n\">count</th>");
	sb_str(b, denied ? "<th class=\"n\" title=\"allowed in audit mode\">would_deny</th>"
			   "<th>latest reason</th>" :
			   "<th class=\"n\">bytes up</th><th class=\"n\">bytes down</th>");
	sb_str(b, "</tr></thead><tbody>\n");
	for (i = 0; i < n; i++) {
		const struct aud_tally_ent *e = &t->ents[order[i]];

		sb_fmt(b, "<tr><td class=\"n\">%zu</td><td class=\"dst\">", i + 1);
		html_text(b, e->key, e->n, CELL_MAX);
		sb_fmt(b, "</td><td class=\"n\">%" PRIu64 "</td>", e->count);
		if (denied) {
			sb_fmt(b, "<td class=\"n\">%" PRIu64 "</td><td>", e->aux[0]);
			if (e->note)
				html_cstr(b, e->note, 60);
			sb_str(b, "</td></tr>\n");
		} else {
			sb_bytes(b, e->aux[0]);
			sb_bytes(b, e->aux[1]);
			sb_str(b, "</tr>\n");
		}
	}
	sb_str(b, "</tbody></table>\n");
	if (t->len > n)
		sb_fmt(b, "<p class=\"cap\">%zu destinations in all.</p>\n", t->len);
	free(order);
}

/* ---- the page ----------------------------------------------------------- */

static const char css[] =
	"*{box-sizing:border-box}"
	"body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
	"color:#1f2328;background:#f6f8fa;margin:0;padding:24px 32px}"
	"h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;"
	"border-bottom:1px solid #d0d7de;padding-bottom:4px}"
	".meta{color:#59636e;margin:0 0 14px;word-break:break-all}"
	".status{font-size:16px;font-weight:600;padding:12px 16px;border-radius:6px;"
	"border:1px solid;margin:12px 0;word-break:break-word}"
	".status.green{background:#dafbe1;border-color:#1a7f37;color:#116329}"
	".status.red{background:#ffebe9;border-color:#cf222e;color:#a40e26}"
	".status.amber{background:#fff8c5;border-color:#9a6700;color:#7d4e00}"
	".cards{display:flex;flex-wrap:wrap;gap:10px}"
	".card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;"
	"min-width:130px}.card b{display:block;font-size:20px}.card span{color:#59636e}"
	".card.deny b{color:#cf222e}.card.allow b{color:#1a7f37}.card.would b{color:#9a6700}"
	".panel{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px}"
	".two{display:grid;grid-template-columns:1fr 1fr;gap:16px}"
	"@media (max-width:900px){.two{grid-template-columns:1fr}}"
	"svg{display:block;width:100%;height:auto}"
	"svg text{font-size:12px;fill:#1f2328}svg .ax{fill:#59636e;font-size:11px}"
	"svg .grid{stroke:#d0d7de;stroke-width:1}svg .axis{stroke:#59636e;stroke-width:1}"
	".legend{display:flex;flex-wrap:wrap;gap:14px;margin:4px 0 8px;word-break:break-all}"
	".legend i{display:inline-block;width:11px;height:11px;margin-right:5px;"
	"vertical-align:-1px;border-radius:2px}"
	"table{border-collapse:collapse;width:100%;margin-top:8px;background:#fff}"
	"th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eaeef2;"
	"vertical-align:top}td{overflow-wrap:anywhere}td.dst{min-width:12em}"
	"th{background:#f6f8fa;font-weight:600;white-space:nowrap}td.n,th.n{text-align:right;"
	"white-space:nowrap;"
	"font-variant-numeric:tabular-nums}td.t{white-space:nowrap;"
	"font-variant-numeric:tabular-nums}"
	"tr.bad td{background:#fff5f5}td.err{font-family:ui-monospace,'DejaVu Sans Mono',monospace;"
	"font-size:12.5px}"
	".cap{color:#59636e;margin:4px 0}.empty{color:#59636e;font-style:italic}"
	".none{color:#8c959f}";

static void card(struct sbuf *b, const char *cls, uint64_t n, const char *what)
{
	sb_fmt(b, "<div class=\"card %s\"><b>%" PRIu64 "</b><span>%s</span></div>", cls, n, what);
}

static void page(struct sbuf *b, struct r_ctx *c, const char *const *files, size_t nfiles,
		 const char *status_cls, const char *status, char **filter_argv,
		 size_t nfilter)
{
	char now[40], from[40], to[40];
	size_t i;

	fmt_ts(aud_now_us(), now, sizeof(now));
	sb_str(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	       /* defence in depth: nothing may be fetched or run, whatever the data */
	       "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	       "style-src 'unsafe-inline'; img-src data:\">\n"
	       "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
	       "<title>sandgate audit report</title>\n<style>");
	sb_str(b, css);
	sb_str(b, "</style></head><body>\n<h1>sandgate audit report</h1>\n<p class=\"meta\">");
	sb_fmt(b, "Generated %s UTC from ", now);
	for (i = 0; i < nfiles; i++) {
		if (i)
			sb_str(b, ", ");
		sb_str(b, "<code>");
		html_cstr(b, files[i], CELL_MAX);
		sb_str(b, "</code>");
	}
	if (nfilter) {
		sb_str(b, ". Filters:");
		for (i = 0; i < nfilter; i++) {
			sb_str(b, " <code>");
			html_cstr(b, filter_argv[i], CELL_MAX);
			sb_str(b, "</code>");
		}
	}
	sb_str(b, ".</p>\n");
	sb_fmt(b, "<div class=\"status %s\" id=\"verify\">", status_cls);
	html_cstr(b, status, 600);
	sb_str(b, "</div>\n");
	if (c->bad) {
		sb_fmt(b, "<div class=\"status red\" id=\"invalid\">%" PRIu64 " problem%s reading "
		       "the files (invalid lines are left out); first: ", c->bad,
		       c->bad == 1 ? "" : "s");
		html_cstr(b, c->first_bad, 600);
		sb_str(b, "</div>\n");
	}

	sb_str(b, "<h2>Summary</h2>\n");
	if (c->records) {
		fmt_ts(c->first_us, from, sizeof(from));
		fmt_ts(c->last_us, to, sizeof(to));
		sb_fmt(b, "<p class=\"cap\">Records from %s to %s UTC.</p>\n", from, to);
	}
	sb_str(b, "<div class=\"cards\">");
	card(b, "", c->records, "records");
	card(b, "", c->traffic, "connections + requests");
	card(b, "allow", c->allowed, "allowed");
	card(b, "deny", c->denied, "denied");
	card(b, "would", c->would_deny, "would_deny (audit mode)");
	card(b, "", c->sandboxes.len, "sandboxes");
	card(b, "", c->allow_dst.len, "allowed destinations");
	card(b, c->n_violations ? "deny" : "", c->n_violations, "secret violations");
	card(b, "", c->reload_ok, "policy reloads");
	card(b, c->reload_bad ? "deny" : "", c->reload_bad, "rejected reloads");
	sb_str(b, "</div>\n");

	sb_str(b, "<h2>Traffic over time per sandbox</h2>\n<div class=\"panel\">\n");
	chart_time(b, c);
	sb_str(b, "</div>\n");

	sb_str(b, "<div class=\"two\">\n<div><h2>Top allowed destinations</h2>\n"
	       "<div class=\"panel\" id=\"top-allowed\">\n");
	top_list(b, &c->allow_dst, 0);
	sb_str(b, "</div></div>\n<div><h2>Top denied destinations</h2>\n"
	       "<div class=\"panel\" id=\"top-denied\">\n");
	top_list(b, &c->deny_dst, 1);
	sb_str(b, "<p class=\"cap\">Denied includes would_deny: allowed in audit mode, "
	       "refused under enforce.</p>\n</div></div>\n</div>\n");

	sb_fmt(b, "<h2>Secret violations (%" PRIu64 ")</h2>\n<div class=\"panel\" id=\"violations\">\n",
	       c->n_violations);
	if (!c->n_violations) {
		sb_str(b, "<p class=\"empty\">No secret violations recorded: no placeholder was sent "
		       "to a host its secret is not bound to.</p>\n");
	} else {
		sb_str(b, "<table><thead><tr><th>time (UTC)</th><th>sandbox</th><th>secret</th>"
		       "<th>destination</th><th>request</th><th>decision</th><th>reason</th>"
		       "</tr></thead><tbody>\n");
		sb_put(b, c->violations.p, c->violations.len);
		sb_str(b, "</tbody></table>\n");
		if (c->n_violations > ROWS_MAX)
			sb_fmt(b, "<p class=\"cap\">First %d of %" PRIu64 " shown.</p>\n", ROWS_MAX,
			       c->n_violations);
	}
	sb_str(b, "</div>\n");

	sb_fmt(b, "<h2>Policy reloads (%" PRIu64 ")</h2>\n<div class=\"panel\" id=\"reloads\">\n",
	       c->n_reloads);
	if (!c->n_reloads) {
		sb_str(b, "<p class=\"empty\">No policy reloads in these records.</p>\n");
	} else {
		sb_str(b, "<table><thead><tr><th>time (UTC)</th><th>decision</th><th>reason</th>"
		       "<th>error</th></tr></thead><tbody>\n");
		sb_put(b, c->reloads.p, c->reloads.len);
		sb_str(b, "</tbody></table>\n");
		if (c->n_reloads > ROWS_MAX)
			sb_fmt(b, "<p class=\"cap\">First %d of %" PRIu64 " shown.</p>\n", ROWS_MAX,
			       c->n_reloads);
	}
	sb_str(b, "</div>\n</body></html>\n");
}

/*
 * Write all of b to OUT via OUT.tmp + rename ("-": stdout): a reviewer
 * opening OUT while a new report is written sees the old page or the new
 * one, never half of one; on error OUT is left as it was.
 */
static int write_out(const char *out, const struct sbuf *b, char *err, size_t errsz)
{
	char tmp[4096];
	size_t off = 0;
	ssize_t w;
	int fd, rc = 0;

	if (!strcmp(out, "-")) {
		fd = STDOUT_FILENO;
	} else {
		if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", out) >= sizeof(tmp)) {
			snprintf(err, errsz, "%s: path too long", out);
			return SG_EINVAL;
		}
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			snprintf(err, errsz, "%.400s.tmp: %s", out, strerror(errno));
			return SG_EIO;
		}
	}
	while (off < b->len) {
		w = write(fd, b->p + off, b->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			snprintf(err, errsz, "%s: %s", out, strerror(errno));
			rc = SG_EIO;
			goto out;
		}
		off += (size_t)w;
	}
	if (fd != STDOUT_FILENO && rename(tmp, out) < 0) {
		snprintf(err, errsz, "%s: %s", out, strerror(errno));
		rc = SG_EIO;
	}
out:
	if (fd != STDOUT_FILENO) {
		close(fd);
		if (rc)
			unlink(tmp);
	}
	return rc;
}

static int r_usage(FILE *f)
{
	fprintf(f,
		"usage: sandgate audit report [-c CONFIG | --key SPEC] [--anchor FILE]\n"
		"                             [--accept-recovered] --html OUT [filters] FILE...\n"
		"  -c CONFIG    verify with audit.key and the anchor audit.path.head, as\n"
		"               `audit verify -c` does\n"
		"  --key SPEC   the chain's HMAC key (file:PATH | env:NAME) to verify the files\n"
		"  --anchor FILE, --accept-recovered   as for `audit verify`\n"
		"  --html OUT   the page to write (self-contained; no network)\n"
		"  filters as for `audit query` (--sandbox --host --decision --event --rule\n"
		"  --secret --since --until) narrow what the page shows; verification always\n"
		"  covers the whole files\n");
	return f == stderr ? 2 : 0;
}

/*
 * The status line, as `audit verify` with the same key options would
 * judge the files. Returns 1 verified, 0 not (status says why).
 */
static int verify_status(const char *const *files, size_t nfiles, const char *config,
			 const char *key_spec, struct aud_verify_opts *opts, char *status,
			 size_t statussz, const char **cls)
{
	struct sg_config *cfg = NULL;
	struct aud_key key = { NULL, 0 };
	struct aud_verify_result vr;
	char err[512], head[4096];
	int ok = 0, r;

	*cls = "red";
	if (config) {
		if (pol_config_load(config, &cfg, err, sizeof(err)) < 0) {
			snprintf(status, statussz, "NOT VERIFIED: %s", err);
			goto out;
		}
		if (!cfg->audit_key) {
			snprintf(status, statussz, "NOT VERIFIED: %.400s: audit.key is not set "
				 "(records carry no chain)", config);
			goto out;
		}
		key_spec = cfg->audit_key;
		/* the anchor catches a removed tail that the chain alone cannot */
		if (!opts->anchor && cfg->audit_path && strcmp(cfg->audit_path, "-")) {
			snprintf(head, sizeof(head), "%.4000s" AUD_HEAD_SUFFIX, cfg->audit_path);
			opts->anchor = head;
		}
	}
	if (aud_key_load(key_spec, &key, err, sizeof(err)) < 0) {
		snprintf(status, statussz, "NOT VERIFIED: %s", err);
		goto out;
	}
	memset(&vr, 0, sizeof(vr));
	r = aud_verify_files_ex(files, nfiles, &key, opts, &vr);
	aud_key_free(&key);
	if (r != 0 || !vr.ok) {
		snprintf(status, statussz, "NOT VERIFIED: %s",
			 vr.where[0] ? vr.where : "the files could not be read");
		goto out;
	}
	snprintf(status, statussz, "verified: %" PRIu64 " records, chain intact%s", vr.records,
		 vr.anchor_ok ? ", anchor matches" : "");
	if (vr.lost)
		snprintf(status + strlen(status), statussz - strlen(status),
			 "; %" PRIu64 " records declared lost by the writer (first at %s)",
			 vr.lost, vr.note);
	if (vr.torn || vr.recovered)
		snprintf(status + strlen(status), statussz - strlen(status),
			 "; %" PRIu64 " torn write(s) and %" PRIu64 " start-up gap(s) accepted",
			 vr.torn, vr.recovered);
	*cls = "green";
	ok = 1;
out:
	pol_config_free(cfg);
	return ok;
}

int aud_cmd_report(int argc, char **argv)
{
	struct aud_filter f;
	struct r_ctx c;
	struct aud_verify_opts vopts;
	struct sbuf page_buf = { NULL, 0, 0, 0 };
	const char **files = NULL, *out = NULL, *key_spec = NULL, *config = NULL;
	char **fargv = NULL;
	size_t nfiles = 0, nf = 0, i;
	char err[512], status[1400];
	const char *status_cls = "amber";
	int rc = 2, r, failed = 0;
	int64_t now = aud_now_us();

	aud_filter_init(&f);
	memset(&c, 0, sizeof(c));
	memset(&vopts, 0, sizeof(vopts));
	c.f = &f;
	files = calloc((size_t)argc + 1, sizeof(*files));
	fargv = calloc((size_t)argc + 1, sizeof(*fargv));
	if (!files || !fargv) {
		rc = 1;
		goto out;
	}
	for (i = 0; i < (size_t)argc; i++) {
		const char *a = argv[i];

		if (a[0] != '-' || !strcmp(a, "-")) {
			files[nfiles++] = a;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			rc = r_usage(stdout);
			goto out;
		} else if (!strcmp(a, "--accept-recovered")) {
			vopts.accept_recovered = 1;
		} else if (i + 1 >= (size_t)argc) {
			fprintf(stderr, "sandgate audit report: %s needs a value\n", a);
			rc = r_usage(stderr);
			goto out;
		} else if (!strcmp(a, "--html")) {
			out = argv[++i];
		} else if (!strcmp(a, "--key")) {
			key_spec = argv[++i];
		} else if (!strcmp(a, "-c") || !strcmp(a, "--config")) {
			config = argv[++i];
		} else if (!strcmp(a, "--anchor")) {
			vopts.anchor = argv[++i];
		} else {
			r = aud_filter_opt(&f, a, argv[i + 1], now, err, sizeof(err));
			if (r == SG_DECLINED) {
				fprintf(stderr, "sandgate audit report: unknown option %s\n", a);
				rc = r_usage(stderr);
				goto out;
			}
			if (r < 0) {
				fprintf(stderr, "sandgate audit report: %s\n", err);
				goto out;
			}
			fargv[nf++] = argv[i];
			fargv[nf++] = argv[++i];
		}
	}
	if (!out || !nfiles) {
		fprintf(stderr, "sandgate audit report: %s\n", !out ? "--html OUT is required" :
			"no FILE given");
		rc = r_usage(stderr);
		goto out;
	}
	if (config && key_spec) {
		fprintf(stderr, "sandgate audit report: -c and --key exclude each other\n");
		rc = r_usage(stderr);
		goto out;
	}
	rc = 1;

	/* 1. the chain, over the whole files whatever the filters */
	if (!config && !key_spec)
		snprintf(status, sizeof(status), "not verified: no key given");
	else if (!verify_status(files, nfiles, config, key_spec, &vopts, status,
				sizeof(status), &status_cls))
		failed = 1;

	/* 2. the records: a tampered file is still summarised (the reviewer
	 * sees the red status above what it claims), invalid lines are not */
	c.scratch = malloc(AUD_JSONL_LINE_MAX + 1);
	if (!c.scratch)
		goto out;
	for (i = 0; i < nfiles; i++) {
		c.file = files[i];
		r = aud_lines_read(files[i], r_line, &c, err, sizeof(err));
		if (c.oom) {
			fprintf(stderr, "sandgate audit report: out of memory\n");
			goto out;
		}
		if (r < 0) {
			fprintf(stderr, "sandgate audit report: %s\n", err);
			if (!c.unreadable++ && !c.bad)
				snprintf(c.first_bad, sizeof(c.first_bad), "%s", err);
			failed = 1;
		}
	}
	if (c.bad) {
		fprintf(stderr, "sandgate audit report: %" PRIu64 " invalid line%s left out; first: %s\n",
			c.bad, c.bad == 1 ? "" : "s", c.first_bad);
		failed = 1;
	}
	c.bad += c.unreadable;

	/* 3. the page */
	page(&page_buf, &c, files, nfiles, status_cls, status, fargv, nf);
	if (page_buf.oom) {
		fprintf(stderr, "sandgate audit report: out of memory\n");
		goto out;
	}
	if (write_out(out, &page_buf, err, sizeof(err)) < 0) {
		fprintf(stderr, "sandgate audit report: %s\n", err);
		goto out;
	}
	fprintf(stderr, "%s: %s\n", out, status);
	rc = failed ? 1 : 0;
out:
	free(files);
	free(fargv);
	free(c.scratch);
	free(c.pts);
	free(c.violations.p);
	free(c.reloads.p);
	free(page_buf.p);
	aud_tally_free(&c.sandboxes);
	aud_tally_free(&c.allow_dst);
	aud_tally_free(&c.deny_dst);
	return rc;
}
