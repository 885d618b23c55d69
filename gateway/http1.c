/*
 * http1.c - HTTP/1.1 request-head parser (RFC 9112) and proxy helpers.
 * The parser keeps no state between calls: it re-reads from byte 0 through
 * an sg_rd window of min(len, max_head) bytes (picohttpparser style).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sg.h"
#include "sg_str.h"
#include "http1.h"
#include "sg_poison.h"

/* Longest method we take for HTTP; longer tokens are some other protocol. */
#define HTTP1_METHOD_MAX 20

static int h1_fail(struct http1_request *req, const char *why)
{
	req->error = why;
	return SG_ERROR;
}

/* The next byte without consuming it, or -1 at the end of the window. */
static inline int h1_peek(const struct sg_rd *rd)
{
	return sg_rd_left(rd) ? rd->p[rd->off] : -1;
}

static inline const char *h1_at(const struct sg_rd *rd, size_t off)
{
	return (const char *)rd->p + off;
}

/* tchar (RFC 9110 5.6.2): the bytes of methods and field names. */
static int h1_is_tchar(int c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	/* c > 0: strchr() would match the terminating NUL */
	return c > 0 && c < 0x80 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static inline int h1_is_ows(int c)
{
	return c == ' ' || c == '\t';
}

/*
 * Consume one line end at a CR or LF. RFC 9112 2.2 allows a bare LF, but a
 * CR not followed by LF is rejected: another hop may end the line there.
 */
static int h1_eol(struct sg_rd *rd, struct http1_request *req)
{
	if (h1_peek(rd) == '\r') {
		if (sg_rd_left(rd) < 2)
			return SG_AGAIN;
		if (rd->p[rd->off + 1] != '\n')
			return h1_fail(req, "bare CR");
		sg_rd_skip(rd, 2);
		return SG_OK;
	}
	sg_rd_skip(rd, 1);
	return SG_OK;
}

/*
 * Next element of a comma-separated list (RFC 9110 5.6.1), OWS trimmed;
 * *pos starts at 0. An empty value is one empty element.
 */
static int h1_list_next(const char *v, size_t n, size_t *pos,
			const char **el, size_t *el_len)
{
	size_t i = *pos, s, e;

	if (i > n)
		return 0;
	s = i;
	while (i < n && v[i] != ',')
		i++;
	e = i;
	*pos = i + 1;
	while (s < e && h1_is_ows(v[s]))
		s++;
	while (e > s && h1_is_ows(v[e - 1]))
		e--;
	*el = v + s;
	*el_len = e - s;
	return 1;
}

/*
 * request-line = method SP request-target SP HTTP-version (RFC 9112 3).
 * Anything but 1..20 tchars and SP is SG_DECLINED as soon as the bad byte
 * is in, so TLS (0x16) or junk is handed on at once. Past the method every
 * fault is SG_ERROR: one SP (3), a visible-ASCII target (3.2), "HTTP/1.0"
 * or "HTTP/1.1" exactly (2.3: case-sensitive). The h2 preface
 * "PRI * HTTP/2.0" (RFC 9113 3.4) is SG_ERROR: PRI is a valid token.
 */
static int h1_request_line(struct sg_rd *rd, struct http1_request *req)
{
	static const char version[] = "HTTP/1.";
	size_t start, i;
	int c;

	start = rd->off;
	while ((c = h1_peek(rd)) >= 0 && h1_is_tchar(c)) {
		if (rd->off - start == HTTP1_METHOD_MAX)
			return SG_DECLINED;
		sg_rd_skip(rd, 1);
	}
	if (c < 0)
		return SG_AGAIN;
	if (c != ' ' || rd->off == start)
		return SG_DECLINED;
	req->method = h1_at(rd, start);
	req->method_len = rd->off - start;
	sg_rd_skip(rd, 1);

	start = rd->off;
	while ((c = h1_peek(rd)) > 0x20 && c < 0x7f)
		sg_rd_skip(rd, 1);
	if (c < 0)
		return SG_AGAIN;
	if (c != ' ')
		return h1_fail(req, "invalid byte in request-target");
	if (rd->off == start)
		return h1_fail(req, "empty request-target");
	req->target = h1_at(rd, start);
	req->target_len = rd->off - start;
	sg_rd_skip(rd, 1);

	for (i = 0; i < sizeof(version) - 1; i++) {
		if ((c = h1_peek(rd)) < 0)
			return SG_AGAIN;
		if (c != version[i])
			return h1_fail(req, "unsupported HTTP version");
		sg_rd_skip(rd, 1);
	}
	if ((c = h1_peek(rd)) < 0)
		return SG_AGAIN;
	if (c != '0' && c != '1')
		return h1_fail(req, "unsupported HTTP version");
	req->minor_version = c - '0';
	sg_rd_skip(rd, 1);

	if ((c = h1_peek(rd)) < 0)
		return SG_AGAIN;
	if (c != '\r' && c != '\n')
		return h1_fail(req, "junk after HTTP version");
	return h1_eol(rd, req);
}

/*
 * field-line = field-name ":" OWS field-value OWS (RFC 9112 5). Whitespace
 * before the colon MUST be rejected (5.1). Values keep obs-text and HTAB
 * (RFC 9110 5.5) but no other control byte, which hops read differently.
 */
static int h1_field_line(struct sg_rd *rd, struct http1_request *req,
			 struct http1_header *h)
{
	size_t start = rd->off, end;
	int c;

	while ((c = h1_peek(rd)) >= 0 && h1_is_tchar(c))
		sg_rd_skip(rd, 1);
	if (c < 0)
		return SG_AGAIN;
	if (c != ':')
		return h1_fail(req, h1_is_ows(c) ? "whitespace before colon"
						 : "invalid byte in field name");
	if (rd->off == start)
		return h1_fail(req, "empty field name");
	h->name = h1_at(rd, start);
	h->name_len = rd->off - start;
	sg_rd_skip(rd, 1);

	while (h1_is_ows(h1_peek(rd)))
		sg_rd_skip(rd, 1);
	/* end trails the last non-OWS byte: trailing OWS is not the value */
	start = end = rd->off;
	for (;;) {
		if ((c = h1_peek(rd)) < 0)
			return SG_AGAIN;
		if (c == '\r' || c == '\n')
			break;
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return h1_fail(req, "control byte in field value");
		sg_rd_skip(rd, 1);
		if (!h1_is_ows(c))
			end = rd->off;
	}
	h->value = h1_at(rd, start);
	h->value_len = end - start;
	return h1_eol(rd, req);
}

/*
 * Content-Length (RFC 9110 8.6): 1*DIGIT. Identical values, in one field
 * or several, are accepted; differing ones are rejected, as hops would
 * frame the body differently (RFC 9112 6.3 item 5).
 */
static int h1_content_length(struct http1_request *req,
			     const struct http1_header *h)
{
	const char *el;
	size_t n, pos = 0, i;

	while (h1_list_next(h->value, h->value_len, &pos, &el, &n)) {
		int64_t v = 0;

		if (n == 0)
			return h1_fail(req, "invalid Content-Length");
		for (i = 0; i < n; i++) {
			int d = el[i] - '0';

			if (d < 0 || d > 9)
				return h1_fail(req, "invalid Content-Length");
			if (v > (INT64_MAX - d) / 10)
				return h1_fail(req, "Content-Length overflow");
			v = v * 10 + d;
		}
		if (req->content_length >= 0 && req->content_length != v)
			return h1_fail(req, "conflicting Content-Length");
		req->content_length = v;
	}
	return SG_OK;
}

/*
 * Transfer-Encoding (RFC 9112 6.1): all TE fields form one list; the body
 * is chunked when "chunked" is the last coding. has_te && !chunked has no
 * determinable length (6.3 item 4): the caller must answer 400.
 */
static void h1_transfer_encoding(struct http1_request *req,
				 const struct http1_header *h)
{
	const char *el;
	size_t n, pos = 0;

	req->has_te = 1;
	while (h1_list_next(h->value, h->value_len, &pos, &el, &n))
		if (n > 0)
			req->chunked = n == 7 && sg_strncaseeq(el, "chunked", 7);
}

/*
 * Framing and routing fields, judged as each line completes. CL with TE is
 * the classic smuggling shape (RFC 9112 6.1); a second Host is a 400 (3.2).
 */
static int h1_derive(struct http1_request *req, const struct http1_header *h)
{
	int rc = SG_OK;

	if (http1_header_is(h, "Content-Length"))
		rc = h1_content_length(req, h);
	else if (http1_header_is(h, "Transfer-Encoding"))
		h1_transfer_encoding(req, h);
	else if (http1_header_is(h, "Host")) {
		if (req->host)
			return h1_fail(req, "duplicate Host");
		req->host = h->value;
		req->host_len = h->value_len;
	}
	if (rc == SG_OK && req->has_te && req->content_length >= 0)
		return h1_fail(req, "both Transfer-Encoding and Content-Length");
	return rc;
}

/* The request line, the field lines, the empty line; nothing is kept. */
static int h1_parse_head(struct sg_rd *rd, struct http1_request *req)
{
	int rc, c;

	if ((rc = h1_request_line(rd, req)) != SG_OK)
		return rc;
	for (;;) {
		struct http1_header *h;

		if ((c = h1_peek(rd)) < 0)
			return SG_AGAIN;
		if (c == '\r' || c == '\n') {
			if ((rc = h1_eol(rd, req)) != SG_OK)
				return rc;
			req->head_len = rd->off;
			return SG_OK;
		}
		/*
		 * A line that starts with whitespace is obs-fold (RFC 9112
		 * 5.2), or whitespace before the first field (2.2): both
		 * are rejected rather than unfolded, as other hops differ.
		 */
		if (h1_is_ows(c))
			return h1_fail(req, "obs-fold or leading whitespace");
		if (req->num_headers == HTTP1_MAX_HEADERS)
			return h1_fail(req, "too many header fields");
		h = &req->headers[req->num_headers];
		if ((rc = h1_field_line(rd, req, h)) != SG_OK)
			return rc;
		req->num_headers++;
		if ((rc = h1_derive(req, h)) != SG_OK)
			return rc;
	}
}

/*
 * Parse one request head (return codes in http1.h); req is reset first.
 * Once len >= max_head without a whole head, no later byte can help: that
 * is SG_ERROR, not SG_AGAIN, or a caller whose buffer holds max_head bytes
 * would wait forever. Bytes past head_len are not looked at.
 */
int http1_parse_request(const uint8_t *buf, size_t len, size_t max_head,
			struct http1_request *req)
{
	struct sg_rd rd;
	int rc;

	memset(req, 0, sizeof(*req));
	req->content_length = -1;
	sg_rd_init(&rd, buf, SG_MIN(len, max_head));
	rc = h1_parse_head(&rd, req);
	if (rc == SG_AGAIN && len >= max_head)
		return h1_fail(req, "header too large");
	return rc;
}

/* Authority bytes (RFC 3986 3.2); a backslash or quote is ambiguous. */
static int h1_is_authority_char(int c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return c > 0 && strchr("-._~%!$&'()*+,;=:[]", c) != NULL;
}

/* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 3.1) */
static int h1_is_scheme_char(int c, int first)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return 1;
	return !first && ((c >= '0' && c <= '9') || c == '+' || c == '-' ||
			  c == '.');
}

