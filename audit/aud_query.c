/*
 * aud_query.c - `sandgate audit query [filters] FILE...` and the reading
 * helpers it shares with the report (aud_jsonl.h, section 3).
 *
 * Output: an aligned table for people, --json for tools (the matching
 * lines byte for byte, so `audit verify` and HMAC checks still work on
 * them downstream), or --stats (counts by sandbox, decision, host, reason;
 * with --json as one JSON object). Exit 0 ok, 1 a file could not be read
 * or held invalid lines (each reported as FILE:LINE on stderr and
 * skipped), 2 usage.
 *
 * The table needs every row to size its columns, so rows are kept in
 * memory up to TABLE_ROWS_MAX; past that, columns take their maximum
 * widths and rows stream, so memory stays bounded on any log.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_json.h"
#include "audit/aud_jsonl.h"
#include "audit/aud_cmd.h"
#include "sg_poison.h"

#define READ_BLOCK (1024 * 1024)
#define BAD_LINES_SHOWN 100     /* then one summary line: garbage must not flood */
#define TABLE_ROWS_MAX 10000
#define HOSTS_TOP 20

/* ---- filters -------------------------------------------------------------- */

void aud_filter_init(struct aud_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->since_us = INT64_MIN;
	f->until_us = INT64_MAX;
}

static const char *const decisions[] = { "allow", "deny", "would_deny" };
/* DESIGN.md "Audit record": a typo in --event must be an error, not an
 * empty answer that reads as "never happened". */
static const char *const events[] = {
	"connection", "request", "dns", "secret_violation", "policy_reload",
	"sandbox_start", "sandbox_stop", "gateway_start", "gateway_stop", "audit_rotate",
};

static int one_of(const char *v, const char *const *set, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(v, set[i]))
			return 1;
	return 0;
}

static int push(const char **arr, size_t *n, const char *v, const char *opt,
		char *err, size_t errsz)
{
	if (*n >= AUD_FILTER_MAX) {
		snprintf(err, errsz, "%s: at most %d values", opt, AUD_FILTER_MAX);
		return SG_EINVAL;
	}
	if (!*v) {
		snprintf(err, errsz, "%s: empty value", opt);
		return SG_EINVAL;
	}
	arr[(*n)++] = v;
	return 0;
}

int aud_filter_opt(struct aud_filter *f, const char *opt, const char *val,
		   int64_t now_us, char *err, size_t errsz)
{
	int64_t t;

	if (!strcmp(opt, "--sandbox"))
		return push(f->sandbox, &f->n_sandbox, val, opt, err, errsz);
	if (!strcmp(opt, "--host"))
		return push(f->host, &f->n_host, val, opt, err, errsz);
	if (!strcmp(opt, "--rule"))
		return push(f->rule, &f->n_rule, val, opt, err, errsz);
	if (!strcmp(opt, "--secret"))
		return push(f->secret, &f->n_secret, val, opt, err, errsz);
	if (!strcmp(opt, "--decision")) {
		if (!one_of(val, decisions, SG_ARRAY_LEN(decisions))) {
			snprintf(err, errsz, "--decision: allow, deny or would_deny, not \"%s\"", val);
			return SG_EINVAL;
		}
		return push(f->decision, &f->n_decision, val, opt, err, errsz);
	}
	if (!strcmp(opt, "--event")) {
		if (!one_of(val, events, SG_ARRAY_LEN(events))) {
			snprintf(err, errsz, "--event: unknown event \"%s\" (connection, request, dns, "
				 "secret_violation, policy_reload, sandbox_start, sandbox_stop, "
				 "gateway_start, gateway_stop, audit_rotate)", val);
			return SG_EINVAL;
		}
		return push(f->event, &f->n_event, val, opt, err, errsz);
	}
	if (!strcmp(opt, "--since") || !strcmp(opt, "--until")) {
		if (aud_time_arg(val, now_us, &t) < 0) {
			snprintf(err, errsz, "%s: \"%s\" is neither RFC 3339 time "
				 "(2026-11-30T07:00:00Z), a date, nor a span like 90s, 15m, 1h, 2d",
				 opt, val);
			return SG_EINVAL;
		}
		if (opt[2] == 's')
			f->since_us = t;
		else
			f->until_us = t;
		return 0;
	}
	return SG_DECLINED;
}

