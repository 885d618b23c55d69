/*
 * aud_jsonl.h - reading audit records back (sandgate audit query/report).
 *
 * Three layers, each usable alone:
 *
 * 1. Scanner (aud_jsonl.c): a strict, pure, allocation-free reader of ONE
 *    flat JSON object line. Values may be strings, numbers, true, false,
 *    null or arrays of strings; anything else (nested objects, arrays of
 *    numbers, trailing bytes, bad escapes, invalid UTF-8, lone surrogates)
 *    is SG_ERROR. Values come back as views into the caller's line
 *    (struct aud_jval, borrowed); strings are decoded only on request into
 *    a caller buffer. A decoded string never needs more than its raw
 *    length + 1 bytes, since every escape is longer than what it encodes.
 *
 * 2. Record view (aud_jsonl.c): the fields query and report use, taken
 *    from one line with their types checked (a known field with the wrong
 *    type, or given twice, makes the line invalid), plus RFC 3339 time
 *    and shell-glob helpers. Still pure and allocation-free.
 *
 * 3. Filters, the line reader and helpers (aud_query.c): the
 *    --sandbox/--host/... options shared by query and report, a block
 *    reader that hands a callback each line of a file, a counter map,
 *    and text cleaning for terminals and HTML. These allocate.
 *
 * Return codes as in sg.h: 0 or a count on success, SG_DECLINED for "not
 * there", SG_ERROR for malformed input, SG_EINVAL for a bad argument.
 */
#ifndef AUD_JSONL_H
#define AUD_JSONL_H

#include <stddef.h>
#include <stdint.h>

/* ---- 1. scanner --------------------------------------------------------- */

enum aud_jtype {
	AUD_J_STRING = 1,
	AUD_J_NUMBER,
	AUD_J_TRUE,
	AUD_J_FALSE,
	AUD_J_NULL,
	AUD_J_ARRAY,            /* of strings only */
};

struct aud_jval {
	enum aud_jtype type;
	const char *p;          /* borrowed: strings without their quotes, arrays
				 * with their brackets, else the literal's bytes */
	size_t n;
	int esc;                /* string: holds a backslash escape */
};

struct aud_jsonl_it {
	const char *p;          /* borrowed */
	size_t len, off;
	int state;              /* 0 before '{', 1 inside, 2 done */
};

void aud_jsonl_it_init(struct aud_jsonl_it *it, const char *line, size_t len);
/*
 * Next member of the object: 1 with key (a string view) and val set, 0
 * when the object ended well (only JSON whitespace after '}'), SG_ERROR
 * when the line is not a flat object. After 0 or SG_ERROR it stays there.
 */
int aud_jsonl_it_next(struct aud_jsonl_it *it, struct aud_jval *key, struct aud_jval *val);

/* The whole line is a valid flat object: 0, else SG_ERROR. */
int aud_jsonl_check(const char *line, size_t len);

/*
 * Find a top-level key. The whole line is checked, so a malformed tail
 * after the key is still SG_ERROR; a key present twice is SG_ERROR too
 * (two readers must never disagree about a field). 0 found, SG_DECLINED
 * absent.
 */
int aud_jsonl_find(const char *line, size_t len, const char *key, struct aud_jval *out);

/* Does a key view equal name (after decoding escapes)? 1 or 0. */
int aud_jsonl_key_is(const struct aud_jval *key, const char *name);

/*
 * Decode a string value into buf, NUL-terminated. Returns the decoded
 * length (the string may itself contain NUL from \u0000: the length is
 * authoritative), SG_EINVAL if v is not a string or cap < v->n + 1 would
 * not be enough, SG_ERROR on a bad escape.
 */
int aud_jsonl_str(const struct aud_jval *v, char *buf, size_t cap);

/* An integer number (no fraction or exponent) within int64: 0 or SG_EINVAL. */
int aud_jsonl_int(const struct aud_jval *v, int64_t *out);

/*
 * Walk an array of strings: *off starts at 0. 1 with elem set, 0 at the
 * end, SG_ERROR if arr is not a well-formed array of strings.
 */
int aud_jsonl_arr_next(const struct aud_jval *arr, size_t *off, struct aud_jval *elem);

/* ---- 2. record view ----------------------------------------------------- */

/* A decoded string: p NULL when the field is absent or null. */
struct aud_str {
	const char *p;          /* borrowed from the scratch buffer, NUL-terminated */
	size_t n;
};

struct aud_recv {
	const char *line;       /* borrowed */
	size_t len;
	int64_t ts_us;          /* ts as microseconds since the epoch (UTC) */
	/* integers: -1 when absent or null */
	int64_t seq, dst_port, bytes_up, bytes_down, status, duration_ms;
	struct aud_str ts, event, sandbox, decision, reason, rule, src, dst_host,
		       dst_ip, sni, tls, method, path, error, secret;
	struct aud_jval secrets;        /* type 0 when absent or null */
};

/*
 * Parse a record line. Strings are decoded into scratch, which needs
 * len + 1 bytes (see the note on decoded lengths above). ts and event
 * are required. Returns 0, or SG_ERROR with *why a static message
 * ("not a flat JSON object", "field \"ts\": not RFC 3339 time", ...).
 */