/*
 * Split an absolute-form target (RFC 9112 3.2.2). Only "scheme://" counts:
 * "host:443" is CONNECT's authority-form (3.2.3), SG_DECLINED like "/" and
 * "*". Other schemes are errors (https goes through CONNECT), so is
 * userinfo (RFC 9110 4.2.4, the "http://good@evil/" spoof), and so is
 * "http://h?q": its origin-form "/?q" is not inside target.
 */
int http1_split_absolute(const char *target, size_t len,
			 const char **authority, size_t *authority_len,
			 const char **path, size_t *path_len)
{
	size_t i = 0, a;

	while (i < len && h1_is_scheme_char(target[i], i == 0))
		i++;
	if (i == 0 || len - i < 3 || memcmp(target + i, "://", 3) != 0)
		return SG_DECLINED;
	if (i != 4 || !sg_strncaseeq(target, "http", 4))
		return SG_ERROR;
	a = i += 3;
	while (i < len && target[i] != '/' && target[i] != '?' &&
	       target[i] != '#') {
		if (target[i] == '@' || !h1_is_authority_char(target[i]))
			return SG_ERROR;
		i++;
	}
	/* RFC 9110 4.2.1: an http URI with an empty host is invalid */
	if (i == a)
		return SG_ERROR;
	/* absolute-URI has no fragment; a query needs a path (see above) */
	if (i < len && target[i] != '/')
		return SG_ERROR;
	if (memchr(target + i, '#', len - i))
		return SG_ERROR;
	*authority = target + a;
	*authority_len = i - a;
	if (i == len) {
		*path = "/";
		*path_len = 1;
	} else {
		*path = target + i;
		*path_len = len - i;
	}
	return 0;
}

