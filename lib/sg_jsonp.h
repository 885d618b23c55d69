/*
 * sg_jsonp.h - a JSON parser into a caller's token array (jsmn style).
 *
 * sg_jsonp_parse() is pure: no allocation, no I/O. It validates the whole
 * text as one JSON value (RFC 8259: strict, no comments, no trailing
 * commas, no leading zeros, nesting at most SG_JSONP_DEPTH) and fills
 * toks[] in document order: every value is one token; an object's tokens
 * are key, value, key, value...; a token's `size` is the number of
 * children (pairs for objects, elements for arrays). String tokens point
 * at the raw bytes between the quotes (escapes not decoded): use
 * sg_jsonp_str() to decode.
 *
 * Returns the number of tokens, SG_ENOMEM when toks[] is too small, or
 * SG_ERROR with *err_off set to the offending byte offset.
 */
#ifndef SG_JSONP_H
#define SG_JSONP_H

#include <stddef.h>

#define SG_JSONP_DEPTH 32

enum sg_jsonp_type { SG_JSON_OBJECT, SG_JSON_ARRAY, SG_JSON_STRING, SG_JSON_NUMBER,
		     SG_JSON_TRUE, SG_JSON_FALSE, SG_JSON_NULL };

struct sg_jsonp_tok {
	enum sg_jsonp_type type;
	size_t start, end;      /* byte offsets into the text; strings: inside the quotes */
	size_t size;            /* children: object pairs or array elements */
	size_t next;            /* index of the token after this value and all its children */
};

int sg_jsonp_parse(const char *text, size_t len, struct sg_jsonp_tok *toks, size_t ntoks,
		   size_t *err_off);

/* Decode a string token into out (NUL-terminated, UTF-8). Returns the
 * length, or SG_ENOMEM if it does not fit, or SG_ERROR for \u0000. */
int sg_jsonp_str(const char *text, const struct sg_jsonp_tok *t, char *out, size_t outsz);
/* Does a string token equal s (after decoding)? */
int sg_jsonp_eq(const char *text, const struct sg_jsonp_tok *t, const char *s);

#endif
