#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_json.h"
#include "sg_sbuf.h"
#include "sg_poison.h"

void sg_sbuf_init(struct sg_sbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void sg_sbuf_free(struct sg_sbuf *b)
{
	free(b->p);
	sg_sbuf_init(b);
}

static int reserve(struct sg_sbuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return -1;
	if (b->len + n + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void sg_sbuf_add(struct sg_sbuf *b, const char *s, size_t n)
{
	if (reserve(b, n) < 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void sg_sbuf_puts(struct sg_sbuf *b, const char *s)
{
	sg_sbuf_add(b, s, strlen(s));
}

void sg_sbuf_printf(struct sg_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || reserve(b, (size_t)n) < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sg_sbuf_json_str(struct sg_sbuf *b, const char *s)
{
	size_t n = strlen(s);
	int w;

	/* Worst case every byte becomes \uXXXX. */
	if (reserve(b, n * 6 + 3) < 0)
		return;
	w = sg_json_quote(b->p + b->len, b->cap - b->len, s, n);
	if (w < 0) {
		b->oom = 1;
		return;
	}
	b->len += (size_t)w;
}
