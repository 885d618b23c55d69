/*
 * sg_sbuf.h - a growable text buffer for responses that are built once
 * and sent (control API, reports). Allocation failure latches: check
 * sb->oom once at the end.
 */
#ifndef SG_SBUF_H
#define SG_SBUF_H

#include <stddef.h>

struct sg_sbuf {
	char *p;        /* owned; NUL-terminated while not oom */
	size_t len, cap;
	int oom;
};

void sg_sbuf_init(struct sg_sbuf *b);
void sg_sbuf_free(struct sg_sbuf *b);
void sg_sbuf_add(struct sg_sbuf *b, const char *s, size_t n);
void sg_sbuf_puts(struct sg_sbuf *b, const char *s);
void sg_sbuf_printf(struct sg_sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* s as a quoted JSON string (see sg_json_quote). */
void sg_sbuf_json_str(struct sg_sbuf *b, const char *s);

#endif
