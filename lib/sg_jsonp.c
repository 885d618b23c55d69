#include <string.h>

#include "sg.h"
#include "sg_jsonp.h"
#include "sg_poison.h"

struct jp {
	const char *s;
	size_t len, pos;
	struct sg_jsonp_tok *toks;
	size_t ntoks, n;
	int oom;
};

static void ws(struct jp *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
				   p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static long tok_new(struct jp *p, enum sg_jsonp_type type, size_t start)
{
	if (p->n == p->ntoks) {
		p->oom = 1;
		return -1;
	}
	p->toks[p->n] = (struct sg_jsonp_tok){ .type = type, .start = start };
	return (long)p->n++;
}

static int hex4(const char *s)
{
	int i, v = 0;

	for (i = 0; i < 4; i++) {
		char c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			v |= (c | 0x20) - 'a' + 10;
		else
			return -1;
	}
	return v;
}

/* A string: validates escapes and UTF-8 (RFC 3629), no raw controls. */
static int str(struct jp *p)
{
	size_t start = ++p->pos;
	long t;

	while (p->pos < p->len) {
		unsigned char c = (unsigned char)p->s[p->pos];

		if (c == '"') {
			t = tok_new(p, SG_JSON_STRING, start);
			if (t < 0)
				return -1;
			p->toks[t].end = p->pos++;
			p->toks[t].next = (size_t)t + 1;
			return 0;
		}
		if (c < 0x20)
			return -1;
		if (c == '\\') {
			if (p->pos + 1 >= p->len)
				return -1;
			c = (unsigned char)p->s[p->pos + 1];
			if (c == 'u') {
				if (p->pos + 6 > p->len || hex4(p->s + p->pos + 2) < 0)
					return -1;
				p->pos += 6;
			} else if (strchr("\"\\/bfnrt", c) && c) {
				p->pos += 2;
			} else {
				return -1;
			}
			continue;
		}
		if (c < 0x80) {
			p->pos++;
			continue;
		}
		/* multi-byte UTF-8 */
		{
			size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2, i;

			if (c < 0xc2 || c > 0xf4 || p->pos + need > p->len)
				return -1;
			for (i = 1; i < need; i++)
				if (((unsigned char)p->s[p->pos + i] & 0xc0) != 0x80)
					return -1;
			if ((c == 0xe0 && (unsigned char)p->s[p->pos + 1] < 0xa0) ||
			    (c == 0xed && (unsigned char)p->s[p->pos + 1] >= 0xa0) ||
			    (c == 0xf0 && (unsigned char)p->s[p->pos + 1] < 0x90) ||
			    (c == 0xf4 && (unsigned char)p->s[p->pos + 1] >= 0x90))
				return -1;
			p->pos += need;
		}
	}
	return -1;
}

static int digits(struct jp *p)
{
	size_t s = p->pos;

	while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
		p->pos++;
	return p->pos > s ? 0 : -1;
}

static int number(struct jp *p)
{
	size_t start = p->pos;
	long t;

	if (p->s[p->pos] == '-')
		p->pos++;
	if (p->pos < p->len && p->s[p->pos] == '0')
		p->pos++;               /* no leading zeros */
	else if (digits(p) < 0)
		return -1;
	if (p->pos < p->len && p->s[p->pos] == '.') {
		p->pos++;
		if (digits(p) < 0)
			return -1;
	}
	if (p->pos < p->len && (p->s[p->pos] | 0x20) == 'e') {
		p->pos++;
		if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
			p->pos++;
		if (digits(p) < 0)
			return -1;
	}
	t = tok_new(p, SG_JSON_NUMBER, start);
	if (t < 0)
		return -1;
	p->toks[t].end = p->pos;
	p->toks[t].next = (size_t)t + 1;
	return 0;
}

static int literal(struct jp *p, const char *word, enum sg_jsonp_type type)
{
	size_t n = strlen(word);
	long t;

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n))
		return -1;
	t = tok_new(p, type, p->pos);
	if (t < 0)
		return -1;
	p->pos += n;
	p->toks[t].end = p->pos;
	p->toks[t].next = (size_t)t + 1;
	return 0;
}