/* Field names are case-insensitive (RFC 9110 5.1). */
int http1_header_is(const struct http1_header *h, const char *name)
{
	size_t n = strlen(name);

	return h->name_len == n && sg_strncaseeq(h->name, name, n);
}

/*
 * Hop-by-hop fields (RFC 9110 7.6.1): the fixed set plus names listed in
 * any Connection field. Transfer-Encoding, Content-Length and Host are kept
 * even when listed: a body forwarded without its framing field would be
 * read by the next hop as a second request.
 */
int http1_is_hop_by_hop(const struct http1_request *req,
			const struct http1_header *h)
{
	static const char *const fixed[] = {
		"Connection", "Keep-Alive", "Proxy-Connection",
		"Proxy-Authorization", "Proxy-Authenticate", "TE", "Trailer",
		"Upgrade",
	};
	size_t i;

	for (i = 0; i < SG_ARRAY_LEN(fixed); i++)
		if (http1_header_is(h, fixed[i]))
			return 1;
	if (http1_header_is(h, "Transfer-Encoding") ||
	    http1_header_is(h, "Content-Length") || http1_header_is(h, "Host"))
		return 0;
	for (i = 0; i < req->num_headers; i++) {
		const struct http1_header *c = &req->headers[i];
		const char *el;
		size_t n, pos = 0;

		if (!http1_header_is(c, "Connection"))
			continue;
		while (h1_list_next(c->value, c->value_len, &pos, &el, &n))
			if (n > 0 && n == h->name_len &&
			    sg_strncaseeq(el, h->name, n))
				return 1;
	}
	return 0;
}