/* Exact match of a decoded field against any of the values; none given: pass. */
static int any_eq(const char *const *vals, size_t nv, const struct aud_str *s)
{
	size_t i;

	if (!nv)
		return 1;
	if (!s->p)
		return 0;
	for (i = 0; i < nv; i++)
		if (strlen(vals[i]) == s->n && !memcmp(vals[i], s->p, s->n))
			return 1;
	return 0;
}

static int any_glob(const char *const *pats, size_t np, const struct aud_str *s, int icase)
{
	size_t i;

	if (!np)
		return 1;
	if (!s->p)
		return 0;
	for (i = 0; i < np; i++)
		if (aud_glob(pats[i], s->p, s->n, icase))
			return 1;
	return 0;
}

int aud_filter_match(const struct aud_filter *f, const struct aud_recv *r)
{
	size_t i;

	if (r->ts_us < f->since_us || r->ts_us >= f->until_us)
		return 0;
	if (!any_eq(f->decision, f->n_decision, &r->decision) ||
	    !any_eq(f->event, f->n_event, &r->event) ||
	    !any_eq(f->rule, f->n_rule, &r->rule) ||
	    !any_glob(f->sandbox, f->n_sandbox, &r->sandbox, 0))
		return 0;
	/* Host names are case-insensitive (RFC 4343); the record holds them
	 * lower-cased, the user may not type them so. No name: the address. */
	if (!any_glob(f->host, f->n_host, r->dst_host.p ? &r->dst_host : &r->dst_ip, 1))
		return 0;
	if (f->n_secret) {
		for (i = 0; i < f->n_secret; i++)
			if (aud_recv_has_secret(r, f->secret[i]))
				break;
		if (i == f->n_secret)
			return 0;
	}
	return 1;
}

int64_t aud_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- line reader ---------------------------------------------------------- */

int aud_lines_read(const char *path, aud_line_fn fn, void *ctx, char *err, size_t errsz)
{
	char *buf = NULL;
	size_t have = 0, start, cap = READ_BLOCK;
	uint64_t lineno = 0;
	int fd = -1, rc = 0, skipping = 0;
	ssize_t got;

	/* cap > AUD_JSONL_LINE_MAX: a line that may still be valid always fits. */
	_Static_assert(READ_BLOCK > 2 * AUD_JSONL_LINE_MAX, "block must hold a line");
	fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	if (fd < 0) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		rc = SG_EIO;
		goto out;
	}
	buf = malloc(cap);
	if (!buf) {
		snprintf(err, errsz, "%s: out of memory", path);
		rc = SG_ENOMEM;
		goto out;
	}
	/*
	 * Invariant at the top of the loop: buf[0, have) is the start of a
	 * line not yet delivered, at most AUD_JSONL_LINE_MAX bytes, so at
	 * least READ_BLOCK / 2 is free for the next read. A longer line is
	 * reported once and then skipped ("skipping") up to its '\n'.
	 */
	for (;;) {
		got = read(fd, buf + have, cap - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(err, errsz, "%s: %s", path, strerror(errno));
			rc = SG_EIO;
			goto out;
		}
		if (got == 0)
			break;
		have += (size_t)got;
		start = 0;
		for (;;) {
			char *nl = memchr(buf + start, '\n', have - start);
			size_t len;

			if (!nl)
				break;
			len = (size_t)(nl - (buf + start));
			if (skipping) {
				skipping = 0;   /* the end of an over-long line, already reported */
			} else {
				lineno++;
				rc = fn(ctx, len > AUD_JSONL_LINE_MAX ? NULL : buf + start,
					len > AUD_JSONL_LINE_MAX ? 0 : len, 1, lineno);
				if (rc)
					goto out;
			}
			start += len + 1;
		}
		have -= start;
		if (!skipping && have > AUD_JSONL_LINE_MAX) {
			/* report now and drop its bytes until the next '\n' */
			lineno++;
			rc = fn(ctx, NULL, 0, 1, lineno);
			if (rc)
				goto out;
			skipping = 1;
		}
		if (skipping)
			have = 0;
		else
			memmove(buf, buf + start, have);
	}
	if (have && !skipping) {
		lineno++;
		rc = fn(ctx, buf, have, 0, lineno);
	}
