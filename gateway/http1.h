/*
 * http1.h - HTTP/1.1 request-head parser (RFC 9112) for the proxy listener
 * and for Host sniffing on the transparent listener.
 *
 * http1_parse_request() is pure: no I/O, no allocation, resumable by
 * calling it again over the longer buffer (picohttpparser style). Header
 * names and values point into buf (borrowed), with OWS trimmed.
 *
 * Returns:
 *   SG_OK        the head (through the empty line) parsed; req->head_len
 *                is its length in bytes;
 *   SG_AGAIN     a valid prefix; read more;
 *   SG_DECLINED  the first bytes cannot start an HTTP/1.x request line;
 *   SG_ERROR     malformed (req->error says why), too many headers, or the
 *                head is longer than max_head bytes.
 *
 * Strictness (request smuggling): bare LF is accepted as a line end
 * (RFC 9112 2.2) but bare CR is an error; whitespace between a field name
 * and ':' is an error (5.1); obs-fold is an error (5.2); a request with
 * both Transfer-Encoding and Content-Length, or two Content-Length values
 * that differ, is an error (6.3); control characters in values are errors.
 */
#ifndef HTTP1_H
#define HTTP1_H

#include <stddef.h>
#include <stdint.h>

#define HTTP1_MAX_HEADERS 100

struct http1_header {
	const char *name;       /* borrowed from buf */
	size_t name_len;
	const char *value;      /* borrowed from buf */
	size_t value_len;
};

struct http1_request {
	const char *method;     /* borrowed */
	size_t method_len;
	const char *target;     /* request-target as sent: origin, absolute, authority or "*" */
	size_t target_len;
	int minor_version;      /* 0 or 1 (HTTP/1.0 or HTTP/1.1) */
	struct http1_header headers[HTTP1_MAX_HEADERS];
	size_t num_headers;
	size_t head_len;        /* bytes through the final CRLF CRLF */

	/* Derived while parsing, for framing and routing: */
	int64_t content_length; /* -1 when absent */
	int chunked;            /* Transfer-Encoding ends in "chunked" */
	int has_te;             /* any Transfer-Encoding at all */
	const char *host;       /* the (single) Host header value, or NULL */
	size_t host_len;
	const char *error;      /* static string on SG_ERROR */
};

int http1_parse_request(const uint8_t *buf, size_t len, size_t max_head,
			struct http1_request *req);

/*
 * Split an absolute-form target "http://host[:port]/path?q" (RFC 9112 3.2.2).
 * authority and path point into target (path is "/" when empty: then
 * *path_len is 1 and *path points to a static "/"). Only the "http" scheme
 * is accepted (case-insensitive). Userinfo ("user@host") is an error.
 * Returns 0, SG_DECLINED (not absolute-form) or SG_ERROR.
 */
int http1_split_absolute(const char *target, size_t len,
			 const char **authority, size_t *authority_len,
			 const char **path, size_t *path_len);

/* Case-insensitive header-name compare. */
int http1_header_is(const struct http1_header *h, const char *name);

/*
 * Is this field hop-by-hop for a proxy (RFC 9110 7.6.1)? True for
 * Connection, Keep-Alive, Proxy-Connection, Proxy-Authorization,
 * Proxy-Authenticate, TE, Trailer, Upgrade, and any field named in a
 * Connection header of req. Transfer-Encoding is framing and is kept.
 */
int http1_is_hop_by_hop(const struct http1_request *req,
			const struct http1_header *h);

/*
 * Chunked transfer-coding framing (RFC 9112 7.1), to find where a chunked
 * request body ends without decoding it: the proxy forwards the body as
 * it came and must stop exactly at its end, so bytes pipelined after it
 * (a second request) never ride on this request's decision.
 *
 * Zero-initialise the state. http1_chunked_scan() consumes bytes of the
 * stream and returns how many of them belong to the body (all of n
 * unless the end is inside), or SG_ERROR for malformed framing. Pure and
 * resumable: the bytes may arrive split anywhere. st->done is set once the
 * last-chunk and the trailer section's empty line were seen.
 */
struct http1_chunked {
	int state;
	uint64_t left;          /* bytes of chunk data still to skip */
	unsigned digits;        /* hex digits of the current size */
	unsigned line;          /* bytes of the current extension/trailer line */
	int done;
};

long http1_chunked_scan(struct http1_chunked *st, const uint8_t *p, size_t n);

/*
 * The status code of an HTTP/1.x response from its first bytes ("HTTP/1.1
 * 200 ..."): 100-599, SG_AGAIN if fewer than 12 bytes, SG_DECLINED if it
 * is not a status line.
 */
int http1_response_status(const uint8_t *p, size_t n);

#endif