/* ---- chunked framing (RFC 9112 7.1) ---- */

enum {
	CH_SIZE,        /* hex digits of chunk-size */
	CH_EXT,         /* chunk-ext, up to the line end */
	CH_SIZE_LF,     /* CR seen after the size line */
	CH_DATA,        /* chunk-data */
	CH_DATA_CR,     /* CRLF after chunk-data */
	CH_DATA_LF,
	CH_TRAILER,     /* trailer field line (or the final empty line) */
	CH_TRAILER_LF,
	CH_DONE,
};

#define CH_MAX_LINE 4096        /* a chunk-ext or trailer line */

static int hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

long http1_chunked_scan(struct http1_chunked *st, const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n && st->state != CH_DONE) {
		uint8_t c = p[i];

		switch (st->state) {
		case CH_SIZE:
			if (hexval(c) >= 0) {
				/* 15 hex digits: 2^60 bytes is already absurd; more
				 * would overflow the counter. */
				if (++st->digits > 15)
					return SG_ERROR;
				st->left = st->left << 4 | (uint64_t)hexval(c);
				i++;
				break;
			}
			if (!st->digits)
				return SG_ERROR;
			st->line = 0;
			st->state = CH_EXT;
			break;          /* re-examine c as part of the extension */
		case CH_EXT:
			if (c == '\r') {
				st->state = CH_SIZE_LF;
			} else if (c == '\n') {
				goto size_line_done;
			} else if ((c < 0x20 && c != '\t') || c == 0x7f ||
				   ++st->line > CH_MAX_LINE) {
				return SG_ERROR;
			}
			i++;
			break;
		case CH_SIZE_LF:
			if (c != '\n')
				return SG_ERROR;
size_line_done:
			i++;
			st->digits = 0;
			st->line = 0;
			st->state = st->left ? CH_DATA : CH_TRAILER;
			break;
		case CH_DATA: {
			size_t take = n - i;

			if ((uint64_t)take > st->left)
				take = (size_t)st->left;
			st->left -= take;
			i += take;
			if (!st->left)
				st->state = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (c == '\n') {
				st->state = CH_SIZE;
			} else if (c == '\r') {
				st->state = CH_DATA_LF;
			} else {
				return SG_ERROR;
			}
			i++;
			break;
		case CH_DATA_LF:
			if (c != '\n')
				return SG_ERROR;
			st->state = CH_SIZE;
			i++;
			break;
		case CH_TRAILER:
			if (c == '\r') {
				st->state = CH_TRAILER_LF;
			} else if (c == '\n') {
				goto trailer_line_done;
			} else if ((c < 0x20 && c != '\t') || c == 0x7f ||
				   ++st->line > CH_MAX_LINE) {
				return SG_ERROR;
			}
			i++;
			break;
		case CH_TRAILER_LF:
			if (c != '\n')
				return SG_ERROR;
trailer_line_done:
			i++;
			/* An empty line ends the message; a field line waits for
			 * the next one. */
			if (st->line == 0)
				st->state = CH_DONE;
			else
				st->state = CH_TRAILER;
			st->line = 0;
			break;
		}
	}
	if (st->state == CH_DONE)
		st->done = 1;
	return (long)i;
}

int http1_response_status(const uint8_t *p, size_t n)
{
	int code;

	if (n < 12)
		return SG_AGAIN;
	if (memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
	    p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' ||
	    p[11] < '0' || p[11] > '9')
		return SG_DECLINED;
	code = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	return code;
}
