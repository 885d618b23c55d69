#include <stdio.h>
#include <string.h>

#include "sg_json.h"
#include "sg_poison.h"

void sg_json_init(struct sg_json *j, char *buf, size_t cap)
{
	j->buf = buf;
	j->cap = cap;
	j->len = 0;
	j->overflow = 0;
	j->need_comma = 0;
}

static void put(struct sg_json *j, const char *s, size_t n)
{
	if (j->overflow)
		return;
	if (j->cap - j->len < n + 1) {
		j->overflow = 1;
		return;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = '\0';
}

/* Length of a valid UTF-8 sequence at p (RFC 3629), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf && n >= 2 && (p[1] & 0xc0) == 0x80)
		return 2;
	if (p[0] >= 0xe0 && p[0] <= 0xef && n >= 3 && (p[1] & 0xc0) == 0x80 &&
	    (p[2] & 0xc0) == 0x80) {
		if (p[0] == 0xe0 && p[1] < 0xa0)
			return 0;       /* overlong */
		if (p[0] == 0xed && p[1] >= 0xa0)
			return 0;       /* surrogates */
		return 3;
	}
	if (p[0] >= 0xf0 && p[0] <= 0xf4 && n >= 4 && (p[1] & 0xc0) == 0x80 &&
	    (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80) {
		if (p[0] == 0xf0 && p[1] < 0x90)
			return 0;
		if (p[0] == 0xf4 && p[1] >= 0x90)
			return 0;
		return 4;
	}
	return 0;
}

int sg_json_quote(char *out, size_t cap, const char *v, size_t n)
{
	const unsigned char *p = (const unsigned char *)v;
	size_t o = 0, i = 0;

#define PUTC(c) do { if (o + 1 >= cap) return -1; out[o++] = (char)(c); } while (0)
	PUTC('"');
	while (i < n) {
		unsigned char c = p[i];
		size_t ul;

		if (c == '"' || c == '\\') {
			PUTC('\\');
			PUTC(c);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			if (o + 7 >= cap)
				return -1;
			o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
			i++;
		} else if (c < 0x80) {
			PUTC(c);
			i++;
		} else if ((ul = utf8_len(p + i, n - i)) != 0) {
			if (o + ul >= cap)
				return -1;
			memcpy(out + o, p + i, ul);
			o += ul;
			i += ul;
		} else {
			if (o + 7 >= cap)
				return -1;
			memcpy(out + o, "\\ufffd", 6);
			o += 6;
			i++;
		}
	}
	PUTC('"');
#undef PUTC
	out[o] = '\0';
	return (int)o;
}

void sg_json_begin(struct sg_json *j)
{
	put(j, "{", 1);
	j->need_comma = 0;
}

void sg_json_key(struct sg_json *j, const char *key)
{
	if (j->need_comma)
		put(j, ",", 1);
	j->need_comma = 1;
	put(j, "\"", 1);
	put(j, key, strlen(key));
	put(j, "\":", 2);
}

void sg_json_strn(struct sg_json *j, const char *key, const char *v, size_t n)
{
	int w;

	sg_json_key(j, key);
	if (j->overflow)
		return;
	if (!v) {
		put(j, "null", 4);
		return;
	}
	w = sg_json_quote(j->buf + j->len, j->cap - j->len, v, n);
	if (w < 0)
		j->overflow = 1;
	else
		j->len += (size_t)w;
}

void sg_json_str(struct sg_json *j, const char *key, const char *v)
{
	sg_json_strn(j, key, v, v ? strlen(v) : 0);
}

void sg_json_int(struct sg_json *j, const char *key, int64_t v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%lld", (long long)v);

	sg_json_key(j, key);
	put(j, tmp, (size_t)n);
}

void sg_json_bool(struct sg_json *j, const char *key, int v)
{
	sg_json_key(j, key);
	put(j, v ? "true" : "false", v ? 4 : 5);
}

void sg_json_null(struct sg_json *j, const char *key)
{
	sg_json_key(j, key);
	put(j, "null", 4);
}

void sg_json_raw(struct sg_json *j, const char *key, const char *frag, size_t n)
{
	sg_json_key(j, key);
	put(j, frag, n);
}

int sg_json_end(struct sg_json *j)
{
	put(j, "}", 1);
	return j->overflow ? -1 : (int)j->len;
}