int aud_recv_parse(const char *line, size_t len, struct aud_recv *r,
		   char *scratch, size_t scratchsz, const char **why);

/* Does the record's secrets array (or secret string) name s? 1 or 0. */
int aud_recv_has_secret(const struct aud_recv *r, const char *s);

/*
 * RFC 3339 date-time ("2026-11-30T07:55:19.143297Z", "...+01:00"; 't',
 * 'z' and a space for 'T' accepted) to microseconds since the epoch.
 * Fractions beyond microseconds are cut. 0 or SG_EINVAL.
 */
int aud_time_parse(const char *s, size_t n, int64_t *us);
/*
 * A --since/--until argument: RFC 3339, a date (2026-11-30, midnight
 * UTC), or a span before now_us: "90s", "15m", "1h", "2d". 0 or SG_EINVAL.
 */
int aud_time_arg(const char *s, int64_t now_us, int64_t *us);

/*
 * Shell glob over n bytes of s: '*' any run (dots and slashes included),
 * '?' one byte, "[a-z]" / "[!x]" / "[^x]" classes, '\' quotes the next
 * byte. icase folds ASCII. Runs in O(len(pat) * n): no backtracking
 * blow-up whatever the pattern. 1 match, 0 not.
 */
int aud_glob(const char *pat, const char *s, size_t n, int icase);

/* ---- 3. filters and the line reader (aud_query.c) ------------------------ */

#define AUD_FILTER_MAX 16       /* values per option; repeats are ORed */
#define AUD_JSONL_LINE_MAX (64 * 1024)        /* longer lines are invalid */

struct aud_filter {
	const char *sandbox[AUD_FILTER_MAX];    /* borrowed from argv */
	const char *decision[AUD_FILTER_MAX];
	const char *event[AUD_FILTER_MAX];
	const char *host[AUD_FILTER_MAX];
	const char *rule[AUD_FILTER_MAX];
	const char *secret[AUD_FILTER_MAX];
	size_t n_sandbox, n_decision, n_event, n_host, n_rule, n_secret;
	int64_t since_us;       /* INT64_MIN when open: since <= ts */
	int64_t until_us;       /* INT64_MAX when open: ts < until */
};

void aud_filter_init(struct aud_filter *f);
/*
 * Take one filter option (opt "--sandbox" ..., val its argument).
 * 0 taken, SG_DECLINED not a filter option, SG_EINVAL bad value (err set).
 */
int aud_filter_opt(struct aud_filter *f, const char *opt, const char *val,
		   int64_t now_us, char *err, size_t errsz);
/* 1 when the record passes every given filter (kinds ANDed, repeats ORed). */
int aud_filter_match(const struct aud_filter *f, const struct aud_recv *r);

/*
 * Called for each line, without its '\n' (nl says whether one followed:
 * a last line without one may be a torn write). line is NULL for a line
 * over AUD_JSONL_LINE_MAX, which is skipped. A non-zero return stops reading
 * and is returned by aud_lines_read.
 */
typedef int (*aud_line_fn)(void *ctx, const char *line, size_t len, int nl,
			   uint64_t lineno);
/*
 * Read path ("-" is stdin) in large blocks and call fn per line. 0, fn's
 * non-zero return, or SG_EIO / SG_ENOMEM with err set ("PATH: why").
 */
int aud_lines_read(const char *path, aud_line_fn fn, void *ctx, char *err, size_t errsz);

/* Microseconds since the epoch, now (CLOCK_REALTIME). */
int64_t aud_now_us(void);

/*
 * Counts by key (--stats, the report's top lists). Entries stay in
 * insertion order, so an entry's index is stable while the table grows;
 * the hash only indexes them. Keys are byte strings (NUL allowed).
 */
struct aud_tally_ent {
	char *key;              /* owned, NUL-terminated copy */
	size_t n;
	uint64_t count;
	uint64_t aux[3];        /* caller's extra sums (bytes, would_deny ...) */
	char *note;             /* owned or NULL: caller's extra text */
};

struct aud_tally {
	struct aud_tally_ent *ents;     /* owned */
	size_t len, cap;
	uint32_t *slots;                /* owned: entry index + 1, 0 empty */
	size_t nslots;
};

/* Add by to key's count (creating it): the entry index, or SG_ENOMEM. */
long aud_tally_add(struct aud_tally *t, const char *key, size_t n, uint64_t by);
/* Replace an entry's note with a copy of s: 0 or SG_ENOMEM. */
int aud_tally_note(struct aud_tally_ent *e, const char *s, size_t n);
/* Indexes sorted by count (high first), then key: malloc'd (*out owned
 * by the caller), 0 or SG_ENOMEM. */
int aud_tally_sorted(const struct aud_tally *t, size_t **out);
void aud_tally_free(struct aud_tally *t);

/*
 * Printable text for a terminal cell or an HTML page: copies s into out
 * (NUL-terminated), replacing control characters (C0, DEL, C1), bidi
 * overrides and NUL with U+FFFD, so a host name or path from the log
 * cannot move the cursor, recolour a terminal, or reorder what a reader
 * sees. At most max_cols code points: a longer string ends in "…".
 * Returns the code points written (the display width for Latin text).
 */
size_t aud_text_clean(const char *s, size_t n, size_t max_cols, char *out, size_t cap);

#endif
