/*
 * aud_jsonl.c - the strict one-line JSON scanner and the record view
 * (contract in aud_jsonl.h).
 *
 * The log is evidence, and parts of it (host names, paths, error texts)
 * came from the sandbox, so the scanner accepts only what RFC 8259
 * accepts, restricted to the flat shape our writer produces, and never
 * reads outside [line, line + len): every byte is taken through the sg_rd
 * cursor or a bounds check in the same expression. No recursion: arrays
 * hold strings only, so depth is at most one.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sg.h"
#include "audit/aud_jsonl.h"
#include "sg_poison.h"

/* ---- bytes ---------------------------------------------------------------- */

/* The byte under the cursor, or -1 at the end. */
static int peek(const struct sg_rd *rd)
{
	return sg_rd_left(rd) ? rd->p[rd->off] : -1;
}

/* JSON whitespace (RFC 8259 section 2): space, tab, LF, CR. */
static void skip_ws(struct sg_rd *rd)
{
	int c;

	while ((c = peek(rd)) == ' ' || c == '\t' || c == '\n' || c == '\r')
		rd->off++;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Four hex digits of a \u escape at p[*i]; -1 if short or not hex. */
static long hex4(const unsigned char *p, size_t n, size_t *i)
{
	long v = 0;
	size_t k;

	if (n - *i < 4)
		return -1;
	for (k = 0; k < 4; k++) {
		int h = hexval(p[*i + k]);

		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	*i += 4;
	return v;
}

/* Length of a valid UTF-8 sequence at p (RFC 3629 table 3-7), or 0:
 * overlong forms, surrogates and code points over U+10FFFF are refused. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (p[0] >= 0xe0 && p[0] <= 0xef) {
		if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
			return 0;
		if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))
			return 0;
		return 3;
	}
	if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
		    (p[3] & 0xc0) != 0x80)
			return 0;
		if ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
			return 0;
		return 4;
	}
	return 0;
}

static size_t utf8_put(unsigned long cp, unsigned char out[4])
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xc0 | cp >> 6);
		out[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (unsigned char)(0xe0 | cp >> 12);
		out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | cp >> 18);
	out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * One step of decoding the body of a string (between the quotes): the
 * bytes it stands for go to out (1..4 of them), *i advances. Returns the
 * count, or SG_ERROR for a raw control byte, a stray quote, invalid
 * UTF-8, a bad escape or an unpaired surrogate (RFC 8259 section 8.2
 * calls those "unpredictable"; a log reader must not guess). Both the
 * scanner and every decoder go through here, so they cannot disagree.
 */
static int str_step(const unsigned char *p, size_t n, size_t *i, unsigned char out[4])
{
	unsigned char c = p[*i];
	long cp, lo;
	size_t ul;

	if (c < 0x20 || c == '"')
		return SG_ERROR;
	if (c != '\\') {
		ul = utf8_len(p + *i, n - *i);
		if (!ul)
			return SG_ERROR;
		memcpy(out, p + *i, ul);
		*i += ul;
		return (int)ul;
	}
	if (n - *i < 2)
		return SG_ERROR;
	c = p[*i + 1];
	*i += 2;
	switch (c) {
	case '"': case '\\': case '/':
		out[0] = c;
		return 1;
	case 'b': out[0] = '\b'; return 1;
	case 'f': out[0] = '\f'; return 1;
	case 'n': out[0] = '\n'; return 1;
	case 'r': out[0] = '\r'; return 1;
	case 't': out[0] = '\t'; return 1;
	case 'u':
		break;
	default:
		return SG_ERROR;
	}
	cp = hex4(p, n, i);
	if (cp < 0 || (cp >= 0xdc00 && cp <= 0xdfff))
		return SG_ERROR;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		/* A high surrogate must be followed by \u + a low one (RFC 8259 7). */
		if (n - *i < 2 || p[*i] != '\\' || p[*i + 1] != 'u')
			return SG_ERROR;
		*i += 2;
		lo = hex4(p, n, i);
		if (lo < 0xdc00 || lo > 0xdfff)
			return SG_ERROR;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	return (int)utf8_put((unsigned long)cp, out);
}

/* ---- scanner -------------------------------------------------------------- */

/* A string at the cursor (on its '"'): sets v to its body, past the close. */
static int scan_string(struct sg_rd *rd, struct aud_jval *v)
{
	const unsigned char *p;
	size_t start, i = 0, n;
	unsigned char tmp[4];

	if (peek(rd) != '"')
		return SG_ERROR;
	rd->off++;
	start = rd->off;
	p = rd->p + start;
	n = sg_rd_left(rd);
	v->esc = 0;
	while (i < n && p[i] != '"') {
		if (p[i] == '\\')
			v->esc = 1;
		if (str_step(p, n, &i, tmp) < 0)
			return SG_ERROR;
	}
	if (i >= n)
		return SG_ERROR;        /* unterminated */
	v->type = AUD_J_STRING;
	v->p = (const char *)p;
	v->n = i;
	rd->off = start + i + 1;
	return 0;
}

static void skip_digits(struct sg_rd *rd)
{
	int c;

	while ((c = peek(rd)) >= '0' && c <= '9')
		rd->off++;
}

/* RFC 8259 section 6: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(struct sg_rd *rd, struct aud_jval *v)
{
	size_t start = rd->off;
	int c;

	if (peek(rd) == '-')
		rd->off++;
	c = peek(rd);
	if (c == '0')
		rd->off++;
	else if (c >= '1' && c <= '9')
		skip_digits(rd);
	else
		return SG_ERROR;
	if (peek(rd) == '.') {
		rd->off++;
		c = peek(rd);
		if (c < '0' || c > '9')
			return SG_ERROR;
		skip_digits(rd);
	}
	c = peek(rd);
	if (c == 'e' || c == 'E') {
		rd->off++;
		c = peek(rd);
		if (c == '+' || c == '-')
			rd->off++;
		c = peek(rd);
		if (c < '0' || c > '9')
			return SG_ERROR;
		skip_digits(rd);
	}
	v->type = AUD_J_NUMBER;
	v->p = (const char *)rd->p + start;
	v->n = rd->off - start;
	v->esc = 0;
	return 0;
}

static int scan_literal(struct sg_rd *rd, const char *lit, enum aud_jtype t,
			struct aud_jval *v)
{
	size_t n = strlen(lit);

	if (sg_rd_left(rd) < n || memcmp(rd->p + rd->off, lit, n))
		return SG_ERROR;
	v->type = t;
	v->p = (const char *)rd->p + rd->off;
	v->n = n;
	v->esc = 0;
	rd->off += n;
	return 0;
}

/* '[' ws ( ']' | string ( ws ',' ws string )* ws ']' ) */
static int scan_array(struct sg_rd *rd, struct aud_jval *v)
{
	size_t start = rd->off;
	struct aud_jval e;

	rd->off++;                      /* '[' */
	skip_ws(rd);
	if (peek(rd) != ']') {
		for (;;) {
			if (scan_string(rd, &e) < 0)
				return SG_ERROR;
			skip_ws(rd);
			if (peek(rd) != ',')
				break;
			rd->off++;
			skip_ws(rd);
		}
		if (peek(rd) != ']')
			return SG_ERROR;
	}
	rd->off++;
	v->type = AUD_J_ARRAY;
	v->p = (const char *)rd->p + start;
	v->n = rd->off - start;
	v->esc = 0;
	return 0;
}

static int scan_value(struct sg_rd *rd, struct aud_jval *v)
{
	int c = peek(rd);

	switch (c) {
	case '"':
		return scan_string(rd, v);
	case '[':
		return scan_array(rd, v);
	case 't':
		return scan_literal(rd, "true", AUD_J_TRUE, v);
	case 'f':
		return scan_literal(rd, "false", AUD_J_FALSE, v);
	case 'n':
		return scan_literal(rd, "null", AUD_J_NULL, v);
	default:
		if (c == '-' || (c >= '0' && c <= '9'))
			return scan_number(rd, v);
		return SG_ERROR;        /* objects (nesting), garbage, end of line */
	}
}

void aud_jsonl_it_init(struct aud_jsonl_it *it, const char *line, size_t len)
{
	it->p = line;
	it->len = len;
	it->off = 0;
	it->state = 0;
}

/* A member at the cursor: string ws ':' ws value. */
static int scan_member(struct sg_rd *rd, struct aud_jval *key, struct aud_jval *val)
{
	if (scan_string(rd, key) < 0)
		return SG_ERROR;
	skip_ws(rd);
	if (peek(rd) != ':')
		return SG_ERROR;
	rd->off++;
	skip_ws(rd);
	return scan_value(rd, val);
}

/* Error states are sticky: a caller that ignores one still gets no member. */
static int it_fail(struct aud_jsonl_it *it)
{
	it->state = -1;
	return SG_ERROR;
}

/* At the closing '}': only JSON whitespace may follow (no second object). */
static int it_finish(struct aud_jsonl_it *it, struct sg_rd *rd)
{
	rd->off++;
	skip_ws(rd);
	if (sg_rd_left(rd))
		return it_fail(it);
	it->off = rd->off;
	it->state = 2;
	return 0;
}

int aud_jsonl_it_next(struct aud_jsonl_it *it, struct aud_jval *key, struct aud_jval *val)
{
	struct sg_rd rd;
	int c;

	if (it->state == 2)
		return 0;
	if (it->state < 0)
		return SG_ERROR;
	sg_rd_init(&rd, (const uint8_t *)it->p, it->len);
	rd.off = it->off;
	skip_ws(&rd);
	c = peek(&rd);
	if (it->state == 0) {
		if (c != '{')
			return it_fail(it);
		rd.off++;
		skip_ws(&rd);
		if (peek(&rd) == '}')
			return it_finish(it, &rd);
	} else {
		if (c == '}')
			return it_finish(it, &rd);
		if (c != ',')
			return it_fail(it);
		rd.off++;
		skip_ws(&rd);
	}
	if (scan_member(&rd, key, val) < 0)
		return it_fail(it);
	it->off = rd.off;
	it->state = 1;
	return 1;
}

int aud_jsonl_check(const char *line, size_t len)
{
	struct aud_jsonl_it it;
	struct aud_jval k, v;
	int rc;

	aud_jsonl_it_init(&it, line, len);
	while ((rc = aud_jsonl_it_next(&it, &k, &v)) == 1)
		;
	return rc;
}

/* Does the string view s decode to exactly the n bytes of want? */
static int jstr_eq(const struct aud_jval *s, const char *want, size_t n)
{
	const unsigned char *p = (const unsigned char *)s->p;
	unsigned char tmp[4];
	size_t i = 0, o = 0;
	int k;

	if (s->type != AUD_J_STRING)
		return 0;
	if (!s->esc)
		return s->n == n && !memcmp(s->p, want, n);
	while (i < s->n) {
		k = str_step(p, s->n, &i, tmp);
		if (k < 0 || n - o < (size_t)k || memcmp(want + o, tmp, (size_t)k))
			return 0;
		o += (size_t)k;
	}
	return o == n;
}

int aud_jsonl_key_is(const struct aud_jval *key, const char *name)
{
	return jstr_eq(key, name, strlen(name));
}

int aud_jsonl_find(const char *line, size_t len, const char *key, struct aud_jval *out)
{
	struct aud_jsonl_it it;
	struct aud_jval k, v;
	int rc, found = 0;

	aud_jsonl_it_init(&it, line, len);
	while ((rc = aud_jsonl_it_next(&it, &k, &v)) == 1) {
		if (!aud_jsonl_key_is(&k, key))
			continue;
		if (found)
			return SG_ERROR;        /* duplicate key: ambiguous */
		found = 1;
		*out = v;
	}
	if (rc < 0)
		return rc;
	return found ? 0 : SG_DECLINED;
}

int aud_jsonl_str(const struct aud_jval *v, char *buf, size_t cap)
{
	const unsigned char *p;
	unsigned char tmp[4];
	size_t i = 0, o = 0;
	int k;

	if (!v || v->type != AUD_J_STRING || cap < v->n + 1)
		return SG_EINVAL;
	p = (const unsigned char *)v->p;
	while (i < v->n) {
		k = str_step(p, v->n, &i, tmp);
		if (k < 0)
			return SG_ERROR;
		/* Never overflows: an escape is longer than its bytes, see the header. */
		memcpy(buf + o, tmp, (size_t)k);
		o += (size_t)k;
	}
	buf[o] = '\0';
	return (int)o;
}

int aud_jsonl_int(const struct aud_jval *v, int64_t *out)
{
	uint64_t acc = 0, lim;
	size_t i = 0;
	int neg = 0;

	if (!v || v->type != AUD_J_NUMBER || !v->n)
		return SG_EINVAL;
	if (v->p[0] == '-') {
		neg = 1;
		i = 1;
	}
	if (i == v->n)
		return SG_EINVAL;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < v->n; i++) {
		unsigned d = (unsigned char)v->p[i] - '0';

		if (d > 9 || acc > (lim - d) / 10)
			return SG_EINVAL;       /* fraction, exponent, or too big */
		acc = acc * 10 + d;
	}
	/* -(INT64_MAX + 1) without signed overflow */
	*out = neg ? (acc ? -(int64_t)(acc - 1) - 1 : 0) : (int64_t)acc;
	return 0;
}

int aud_jsonl_arr_next(const struct aud_jval *arr, size_t *off, struct aud_jval *elem)
{
	struct sg_rd rd;

	/* The view is re-scanned rather than trusted: a caller may build one
	 * by hand, and scanning a few names again costs nothing. */
	if (!arr || arr->type != AUD_J_ARRAY || arr->n < 2 || arr->p[0] != '[')
		return SG_ERROR;
	sg_rd_init(&rd, (const uint8_t *)arr->p, arr->n);
	rd.off = *off ? *off : 1;
	skip_ws(&rd);
	if (*off) {
		/* after an element: ',' or the closing ']' */
		if (peek(&rd) == ']')
			return 0;
		if (peek(&rd) != ',')
			return SG_ERROR;
		rd.off++;
		skip_ws(&rd);
	} else if (peek(&rd) == ']') {
		return 0;
	}
	if (scan_string(&rd, elem) < 0)
		return SG_ERROR;
	*off = rd.off;
	return 1;
}

/* ---- record view ---------------------------------------------------------- */

enum fkind { F_STR, F_INT, F_ARR };

/* The "seen" bitmask of aud_recv_parse has 32 bits. */
#define FIELDS_MAX 32

static const struct {
	const char *name;
	enum fkind kind;
	size_t off;
} fields[] = {
#define S(f) { #f, F_STR, offsetof(struct aud_recv, f) }
#define I(f) { #f, F_INT, offsetof(struct aud_recv, f) }
	S(ts), S(event), S(sandbox), S(decision), S(reason), S(rule), S(src),
	S(dst_host), S(dst_ip), S(sni), S(tls), S(method), S(path), S(error),
	S(secret),
	I(seq), I(dst_port), I(bytes_up), I(bytes_down), I(status), I(duration_ms),
	{ "secrets", F_ARR, offsetof(struct aud_recv, secrets) },
#undef S
#undef I
};

/* One known field: check its type, decode it into the scratch. */
static int recv_field(struct aud_recv *r, size_t f, const struct aud_jval *v,
		      char *scratch, size_t scratchsz, size_t *used, const char **why)
{
	void *dst = (char *)r + fields[f].off;
	int n;

	/* null and absent read the same: the writer uses null for "none" */
	if (v->type == AUD_J_NULL)
		return 0;
	switch (fields[f].kind) {
	case F_STR:
		if (v->type != AUD_J_STRING)
			break;
		n = aud_jsonl_str(v, scratch + *used, scratchsz - *used);
		if (n < 0) {
			*why = "record larger than the scratch buffer";
			return SG_ERROR;
		}
		((struct aud_str *)dst)->p = scratch + *used;
		((struct aud_str *)dst)->n = (size_t)n;
		*used += (size_t)n + 1;
		return 0;
	case F_INT:
		if (v->type != AUD_J_NUMBER || aud_jsonl_int(v, (int64_t *)dst) < 0)
			break;
		return 0;
	case F_ARR:
		if (v->type != AUD_J_ARRAY)
			break;
		*(struct aud_jval *)dst = *v;
		return 0;
	}
	*why = fields[f].kind == F_STR ? "a known field is not a string" :
	       fields[f].kind == F_INT ? "a known field is not an integer" :
					 "a known field is not an array";
	return SG_ERROR;
}

int aud_recv_parse(const char *line, size_t len, struct aud_recv *r,
		   char *scratch, size_t scratchsz, const char **why)
{
	struct aud_jsonl_it it;
	struct aud_jval k, v;
	uint32_t seen = 0;
	size_t used = 0, f;
	int rc;

	_Static_assert(SG_ARRAY_LEN(fields) <= FIELDS_MAX, "seen mask too small");
	memset(r, 0, sizeof(*r));
	r->line = line;
	r->len = len;
	r->seq = r->dst_port = r->bytes_up = r->bytes_down = r->status = -1;
	r->duration_ms = -1;
	*why = "not a flat JSON object";
	aud_jsonl_it_init(&it, line, len);
	while ((rc = aud_jsonl_it_next(&it, &k, &v)) == 1) {
		for (f = 0; f < SG_ARRAY_LEN(fields); f++)
			if (aud_jsonl_key_is(&k, fields[f].name))
				break;
		/* Fields this reader does not use are still scanned (the line
		 * must be valid as a whole) but not typed: later schema
		 * additions must not make old readers reject new records. */
		if (f == SG_ARRAY_LEN(fields))
			continue;
		/* A second "decision" could make query and a jq pipeline see
		 * different records in the same line: refuse the line. */
		if (seen & (uint32_t)1 << f) {
			*why = "a field appears twice";
			return SG_ERROR;
		}
		seen |= (uint32_t)1 << f;
		if (recv_field(r, f, &v, scratch, scratchsz, &used, why) < 0)
			return SG_ERROR;
	}
	if (rc < 0) {
		*why = "not a flat JSON object";
		return SG_ERROR;
	}
	if (!r->event.p) {
		*why = "no \"event\"";
		return SG_ERROR;
	}
	if (!r->ts.p || aud_time_parse(r->ts.p, r->ts.n, &r->ts_us) < 0) {
		*why = "\"ts\" missing or not RFC 3339 time";
		return SG_ERROR;
	}
	return 0;
}

int aud_recv_has_secret(const struct aud_recv *r, const char *s)
{
	struct aud_jval e;
	size_t off = 0, n = strlen(s);

	if (r->secret.p && r->secret.n == n && !memcmp(r->secret.p, s, n))
		return 1;
	if (r->secrets.type != AUD_J_ARRAY)
		return 0;
	while (aud_jsonl_arr_next(&r->secrets, &off, &e) == 1)
		if (jstr_eq(&e, s, n))
			return 1;
	return 0;
}

/* ---- time ----------------------------------------------------------------- */

/* n decimal digits at s[*i] into *v. */
static int digits(const char *s, size_t len, size_t *i, size_t n, int *v)
{
	size_t k;

	if (len - *i < n)
		return -1;
	*v = 0;
	for (k = 0; k < n; k++) {
		if (s[*i + k] < '0' || s[*i + k] > '9')
			return -1;
		*v = *v * 10 + (s[*i + k] - '0');
	}
	*i += n;
	return 0;
}

static int expect(const char *s, size_t len, size_t *i, const char *any)
{
	if (*i >= len || !strchr(any, s[*i]) || !s[*i])
		return -1;
	(*i)++;
	return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil), so no timegm() and no TZ environment is involved. */
static int64_t days_from_civil(int y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int mdays(int y, int m)
{
	static const int dm[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return dm[m - 1];
}

/* "YYYY-MM-DD" at s[*i]. */
static int parse_date(const char *s, size_t n, size_t *i, int64_t *days)
{
	int y, mo, d;

	if (digits(s, n, i, 4, &y) || expect(s, n, i, "-") || digits(s, n, i, 2, &mo) ||
	    expect(s, n, i, "-") || digits(s, n, i, 2, &d))
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays(y, mo))
		return -1;
	*days = days_from_civil(y, mo, d);
	return 0;
}

int aud_time_parse(const char *s, size_t n, int64_t *us)
{
	size_t i = 0;
	int64_t days, frac = 0, off = 0;
	int h, mi, sec, oh, om, scale = 100000;

	/* RFC 3339 section 5.6: full-date "T" partial-time time-offset */
	if (parse_date(s, n, &i, &days) || expect(s, n, &i, "Tt ") ||
	    digits(s, n, &i, 2, &h) || expect(s, n, &i, ":") ||
	    digits(s, n, &i, 2, &mi) || expect(s, n, &i, ":") ||
	    digits(s, n, &i, 2, &sec))
		return SG_EINVAL;
	/* sec 60 is a leap second (5.7); it lands on the next minute's :00 */
	if (h > 23 || mi > 59 || sec > 60)
		return SG_EINVAL;
	if (i < n && s[i] == '.') {
		i++;
		if (i >= n || s[i] < '0' || s[i] > '9')
			return SG_EINVAL;
		for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
			frac += (s[i] - '0') * scale;
			scale /= 10;    /* digits past microseconds add 0 */
		}
	}
	if (i < n && (s[i] == 'Z' || s[i] == 'z')) {
		i++;
	} else if (i < n && (s[i] == '+' || s[i] == '-')) {
		int sign = s[i] == '-' ? -1 : 1;

		i++;
		if (digits(s, n, &i, 2, &oh) || expect(s, n, &i, ":") ||
		    digits(s, n, &i, 2, &om) || oh > 23 || om > 59)
			return SG_EINVAL;
		off = sign * (oh * 3600 + om * 60);
	} else {
		return SG_EINVAL;
	}
	if (i != n)
		return SG_EINVAL;
	*us = ((days * 86400 + h * 3600 + mi * 60 + sec) - off) * 1000000 + frac;
	return 0;
}

int aud_time_arg(const char *s, int64_t now_us, int64_t *us)
{
	size_t n = strlen(s), i = 0;
	int64_t v = 0, unit, days;

	/* No unit is an error, not seconds: "--since 90" is too easy to
	 * mean minutes, and a silently wrong window hides records. */
	if (n >= 2 && strchr("smhd", s[n - 1])) {
		for (i = 0; i < n - 1; i++) {
			if (s[i] < '0' || s[i] > '9' || v > 100000000)
				return SG_EINVAL;
			v = v * 10 + (s[i] - '0');
		}
		unit = s[n - 1] == 's' ? 1 : s[n - 1] == 'm' ? 60 :
		       s[n - 1] == 'h' ? 3600 : 86400;
		/* v < 1e9 and unit <= 86400 cannot overflow here; a span over
		 * 1,000 years is a typo, and would overflow in microseconds. */
		if (v * unit > (int64_t)1000 * 366 * 86400)
			return SG_EINVAL;
		*us = now_us - v * unit * 1000000;
		return 0;
	}
	if (n == 10) {
		if (parse_date(s, n, &i, &days) || i != n)
			return SG_EINVAL;
		*us = days * 86400 * 1000000;
		return 0;
	}
	return aud_time_parse(s, n, us);
}

/* ---- glob ----------------------------------------------------------------- */

static unsigned char fold(unsigned char c, int icase)
{
	return icase && c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/*
 * A bracket class at pat[*pi] (on its '['): 1 if c is in it, 0 if not,
 * *pi past the ']'. -1 without a closing ']' (then '[' is a literal and
 * *pi is left alone). A ']' right after the opening is a member, as in
 * fnmatch; "a-z" is a range, '\' quotes.
 */
static int glob_class(const char *pat, size_t *pi, unsigned char c, int icase)
{
	size_t j = *pi + 1;
	int neg = 0, hit = 0;

	c = fold(c, icase);
	if (pat[j] == '!' || pat[j] == '^') {
		neg = 1;
		j++;
	}
	do {
		unsigned char lo, hi;

		if (!pat[j])
			return -1;
		if (pat[j] == '\\' && pat[j + 1])
			j++;
		lo = hi = fold((unsigned char)pat[j], icase);
		if (pat[j + 1] == '-' && pat[j + 2] && pat[j + 2] != ']') {
			j += 2;
			if (pat[j] == '\\' && pat[j + 1])
				j++;
			hi = fold((unsigned char)pat[j], icase);
		}
		if (c >= lo && c <= hi)
			hit = 1;
		j++;
	} while (pat[j] != ']');
	*pi = j + 1;
	return hit != neg;
}

/*
 * Does the single pattern element at pat[*pi] ('?', a class, '\x' or a
 * literal) match byte c? Advances *pi past the element either way.
 */
static int glob_one(const char *pat, size_t *pi, unsigned char c, int icase)
{
	size_t i = *pi;
	int r;

	if (pat[i] == '?') {
		*pi = i + 1;
		return 1;
	}
	if (pat[i] == '\\' && pat[i + 1]) {
		*pi = i + 2;
		return fold((unsigned char)pat[i + 1], icase) == fold(c, icase);
	}
	if (pat[i] == '[' && (r = glob_class(pat, pi, c, icase)) >= 0)
		return r;
	*pi = i + 1;
	return fold((unsigned char)pat[i], icase) == fold(c, icase);
}

int aud_glob(const char *pat, const char *s, size_t n, int icase)
{
	size_t pi = 0, si = 0, star_pi = 0, star_si = 0, next;
	int star = 0;

	/*
	 * Greedy match remembering only the last '*': every other element
	 * eats exactly one byte, so on a mismatch it is enough to let that
	 * star eat one more byte (earlier stars never need to change).
	 */
	while (si < n) {
		if (pat[pi] == '*') {
			star = 1;
			star_pi = ++pi;
			star_si = si;
			continue;
		}
		if (pat[pi]) {
			next = pi;
			if (glob_one(pat, &next, (unsigned char)s[si], icase)) {
				pi = next;
				si++;
				continue;
			}
		}
		if (!star)
			return 0;
		pi = star_pi;
		si = ++star_si;
	}
	while (pat[pi] == '*')
		pi++;
	return pat[pi] == '\0';
}