out:
	free(buf);
	if (fd > STDIN_FILENO)
		close(fd);
	return rc;
}

/* ---- tally ---------------------------------------------------------------- */

static uint64_t hash(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ull;   /* FNV-1a */
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int tally_grow(struct aud_tally *t)
{
	size_t ns = t->nslots ? t->nslots * 2 : 64, i, j;
	uint32_t *slots = calloc(ns, sizeof(*slots));

	if (!slots)
		return SG_ENOMEM;
	for (i = 0; i < t->len; i++) {
		j = hash(t->ents[i].key, t->ents[i].n) & (ns - 1);
		while (slots[j])
			j = (j + 1) & (ns - 1);
		slots[j] = (uint32_t)(i + 1);
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = ns;
	return 0;
}

/*
 * Linear probing over an index of entry numbers: the entries themselves
 * never move when the index grows, so the report can keep an entry's
 * number (a sandbox's series) in 16 bytes per record instead of a copy
 * of its name.
 */
long aud_tally_add(struct aud_tally *t, const char *key, size_t n, uint64_t by)
{
	struct aud_tally_ent *e;
	size_t j;

	/* keep the load under 1/2 so probes stay short */
	if ((t->len + 1) * 2 > t->nslots && tally_grow(t) < 0)
		return SG_ENOMEM;
	if (t->len >= UINT32_MAX - 1)
		return SG_ENOMEM;
	j = hash(key, n) & (t->nslots - 1);
	while (t->slots[j]) {
		e = &t->ents[t->slots[j] - 1];
		if (e->n == n && !memcmp(e->key, key, n)) {
			e->count += by;
			return (long)(t->slots[j] - 1);
		}
		j = (j + 1) & (t->nslots - 1);
	}
	if (t->len == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 32;
		struct aud_tally_ent *ne = realloc(t->ents, nc * sizeof(*ne));

		if (!ne)
			return SG_ENOMEM;
		t->ents = ne;
		t->cap = nc;
	}
	e = &t->ents[t->len];
	memset(e, 0, sizeof(*e));
	e->key = malloc(n + 1);
	if (!e->key)
		return SG_ENOMEM;
	memcpy(e->key, key, n);
	e->key[n] = '\0';
	e->n = n;
	e->count = by;
	t->slots[j] = (uint32_t)(t->len + 1);
	return (long)t->len++;
}

int aud_tally_note(struct aud_tally_ent *e, const char *s, size_t n)
{
	char *c = malloc(n + 1);

	if (!c)
		return SG_ENOMEM;
	memcpy(c, s, n);
	c[n] = '\0';
	free(e->note);
	e->note = c;
	return 0;
}

static const struct aud_tally *sort_t;  /* qsort has no context argument in C11 */

static int by_count(const void *a, const void *b)
{
	const struct aud_tally_ent *x = &sort_t->ents[*(const size_t *)a];
	const struct aud_tally_ent *y = &sort_t->ents[*(const size_t *)b];
	int c;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	c = memcmp(x->key, y->key, SG_MIN(x->n, y->n));
	if (c)
		return c;
	return x->n < y->n ? -1 : x->n > y->n;
}

int aud_tally_sorted(const struct aud_tally *t, size_t **out)
{
	size_t *idx = malloc((t->len ? t->len : 1) * sizeof(*idx)), i;

	if (!idx)
		return SG_ENOMEM;
	for (i = 0; i < t->len; i++)
		idx[i] = i;
	sort_t = t;
	qsort(idx, t->len, sizeof(*idx), by_count);
	sort_t = NULL;
	*out = idx;
	return 0;
}

void aud_tally_free(struct aud_tally *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->len; i++) {
		free(t->ents[i].key);
		free(t->ents[i].note);
	}
	free(t->ents);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- text cleaning -------------------------------------------------------- */

/* Decode one UTF-8 code point at s (n > 0): its length, or 0 if invalid. */
static size_t cp_at(const unsigned char *s, size_t n, unsigned long *cp)
{
	size_t len, k;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
	if (!len || len > n || s[0] > 0xf4)
		return 0;
	*cp = s[0] & (0x7f >> len);
	for (k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (s[k] & 0x3f);
	}
	/* overlong, surrogate, beyond Unicode */
	if ((len == 2 && *cp < 0x80) || (len == 3 && *cp < 0x800) ||
	    (len == 4 && *cp < 0x10000) || (*cp >= 0xd800 && *cp <= 0xdfff) ||
	    *cp > 0x10ffff)
		return 0;
	return len;
}

static int cp_unsafe(unsigned long cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ||     /* C0, DEL, C1 (0x9b is CSI) */
	       (cp >= 0x200e && cp <= 0x200f) ||               /* LRM, RLM */
	       (cp >= 0x2028 && cp <= 0x202e) ||               /* separators, bidi embeddings */
	       (cp >= 0x2066 && cp <= 0x2069);                 /* bidi isolates */
}

size_t aud_text_clean(const char *s, size_t n, size_t max_cols, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)s;
	static const char repl[] = "\xef\xbf\xbd", ell[] = "\xe2\x80\xa6";
	size_t i, total = 0, cols = 0, o = 0, len, keep;
	unsigned long cp;

	if (!cap)
		return 0;
	for (i = 0; i < n; i += len, total++) {
		len = cp_at(p + i, n - i, &cp);
		if (!len)
			len = 1;
	}
	keep = total > max_cols ? (max_cols ? max_cols - 1 : 0) : total;
	for (i = 0; cols < keep; i += len, cols++) {
		const char *src = s + i;
		size_t sl;

		len = cp_at(p + i, n - i, &cp);
		if (!len || cp_unsafe(cp)) {
			src = repl;
			sl = 3;
			len = len ? len : 1;
		} else {
			sl = len;
		}
		if (cap - o < sl + 3 + 1)
			break;          /* leave room for the ellipsis */
		memcpy(out + o, src, sl);
		o += sl;
	}
	if (cols < total && max_cols && cap - o >= 4) {
		memcpy(out + o, ell, 3);
		o += 3;
		cols++;
	}
	out[o] = '\0';
	return cols;
}

/* ---- the query command ---------------------------------------------------- */

enum { C_TIME, C_SANDBOX, C_EVENT, C_DECISION, C_REASON, C_RULE, C_DEST, C_BYTES, NCOLS };

static const char *const col_head[NCOLS] = {
	"TIME (UTC)", "SANDBOX", "EVENT", "DECISION", "REASON", "RULE", "DESTINATION",
	"BYTES UP/DOWN",
};
/* Widest a cell may be, in code points: beyond, it ends in "…". */
static const size_t col_max[NCOLS] = { 23, 24, 16, 10, 24, 32, 48, 41 };

struct q_row {
	size_t off[NCOLS];      /* into the arena */
	size_t w[NCOLS];        /* display width */
};

struct q_ctx {
	const struct aud_filter *f;
	int json, stats;
	const char *file;
	char *scratch;                  /* owned: AUD_JSONL_LINE_MAX + 1 */
	uint64_t bad, matched;
	int failed;                     /* a write or memory error */
	FILE *out;                      /* borrowed */
	/* table */
	struct q_row *rows;             /* owned */
	size_t nrows, rows_cap;
	char *arena;                    /* owned */
	size_t arena_len, arena_cap;
	size_t w[NCOLS];
	int streaming;
	/* stats */
	struct aud_tally by_sandbox, by_decision, by_host, by_reason;
};

/* "2026-11-30 07:55:19.143" */
static void fmt_time(int64_t us, char *out, size_t outsz)
{
	time_t sec = (time_t)(us >= 0 ? us / 1000000 : (us - 999999) / 1000000);
	int ms = (int)((us - (int64_t)sec * 1000000) / 1000);
	struct tm tm;

	if (!gmtime_r(&sec, &tm)) {
		snprintf(out, outsz, "?");
		return;
	}
	snprintf(out, outsz, "%04d-%02d-%02d %02d:%02d:%02d.%03d", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

/*
 * "host:port", "[v6]:port", "host", or "-" into out (outsz > 32). Built
 * with lengths, not %s: a decoded name may hold a NUL (\u0000) that must
 * show up as U+FFFD later, not silently end the name.
 */
static size_t fmt_dest(const struct aud_recv *r, char *out, size_t outsz)
{
	const struct aud_str *h = r->dst_host.p ? &r->dst_host : &r->dst_ip;
	int v6 = h->p && memchr(h->p, ':', h->n) != NULL;
	size_t o = 0, hn = h->p ? SG_MIN(h->n, outsz - 32) : 0;

	if (!h->p && r->dst_port < 0) {
		snprintf(out, outsz, "-");
		return 1;
	}
	if (v6)
		out[o++] = '[';
	if (h->p) {
		memcpy(out + o, h->p, hn);
		o += hn;
	} else {
		out[o++] = '-';
	}
	if (v6)
		out[o++] = ']';
	out[o] = '\0';
	if (r->dst_port >= 0) {
		snprintf(out + o, outsz - o, ":%" PRId64, r->dst_port);
		o += strlen(out + o);
	}
	return o;
}

static void fmt_bytes(const struct aud_recv *r, char *out, size_t outsz)
{
	char up[24] = "-", down[24] = "-";

	if (r->bytes_up < 0 && r->bytes_down < 0) {
		snprintf(out, outsz, "-");
		return;
	}
	if (r->bytes_up >= 0)
		snprintf(up, sizeof(up), "%" PRId64, r->bytes_up);
	if (r->bytes_down >= 0)
		snprintf(down, sizeof(down), "%" PRId64, r->bytes_down);
	snprintf(out, outsz, "%s/%s", up, down);
}

static int arena_put(struct q_ctx *q, const char *s, size_t n, size_t *off)
{
	if (q->arena_cap - q->arena_len < n + 1) {
		size_t nc = q->arena_cap ? q->arena_cap * 2 : 65536;
		char *na;

		while (nc - q->arena_len < n + 1)
			nc *= 2;
		na = realloc(q->arena, nc);
		if (!na)
			return SG_ENOMEM;
		q->arena = na;
		q->arena_cap = nc;
	}
	memcpy(q->arena + q->arena_len, s, n + 1);
	*off = q->arena_len;
	q->arena_len += n + 1;
	return 0;
}

static void print_cells(struct q_ctx *q, const char *const *cell, const size_t *w)
{
	size_t c, pad;

	for (c = 0; c < NCOLS; c++) {
		pad = q->w[c] > w[c] ? q->w[c] - w[c] : 0;
		if (c == C_BYTES) {     /* numbers right-aligned; last column, no tail */
			fprintf(q->out, "%*s%s\n", (int)pad, "", cell[c]);
		} else {
			fputs(cell[c], q->out);
			fprintf(q->out, "%*s", (int)(pad + 2), "");
		}
	}
}

static void print_head(struct q_ctx *q)
{
	size_t w[NCOLS], c;

	for (c = 0; c < NCOLS; c++)
		w[c] = strlen(col_head[c]);
	print_cells(q, col_head, w);
}

/* Print what is buffered with the widths computed over it. */
static void table_flush(struct q_ctx *q)
{
	const char *cell[NCOLS];
	size_t i, c;

	print_head(q);
	for (i = 0; i < q->nrows; i++) {
		for (c = 0; c < NCOLS; c++)
			cell[c] = q->arena + q->rows[i].off[c];
		print_cells(q, cell, q->rows[i].w);
	}
	q->nrows = 0;
	q->arena_len = 0;
}

static int table_row(struct q_ctx *q, const struct aud_recv *r)
{
	/* clean: 48 code points of at most 4 bytes, an ellipsis, a NUL */
	char raw[NCOLS][4200], clean[NCOLS][256];
	const struct aud_str *s[NCOLS] = {
		NULL, &r->sandbox, &r->event, &r->decision, &r->reason, &r->rule, NULL, NULL,
	};
	const char *cell[NCOLS];
	size_t w[NCOLS], c;
	struct q_row *row;

	size_t rawn[NCOLS] = { 0 };

	fmt_time(r->ts_us, raw[C_TIME], sizeof(raw[C_TIME]));
	rawn[C_DEST] = fmt_dest(r, raw[C_DEST], sizeof(raw[C_DEST]));
	fmt_bytes(r, raw[C_BYTES], sizeof(raw[C_BYTES]));
	rawn[C_TIME] = strlen(raw[C_TIME]);
	rawn[C_BYTES] = strlen(raw[C_BYTES]);
	for (c = 0; c < NCOLS; c++) {
		const char *p = raw[c];
		size_t n;

		if (s[c]) {
			p = s[c]->p ? s[c]->p : "-";
			n = s[c]->p ? s[c]->n : 1;
		} else {
			n = rawn[c];
		}
		w[c] = aud_text_clean(p, n, col_max[c], clean[c], sizeof(clean[c]));
		if (w[c] == 0) {
			w[c] = aud_text_clean("-", 1, col_max[c], clean[c], sizeof(clean[c]));
		}
		cell[c] = clean[c];
	}
	/* rows are cleaned and cut once, here; the arena holds them as shown */
	if (q->streaming) {
		print_cells(q, cell, w);
		return 0;
	}
	if (q->nrows == TABLE_ROWS_MAX) {
		/* Too many to hold: fix every column at its widest and stream. */
		for (c = 0; c < NCOLS; c++)
			q->w[c] = SG_MAX(col_max[c], strlen(col_head[c]));
		table_flush(q);
		q->streaming = 1;
		print_cells(q, cell, w);
		return 0;
	}
	if (q->nrows == q->rows_cap) {
		size_t nc = q->rows_cap ? q->rows_cap * 2 : 256;
		struct q_row *nr = realloc(q->rows, nc * sizeof(*nr));

		if (!nr)
			return SG_ENOMEM;
		q->rows = nr;
		q->rows_cap = nc;
	}
	row = &q->rows[q->nrows];
	for (c = 0; c < NCOLS; c++) {
		if (arena_put(q, cell[c], strlen(cell[c]), &row->off[c]) < 0)
			return SG_ENOMEM;
		row->w[c] = w[c];
		q->w[c] = SG_MAX(q->w[c], w[c]);
	}
	q->nrows++;
	return 0;
}

static int stats_add(struct q_ctx *q, const struct aud_recv *r)
{
	const struct aud_str *h = r->dst_host.p ? &r->dst_host : &r->dst_ip;

	/* "-" stands for null: a lifecycle record or an unknown source */
	if (aud_tally_add(&q->by_sandbox, r->sandbox.p ? r->sandbox.p : "-",
			  r->sandbox.p ? r->sandbox.n : 1, 1) < 0 ||
	    aud_tally_add(&q->by_decision, r->decision.p ? r->decision.p : "-",
			  r->decision.p ? r->decision.n : 1, 1) < 0 ||
	    aud_tally_add(&q->by_reason, r->reason.p ? r->reason.p : "-",
			  r->reason.p ? r->reason.n : 1, 1) < 0)
		return SG_ENOMEM;
	/* records without a destination (lifecycle) have no host to count */
	if (h->p && aud_tally_add(&q->by_host, h->p, h->n, 1) < 0)
		return SG_ENOMEM;
	return 0;
}

static void bad_line(struct q_ctx *q, uint64_t lineno, const char *why, int nl)
{
	q->bad++;
	if (q->bad <= BAD_LINES_SHOWN)
		fprintf(stderr, "%s:%" PRIu64 ": invalid record skipped: %s%s\n", q->file,
			lineno, why, nl ? "" : " (last line has no newline: a torn write?)");
}

static int q_line(void *ctx, const char *line, size_t len, int nl, uint64_t lineno)
{
	struct q_ctx *q = ctx;
	struct aud_recv r;
	const char *why;
	int rc = 0;

	if (!line) {
		bad_line(q, lineno, "line longer than 64 KiB", 1);
		return 0;
	}
	/* One bad line must not hide the records after it: report, go on,
	 * and let the exit code say the file was not clean. */
	if (aud_recv_parse(line, len, &r, q->scratch, AUD_JSONL_LINE_MAX + 1, &why) < 0) {
		bad_line(q, lineno, why, nl);
		return 0;
	}
	if (!aud_filter_match(q->f, &r))
		return 0;
	q->matched++;
	if (q->stats) {
		rc = stats_add(q, &r);
	} else if (q->json) {
		fwrite(line, 1, len, q->out);
		putc('\n', q->out);
	} else {
		rc = table_row(q, &r);
	}
	if (rc < 0) {
		fprintf(stderr, "sandgate audit query: out of memory\n");
		q->failed = 1;
	}
	return rc;
}

/* Widest name among the first top entries of t (display columns). */
static size_t tally_width(const struct aud_tally *t, const size_t *idx, size_t top)
{
	char name[256];
	size_t i, w = 0;

	for (i = 0; i < SG_MIN(t->len, top); i++)
		w = SG_MAX(w, aud_text_clean(t->ents[idx[i]].key, t->ents[idx[i]].n, 60,
					     name, sizeof(name)));
	return w;
}

static void stats_text(struct q_ctx *q, const char *title, const struct aud_tally *t,
		       const size_t *idx, size_t top, size_t w, int cw)
{
	char name[256];
	size_t i, n = SG_MIN(t->len, top), nw;

	if (t->len > n)
		fprintf(q->out, "\nby %s (top %zu of %zu)\n", title, n, t->len);
	else
		fprintf(q->out, "\nby %s\n", title);
	if (!n)
		fprintf(q->out, "  (none)\n");
	for (i = 0; i < n; i++) {
		const struct aud_tally_ent *e = &t->ents[idx[i]];

		nw = aud_text_clean(e->key, e->n, 60, name, sizeof(name));
		fprintf(q->out, "  %s%*s  %*" PRIu64 "\n", name, (int)(w - nw), "", cw, e->count);
	}
}

static void stats_json(struct q_ctx *q, const char *key, const struct aud_tally *t,
		       size_t top)
{
	size_t *idx = NULL, i, n, cap;
	char *quoted;
	int len;

	if (aud_tally_sorted(t, &idx) < 0) {
		q->failed = 1;
		return;
	}
	fprintf(q->out, ",\"%s\":{", key);
	n = SG_MIN(t->len, top);
	for (i = 0; i < n; i++) {
		const struct aud_tally_ent *e = &t->ents[idx[i]];

		cap = e->n * 6 + 3;     /* worst case: every byte as \u00XX */
		quoted = malloc(cap);
		len = quoted ? sg_json_quote(quoted, cap, e->key, e->n) : -1;
		if (len < 0) {
			q->failed = 1;
			free(quoted);
			break;
		}
		fprintf(q->out, "%s%.*s:%" PRIu64, i ? "," : "", len, quoted, e->count);
		free(quoted);
	}
	fputc('}', q->out);
	free(idx);
}

static void stats_print(struct q_ctx *q)
{
	const struct aud_tally *t[4] = { &q->by_sandbox, &q->by_decision, &q->by_host,
					 &q->by_reason };
	static const char *const title[4] = { "sandbox", "decision", "host", "reason" };
	const size_t top[4] = { SIZE_MAX, SIZE_MAX, HOSTS_TOP, SIZE_MAX };
	size_t *idx[4] = { NULL, NULL, NULL, NULL }, w = 0, k;
	int cw;

	if (q->json) {
		fprintf(q->out, "{\"records\":%" PRIu64 ",\"hosts\":%zu", q->matched,
			q->by_host.len);
		stats_json(q, "by_sandbox", &q->by_sandbox, SIZE_MAX);
		stats_json(q, "by_decision", &q->by_decision, SIZE_MAX);
		stats_json(q, "by_host", &q->by_host, HOSTS_TOP);
		stats_json(q, "by_reason", &q->by_reason, SIZE_MAX);
		fputs("}\n", q->out);
		return;
	}
	/* one name column and one count column for every section: reads as a table */
	for (k = 0; k < 4; k++) {
		if (aud_tally_sorted(t[k], &idx[k]) < 0) {
			q->failed = 1;
			goto out;
		}
		w = SG_MAX(w, tally_width(t[k], idx[k], top[k]));
	}
	cw = snprintf(NULL, 0, "%" PRIu64, q->matched);
	fprintf(q->out, "records: %" PRIu64 "\n", q->matched);
	for (k = 0; k < 4; k++)
		stats_text(q, title[k], t[k], idx[k], top[k], w, cw);
out:
	for (k = 0; k < 4; k++)
		free(idx[k]);
}

static int q_usage(FILE *f)
{
	fprintf(f,
		"usage: sandgate audit query [--json] [--stats] [filters] FILE...\n"
		"filters (repeat one to match any of its values; different ones must all match):\n"
		"  --sandbox GLOB   --host GLOB (dst_host, or dst_ip without one)\n"
		"  --decision allow|deny|would_deny   --event NAME   --rule ID   --secret NAME\n"
		"  --since TIME   --until TIME   (RFC 3339, a date, or 90s/15m/1h/2d ago)\n");
	return f == stderr ? 2 : 0;
}

int aud_cmd_query(int argc, char **argv)
{
	struct aud_filter f;
	struct q_ctx q;
	const char **files = NULL;
	size_t nfiles = 0, i;
	int64_t now = aud_now_us();
	char err[512];
	int rc = 0, opts = 1, io_err = 0, r;

	aud_filter_init(&f);
	memset(&q, 0, sizeof(q));
	q.f = &f;
	q.out = stdout;
	for (i = 0; i < NCOLS; i++)
		q.w[i] = strlen(col_head[i]);   /* the header is part of the output */
	files = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*files));
	if (!files) {
		rc = 1;
		goto out;
	}
	for (i = 0; i < (size_t)argc; i++) {
		const char *a = argv[i], *eq, *val;
		char opt[32];

		/* "-" is stdin; after "--" a file may start with '-' */
		if (!opts || a[0] != '-' || !strcmp(a, "-")) {
			files[nfiles++] = a;
			continue;
		}
		if (!strcmp(a, "--")) {
			opts = 0;
		} else if (!strcmp(a, "--json")) {
			q.json = 1;
		} else if (!strcmp(a, "--stats")) {
			q.stats = 1;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			rc = q_usage(stdout);
			goto out;
		} else {
			/* --opt VALUE or --opt=VALUE */
			eq = strchr(a, '=');
			if (eq && (size_t)(eq - a) < sizeof(opt)) {
				memcpy(opt, a, (size_t)(eq - a));
				opt[eq - a] = '\0';
				val = eq + 1;
			} else if (!eq && strlen(a) < sizeof(opt) && i + 1 < (size_t)argc) {
				memcpy(opt, a, strlen(a) + 1);
				val = argv[++i];
			} else {
				fprintf(stderr, "sandgate audit query: unknown option or missing value: %s\n", a);
				rc = q_usage(stderr);
				goto out;
			}
			r = aud_filter_opt(&f, opt, val, now, err, sizeof(err));
			if (r == SG_DECLINED) {
				fprintf(stderr, "sandgate audit query: unknown option %s\n", opt);
				rc = q_usage(stderr);
				goto out;
			}
			if (r < 0) {
				fprintf(stderr, "sandgate audit query: %s\n", err);
				rc = 2;
				goto out;
			}
		}
	}
	if (!nfiles) {
		fprintf(stderr, "sandgate audit query: no FILE given\n");
		rc = q_usage(stderr);
		goto out;
	}
	q.scratch = malloc(AUD_JSONL_LINE_MAX + 1);
	if (!q.scratch) {
		fprintf(stderr, "sandgate audit query: out of memory\n");
		rc = 1;
		goto out;
	}
	for (i = 0; i < nfiles; i++) {
		q.file = files[i];
		r = aud_lines_read(files[i], q_line, &q, err, sizeof(err));
		if (r < 0 && !q.failed) {
			fprintf(stderr, "sandgate audit query: %s\n", err);
			io_err = 1;
		}
		if (q.failed)
			break;
	}
	if (q.stats)
		stats_print(&q);
	else if (!q.json && !q.streaming)
		table_flush(&q);
	if (q.bad > BAD_LINES_SHOWN)
		fprintf(stderr, "sandgate audit query: %" PRIu64 " invalid lines in all (first %d shown)\n",
			q.bad, BAD_LINES_SHOWN);
	if (fflush(q.out) != 0 || ferror(q.out)) {
		fprintf(stderr, "sandgate audit query: write error: %s\n", strerror(errno));
		q.failed = 1;
	}
	rc = q.bad || io_err || q.failed ? 1 : 0;
out:
	free(files);
	free(q.scratch);
	free(q.rows);
	free(q.arena);
	aud_tally_free(&q.by_sandbox);
	aud_tally_free(&q.by_decision);
	aud_tally_free(&q.by_host);
	aud_tally_free(&q.by_reason);
	return rc;
}