static int value(struct jp *p, int depth);

static int container(struct jp *p, int depth, int is_obj)
{
	long t = tok_new(p, is_obj ? SG_JSON_OBJECT : SG_JSON_ARRAY, p->pos);
	char close = is_obj ? '}' : ']';

	if (t < 0 || depth >= SG_JSONP_DEPTH)
		return -1;
	p->pos++;
	ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		goto done;
	}
	for (;;) {
		ws(p);
		if (is_obj) {
			if (p->pos >= p->len || p->s[p->pos] != '"' || str(p) < 0)
				return -1;
			ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
				return -1;
			p->pos++;
			ws(p);
		}
		if (value(p, depth + 1) < 0)
			return -1;
		p->toks[t].size++;
		ws(p);
		if (p->pos >= p->len)
			return -1;
		if (p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->s[p->pos] != close)
			return -1;
		p->pos++;
		break;
	}
done:
	p->toks[t].end = p->pos;
	p->toks[t].next = p->n;
	return 0;
}

static int value(struct jp *p, int depth)
{
	if (p->pos >= p->len)
		return -1;
	switch (p->s[p->pos]) {
	case '{': return container(p, depth, 1);
	case '[': return container(p, depth, 0);
	case '"': return str(p);
	case 't': return literal(p, "true", SG_JSON_TRUE);
	case 'f': return literal(p, "false", SG_JSON_FALSE);
	case 'n': return literal(p, "null", SG_JSON_NULL);
	default:
		if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))
			return number(p);
		return -1;
	}
}

int sg_jsonp_parse(const char *text, size_t len, struct sg_jsonp_tok *toks, size_t ntoks,
		   size_t *err_off)
{
	struct jp p = { .s = text, .len = len, .toks = toks, .ntoks = ntoks };

	ws(&p);
	if (value(&p, 0) < 0 || (ws(&p), p.pos != p.len)) {
		if (err_off)
			*err_off = p.pos;
		return p.oom ? SG_ENOMEM : SG_ERROR;
	}
	return (int)p.n;
}

static size_t utf8_put(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

int sg_jsonp_str(const char *text, const struct sg_jsonp_tok *t, char *out, size_t outsz)
{
	size_t i = t->start, o = 0;

	if (t->type != SG_JSON_STRING || !outsz)
		return SG_ERROR;
	while (i < t->end) {
		char c = text[i];
		char buf[4];
		size_t n = 1;

		if (c != '\\') {
			buf[0] = c;
			i++;
		} else {
			char e = text[i + 1];

			i += 2;
			switch (e) {
			case 'b': buf[0] = '\b'; break;
			case 'f': buf[0] = '\f'; break;
			case 'n': buf[0] = '\n'; break;
			case 'r': buf[0] = '\r'; break;
			case 't': buf[0] = '\t'; break;
			case 'u': {
				unsigned cp = (unsigned)hex4(text + i);

				i += 4;
				/* A surrogate pair makes one code point; a lone
				 * surrogate becomes U+FFFD. */
				if (cp >= 0xd800 && cp < 0xdc00 && i + 6 <= t->end &&
				    text[i] == '\\' && text[i + 1] == 'u') {
					unsigned lo = (unsigned)hex4(text + i + 2);

					if (lo >= 0xdc00 && lo < 0xe000) {
						cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
						i += 6;
					}
				}
				if (cp >= 0xd800 && cp < 0xe000)
					cp = 0xfffd;
				if (cp == 0)
					return SG_ERROR;        /* no NULs in C strings */
				n = utf8_put(buf, cp);
				break;
			}
			default: buf[0] = e; break;     /* " \ / */
			}
		}
		if (o + n >= outsz)
			return SG_ENOMEM;
		memcpy(out + o, buf, n);
		o += n;
	}
	out[o] = '\0';
	return (int)o;
}

int sg_jsonp_eq(const char *text, const struct sg_jsonp_tok *t, const char *s)
{
	char buf[256];
	int n = sg_jsonp_str(text, t, buf, sizeof(buf));

	return n >= 0 && (size_t)n == strlen(s) && !memcmp(buf, s, (size_t)n);
}
