/*
 * sg_json.h - a JSON object writer into a caller's fixed buffer.
 *
 * No allocation. Strings are escaped per RFC 8259; bytes that are not
 * valid UTF-8 are written as \ufffd so a record always parses. When the
 * buffer is too small the writer latches an overflow flag and every later
 * call is a no-op: check sg_json_end() once at the end.
 */
#ifndef SG_JSON_H
#define SG_JSON_H

#include <stddef.h>
#include <stdint.h>

struct sg_json {
	char *buf;      /* borrowed */
	size_t cap;
	size_t len;
	int overflow;
	int need_comma;
};

void sg_json_init(struct sg_json *j, char *buf, size_t cap);
void sg_json_begin(struct sg_json *j);                       /* { */
void sg_json_key(struct sg_json *j, const char *key);
void sg_json_str(struct sg_json *j, const char *key, const char *v);   /* v NULL: null */
void sg_json_strn(struct sg_json *j, const char *key, const char *v, size_t n);
void sg_json_int(struct sg_json *j, const char *key, int64_t v);
void sg_json_bool(struct sg_json *j, const char *key, int v);
void sg_json_null(struct sg_json *j, const char *key);
/* A raw, already-valid JSON fragment (nested object or array). */
void sg_json_raw(struct sg_json *j, const char *key, const char *frag, size_t n);
/* Closes the object; returns the length, or -1 on overflow. */
int sg_json_end(struct sg_json *j);

/* Escape into out as a quoted JSON string; returns bytes written or -1. */
int sg_json_quote(char *out, size_t cap, const char *v, size_t n);

#endif
