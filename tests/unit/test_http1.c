/*
 * test_http1.c - the HTTP/1.1 request-head parser (gateway/http1.c).
 *
 * Each fixture is the bytes a client would send; the tests check what the
 * proxy acts on: the verdict, the target, the framing, the Host, and the
 * fields it would strip before forwarding.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "sg.h"
#include "gateway/http1.h"

#define MAX_HEAD 65536

static int parse_n(const char *s, size_t n, struct http1_request *req)
{
	return http1_parse_request((const uint8_t *)s, n, MAX_HEAD, req);
}

static int parse(const char *s, struct http1_request *req)
{
	return parse_n(s, strlen(s), req);
}

/* Parse s, expect SG_ERROR and a reason. */
static void expect_error(const char *s)
{
	struct http1_request req;

	assert_int_equal(parse(s, &req), SG_ERROR);
	assert_non_null(req.error);
}

static void assert_span(const char *p, size_t n, const char *want)
{
	assert_non_null(p);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(p, want, n);
}

static void test_connect(void **state)
{
	static const char s[] =
		"CONNECT example.com:443 HTTP/1.1\r\n"
		"Host: example.com:443\r\n"
		"\r\n";
	struct http1_request req;
	const char *a, *p;
	size_t al, pl;

	(void)state;
	assert_int_equal(parse(s, &req), SG_OK);
	assert_span(req.method, req.method_len, "CONNECT");
	assert_span(req.target, req.target_len, "example.com:443");
	assert_int_equal(req.minor_version, 1);
	assert_int_equal(req.num_headers, 1);
	assert_span(req.host, req.host_len, "example.com:443");
	assert_int_equal(req.head_len, sizeof(s) - 1);
	assert_int_equal(req.content_length, -1);
	assert_int_equal(req.chunked, 0);
	assert_int_equal(req.has_te, 0);
	assert_null(req.error);
	/* authority-form is not absolute-form, though "example.com:" looks
	 * like a scheme */
	assert_int_equal(http1_split_absolute(req.target, req.target_len,
					      &a, &al, &p, &pl), SG_DECLINED);
}

static void test_absolute_get(void **state)
{
	static const char s[] =
		"GET http://example.com:8080/a/b?c=d HTTP/1.1\r\n"
		"Host: example.com:8080\r\n"
		"User-Agent: t/1.0\r\n"
		"Accept: \t */* \t \r\n"
		"X-Empty:\r\n"
		"Proxy-Connection: keep-alive\r\n"
		"\r\n";
	struct http1_request req;
	const char *a, *p;
	size_t al, pl;

	(void)state;
	assert_int_equal(parse(s, &req), SG_OK);
	assert_span(req.method, req.method_len, "GET");
	assert_int_equal(req.num_headers, 5);
	assert_span(req.headers[0].name, req.headers[0].name_len, "Host");
	assert_span(req.headers[1].value, req.headers[1].value_len, "t/1.0");
	/* OWS on both sides is not part of the value */
	assert_span(req.headers[2].value, req.headers[2].value_len, "*/*");
	assert_int_equal(req.headers[3].value_len, 0);
	assert_span(req.headers[4].name, req.headers[4].name_len,
		    "Proxy-Connection");
	assert_int_equal(http1_split_absolute(req.target, req.target_len,
					      &a, &al, &p, &pl), 0);
	assert_span(a, al, "example.com:8080");
	assert_span(p, pl, "/a/b?c=d");
}

static void test_origin_form(void **state)
{
	static const char s[] =
		"POST /upload HTTP/1.0\r\n"
		"Host: www.example.org\r\n"
		"Content-Length: 5\r\n"
		"\r\n"
		"hello";
	struct http1_request req;
	const char *a, *p;
	size_t al, pl;

	(void)state;
	assert_int_equal(parse(s, &req), SG_OK);
	assert_int_equal(req.minor_version, 0);
	assert_span(req.target, req.target_len, "/upload");
	assert_span(req.host, req.host_len, "www.example.org");
	assert_int_equal(req.content_length, 5);
	/* the body is not part of the head */
	assert_int_equal(req.head_len, sizeof(s) - 1 - 5);
	assert_int_equal(http1_split_absolute(req.target, req.target_len,
					      &a, &al, &p, &pl), SG_DECLINED);
	assert_int_equal(http1_split_absolute("*", 1, &a, &al, &p, &pl),
			 SG_DECLINED);
}

/*
 * Resumability: every strict prefix of a valid head is SG_AGAIN, and the
 * full buffer parsed into a req that saw all those prefixes gives exactly
 * what a fresh one-shot parse gives.
 */
static void check_prefixes(const char *s, size_t head_len, size_t total)
{
	struct http1_request req, fresh;
	size_t n;

	for (n = 0; n < head_len; n++) {
		int rc = parse_n(s, n, &req);

		if (rc != SG_AGAIN)
			fail_msg("prefix of %zu bytes: rc %d (%s)", n, rc,
				 req.error ? req.error : "");
	}
	assert_int_equal(parse_n(s, total, &req), SG_OK);
	assert_int_equal(req.head_len, head_len);
	memset(&fresh, 0xa5, sizeof(fresh));
	assert_int_equal(parse_n(s, total, &fresh), SG_OK);
	assert_memory_equal(&req, &fresh, sizeof(req));
	/* and any head-sized prefix of a longer buffer agrees */
	assert_int_equal(parse_n(s, head_len, &fresh), SG_OK);
	assert_memory_equal(&req, &fresh, sizeof(req));
}

static void test_every_prefix(void **state)
{
	static const char crlf[] =
		"PUT http://h.example/p HTTP/1.1\r\n"
		"Host: h.example\r\n"
		"Transfer-Encoding: gzip, chunked\r\n"
		"Connection: close\r\n"
		"X-Obs: caf\xc3\xa9\t\xff\r\n"
		"\r\n";
	static const char lf[] =
		"GET / HTTP/1.0\n"
		"Host: a\n"
		"Content-Length: 0\r\n"
		"\n"
		"trailing body bytes";

	(void)state;
	check_prefixes(crlf, sizeof(crlf) - 1, sizeof(crlf) - 1);
	check_prefixes(lf, strlen("GET / HTTP/1.0\nHost: a\n"
				  "Content-Length: 0\r\n\n"), sizeof(lf) - 1);
}

static void test_bare_lf(void **state)
{
	static const char s[] = "GET / HTTP/1.1\nHost: a\nX: y\n\n";
	struct http1_request req;

	(void)state;
	assert_int_equal(parse(s, &req), SG_OK);
	assert_int_equal(req.head_len, sizeof(s) - 1);
	assert_int_equal(req.num_headers, 2);
	assert_span(req.host, req.host_len, "a");
	assert_span(req.headers[1].value, req.headers[1].value_len, "y");
}

static void test_bare_cr(void **state)
{
	struct http1_request req;

	(void)state;
	expect_error("GET / HTTP/1.1\rHost: a\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nHost: a\r\n\rX");
	/* a CR that is the last byte so far may still be a CRLF */
	assert_int_equal(parse("GET / HTTP/1.1\r", &req), SG_AGAIN);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r", &req), SG_AGAIN);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n\r", &req),
			 SG_AGAIN);
}

static void test_field_name(void **state)
{
	struct http1_request req;

	(void)state;
	expect_error("GET / HTTP/1.1\r\nHost : a\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\n: a\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nHo\"st: a\r\n\r\n");
	/* a line with no colon at all */
	expect_error("GET / HTTP/1.1\r\nHost\r\n\r\n");
	assert_int_equal(parse("GET / HTTP/1.1\r\nX-!#$%&'*+-.^_`|~: v\r\n\r\n",
			       &req), SG_OK);
}

static void test_obs_fold(void **state)
{
	(void)state;
	expect_error("GET / HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nX-A: b\r\n\tc\r\n\r\n");
	/* whitespace between the request line and the first field */
	expect_error("GET / HTTP/1.1\r\n Host: a\r\n\r\n");
}

static void test_field_value_bytes(void **state)
{
	static const char nul[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
	struct http1_request req;

	(void)state;
	assert_int_equal(parse_n(nul, sizeof(nul) - 1, &req), SG_ERROR);
	expect_error("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nX: a\x1b[0m\r\n\r\n");
	assert_int_equal(parse("GET / HTTP/1.1\r\nX: a\tb \x80\xff\r\n\r\n",
			       &req), SG_OK);
	assert_span(req.headers[0].value, req.headers[0].value_len,
		    "a\tb \x80\xff");
}

static void test_content_length(void **state)
{
	struct http1_request req;

	(void)state;
	assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 5\r\n"
			       "content-length: 5\r\n\r\n", &req), SG_OK);
	assert_int_equal(req.content_length, 5);
	assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 7 , 7,7\r\n"
			       "\r\n", &req), SG_OK);
	assert_int_equal(req.content_length, 7);
	assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 9223372036"
			       "854775807\r\n\r\n", &req), SG_OK);
	assert_int_equal(req.content_length, INT64_MAX);
	assert_int_equal(parse("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
			       &req), SG_OK);
	assert_int_equal(req.content_length, 0);

	expect_error("POST / HTTP/1.1\r\nContent-Length: 5\r\n"
		     "Content-Length: 6\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 5\r\n"
		     "Content-Length: 5, 50\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 5,\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 9223372036"
		     "854775808\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nContent-Length: 99999999999999999"
		     "999999\r\n\r\n");
}

static void test_cl_and_te(void **state)
{
	(void)state;
	expect_error("POST / HTTP/1.1\r\nContent-Length: 5\r\n"
		     "Transfer-Encoding: chunked\r\n\r\n");
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		     "Content-Length: 5\r\n\r\n");
	/* not only when the body would be chunked */
	expect_error("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n"
		     "Content-Length: 0\r\n\r\n");
}

static void expect_te(const char *fields, int chunked)
{
	char buf[512];
	struct http1_request req;

	snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: h\r\n%s\r\n",
		 fields);
	assert_int_equal(parse(buf, &req), SG_OK);
	assert_int_equal(req.has_te, 1);
	if (req.chunked != chunked)
		fail_msg("%s: chunked %d, want %d", fields, req.chunked,
			 chunked);
	assert_int_equal(req.content_length, -1);
}

static void test_chunked(void **state)
{
	struct http1_request req;

	(void)state;
	expect_te("Transfer-Encoding: chunked\r\n", 1);
	expect_te("Transfer-Encoding: CHUNKED\r\n", 1);
	expect_te("Transfer-Encoding: gzip, chunked\r\n", 1);
	expect_te("Transfer-Encoding: gzip,chunked , \r\n", 1);
	expect_te("Transfer-Encoding: gzip\r\n"
		  "transfer-encoding: chunked\r\n", 1);
	expect_te("Transfer-Encoding: chunked\r\n"
		  "Transfer-Encoding:\r\n", 1);
	expect_te("Transfer-Encoding: chunked, gzip\r\n", 0);
	expect_te("Transfer-Encoding: chunked\r\n"
		  "Transfer-Encoding: gzip\r\n", 0);
	expect_te("Transfer-Encoding: xchunked\r\n", 0);
	expect_te("Transfer-Encoding: chunked;q=1\r\n", 0);
	expect_te("Transfer-Encoding:\r\n", 0);

	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req),
			 SG_OK);
	assert_int_equal(req.has_te, 0);
	assert_int_equal(req.chunked, 0);
}

static void test_host(void **state)
{
	struct http1_request req;

	(void)state;
	expect_error("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n");
	expect_error("GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n");
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost:\r\n\r\n", &req), SG_OK);
	assert_non_null(req.host);
	assert_int_equal(req.host_len, 0);
	assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", &req), SG_OK);
	assert_null(req.host);
	assert_int_equal(req.host_len, 0);
	assert_int_equal(req.num_headers, 0);
}

/* n fields "X-<i>: v" and the empty line, into buf. */
static size_t build_fields(char *buf, size_t cap, size_t n)
{
	size_t off, i;

	off = (size_t)snprintf(buf, cap, "GET / HTTP/1.1\r\n");
	for (i = 0; i < n; i++)
		off += (size_t)snprintf(buf + off, cap - off, "X-%zu: v\r\n", i);
	off += (size_t)snprintf(buf + off, cap - off, "\r\n");
	assert_true(off < cap);
	return off;
}

static void test_header_limit(void **state)
{
	char buf[4096];
	struct http1_request req;
	size_t n;

	(void)state;
	n = build_fields(buf, sizeof(buf), HTTP1_MAX_HEADERS);
	assert_int_equal(parse_n(buf, n, &req), SG_OK);
	assert_int_equal(req.num_headers, HTTP1_MAX_HEADERS);
	assert_span(req.headers[HTTP1_MAX_HEADERS - 1].name,
		    req.headers[HTTP1_MAX_HEADERS - 1].name_len, "X-99");

	n = build_fields(buf, sizeof(buf), HTTP1_MAX_HEADERS + 1);
	assert_int_equal(parse_n(buf, n, &req), SG_ERROR);
	assert_non_null(req.error);
}

static void test_max_head(void **state)
{
	static const char s[] =
		"GET / HTTP/1.1\r\nHost: a\r\nX-Pad: 0123456789\r\n\r\nBODY";
	const uint8_t *b = (const uint8_t *)s;
	size_t head = sizeof(s) - 1 - 4;
	struct http1_request req;

	(void)state;
	/* exactly max_head bytes of head, with a body past it: fine */
	assert_int_equal(http1_parse_request(b, sizeof(s) - 1, head, &req),
			 SG_OK);
	assert_int_equal(req.head_len, head);
	/* one byte over */
	assert_int_equal(http1_parse_request(b, sizeof(s) - 1, head - 1, &req),
			 SG_ERROR);
	assert_non_null(req.error);
	/* a prefix shorter than max_head is still a valid prefix ... */
	assert_int_equal(http1_parse_request(b, 20, 30, &req), SG_AGAIN);
	/* ... but once max_head bytes are in without a whole head, no more
	 * bytes can help: the caller's buffer may be full */
	assert_int_equal(http1_parse_request(b, 30, 30, &req), SG_ERROR);
	assert_int_equal(http1_parse_request(b, 31, 30, &req), SG_ERROR);
	assert_int_equal(http1_parse_request(b, head, head, &req), SG_OK);
}

static void test_declined(void **state)
{
	static const uint8_t tls[] = { 0x16, 0x03, 0x01, 0x02, 0x00 };
	static const uint8_t bin[] = { 'G', 'E', 0x00, 'T' };
	struct http1_request req;

	(void)state;
	/* one byte is enough to tell a TLS record from a method */
	assert_int_equal(http1_parse_request(tls, 1, MAX_HEAD, &req),
			 SG_DECLINED);
	assert_int_equal(http1_parse_request(tls, sizeof(tls), MAX_HEAD, &req),
			 SG_DECLINED);
	assert_int_equal(http1_parse_request(bin, 2, MAX_HEAD, &req), SG_AGAIN);
	assert_int_equal(http1_parse_request(bin, 3, MAX_HEAD, &req),
			 SG_DECLINED);
	assert_int_equal(http1_parse_request(NULL, 0, MAX_HEAD, &req),
			 SG_AGAIN);
	assert_int_equal(parse("G", &req), SG_AGAIN);
	assert_int_equal(parse("\r\nGET / HTTP/1.1\r\n\r\n", &req),
			 SG_DECLINED);
	assert_int_equal(parse(" GET / HTTP/1.1\r\n\r\n", &req), SG_DECLINED);
	assert_int_equal(parse("GET\t/ HTTP/1.1\r\n\r\n", &req), SG_DECLINED);
	assert_int_equal(parse("SSH-2.0-OpenSSH_9.2\r\n", &req), SG_DECLINED);
	/* 20 tchars and SP is a method; a 21st tchar is not */
	assert_int_equal(parse("ABCDEFGHIJKLMNOPQRST", &req), SG_AGAIN);
	assert_int_equal(parse("ABCDEFGHIJKLMNOPQRST / HTTP/1.1\r\n\r\n", &req),
			 SG_OK);
	assert_int_equal(parse("ABCDEFGHIJKLMNOPQRSTU", &req), SG_DECLINED);
}

/*
 * The HTTP/2 prior-knowledge preface (RFC 9113 3.4) starts with a valid
 * method token, so it is HTTP/1.x-shaped: SG_ERROR, not SG_DECLINED.
 */
static void test_h2_preface(void **state)
{
	(void)state;
	expect_error("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
	expect_error("PRI * HTTP/2");
}

static void test_request_line(void **state)
{
	struct http1_request req;

	(void)state;
	expect_error("GET / HTTP/2.0\r\n\r\n");
	expect_error("GET / HTTP/1.2\r\n\r\n");
	expect_error("GET / HTTP/1.10\r\n\r\n");
	expect_error("GET / http/1.1\r\n\r\n");
	expect_error("GET / HTTP/1.1 \r\n\r\n");
	expect_error("GET /\r\n\r\n");                  /* HTTP/0.9 */
	expect_error("GET  / HTTP/1.1\r\n\r\n");        /* empty target */
	expect_error("GET / x HTTP/1.1\r\n\r\n");
	expect_error("GET /a\x01 HTTP/1.1\r\n\r\n");
	expect_error("GET /\x80 HTTP/1.1\r\n\r\n");
	expect_error("GET /\x7f HTTP/1.1\r\n\r\n");
	assert_int_equal(parse("OPTIONS * HTTP/1.1\r\n\r\n", &req), SG_OK);
	assert_span(req.target, req.target_len, "*");
	/* a valid prefix of the version is still AGAIN */
	assert_int_equal(parse("GET / HTTP/1", &req), SG_AGAIN);
	assert_int_equal(parse("GET / HTTP/1.1", &req), SG_AGAIN);
}

/* A req reused for a second, different request keeps nothing of the first. */
static void test_reuse(void **state)
{
	struct http1_request req;

	(void)state;
	assert_int_equal(parse("POST / HTTP/1.1\r\nHost: a\r\n"
			       "Transfer-Encoding: chunked\r\n\r\n", &req), SG_OK);
	assert_int_equal(req.chunked, 1);
	assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n", &req), SG_OK);
	assert_int_equal(req.chunked, 0);
	assert_int_equal(req.has_te, 0);
	assert_null(req.host);
	assert_int_equal(req.content_length, -1);
	assert_int_equal(req.num_headers, 0);
}

static int split(const char *t, const char **a, size_t *al, const char **p,
		 size_t *pl)
{
	return http1_split_absolute(t, strlen(t), a, al, p, pl);
}

static void test_split_absolute(void **state)
{
	const char *a, *p;
	size_t al, pl;

	(void)state;
	assert_int_equal(split("http://a.b:8080/x?y", &a, &al, &p, &pl), 0);
	assert_span(a, al, "a.b:8080");
	assert_span(p, pl, "/x?y");

	assert_int_equal(split("HTTP://A.B", &a, &al, &p, &pl), 0);
	assert_span(a, al, "A.B");
	assert_span(p, pl, "/");

	assert_int_equal(split("http://a.b", &a, &al, &p, &pl), 0);
	assert_string_equal(p, "/");
	assert_int_equal(pl, 1);

	assert_int_equal(split("http://[2001:db8::1]:8080/", &a, &al, &p, &pl),
			 0);
	assert_span(a, al, "[2001:db8::1]:8080");
	assert_span(p, pl, "/");

	assert_int_equal(split("hTtP://x/", &a, &al, &p, &pl), 0);
	assert_span(a, al, "x");

	/* not absolute-form */
	assert_int_equal(split("/x", &a, &al, &p, &pl), SG_DECLINED);
	assert_int_equal(split("*", &a, &al, &p, &pl), SG_DECLINED);
	assert_int_equal(split("a.b:443", &a, &al, &p, &pl), SG_DECLINED);
	assert_int_equal(split("[::1]:443", &a, &al, &p, &pl), SG_DECLINED);
	assert_int_equal(split("", &a, &al, &p, &pl), SG_DECLINED);
	assert_int_equal(split("http:/", &a, &al, &p, &pl), SG_DECLINED);

	/* absolute-form, but not one the proxy fetches */
	assert_int_equal(split("https://a.b/", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("ftp://a.b/", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("httpx://a.b/", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("http://user@a.b/", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("http://u:p@a.b:80/", &a, &al, &p, &pl),
			 SG_ERROR);
	assert_int_equal(split("http:///x", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("http://", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("http://a.b\\@c/", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("http://a.b?q", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("http://a.b/#f", &a, &al, &p, &pl), SG_ERROR);
	assert_int_equal(split("http://a.b#f", &a, &al, &p, &pl), SG_ERROR);
}

static struct http1_header hdr(const char *name)
{
	struct http1_header h = {
		.name = name, .name_len = strlen(name), .value = "", .value_len = 0,
	};

	return h;
}

static void test_header_is(void **state)
{
	struct http1_header h = hdr("content-LENGTH");

	(void)state;
	assert_true(http1_header_is(&h, "Content-Length"));
	assert_false(http1_header_is(&h, "Content-Lengt"));
	assert_false(http1_header_is(&h, "Content-Length2"));
	h.name_len = 7;         /* "content" */
	assert_false(http1_header_is(&h, "Content-Length"));
	assert_true(http1_header_is(&h, "Content"));
}

static void test_hop_by_hop(void **state)
{
	static const char s[] =
		"GET http://a/ HTTP/1.1\r\n"
		"Host: a\r\n"
		"Connection: close, X-Foo ,\tx-bar\r\n"
		"Connection: Keep-Alive, x-baz,, Transfer-Encoding, "
		"Content-Length, Host\r\n"
		"X-Foo: 1\r\n"
		"\r\n";
	static const char *const hop[] = {
		"Connection", "connection", "Keep-Alive", "Proxy-Connection",
		"Proxy-Authorization", "PROXY-AUTHENTICATE", "TE", "Trailer",
		"Upgrade", "X-Foo", "X-BAR", "x-baz",
		"close",        /* a connection option, but also a name */
	};
	static const char *const end[] = {
		"Host", "Transfer-Encoding", "Content-Length", "X-Fo", "X-Foo2",
		"Accept", "Authorization", "Te-x", "",
	};
	struct http1_request req, plain;
	struct http1_header h;
	size_t i;

	(void)state;
	assert_int_equal(parse(s, &req), SG_OK);
	for (i = 0; i < SG_ARRAY_LEN(hop); i++) {
		h = hdr(hop[i]);
		if (!http1_is_hop_by_hop(&req, &h))
			fail_msg("%s should be hop-by-hop", hop[i]);
	}
	for (i = 0; i < SG_ARRAY_LEN(end); i++) {
		h = hdr(end[i]);
		if (http1_is_hop_by_hop(&req, &h))
			fail_msg("%s should be end-to-end", end[i]);
	}
	/* the parsed X-Foo field itself */
	assert_true(http1_is_hop_by_hop(&req, &req.headers[3]));
	assert_false(http1_is_hop_by_hop(&req, &req.headers[0]));

	/* without a Connection field only the fixed set is hop-by-hop */
	assert_int_equal(parse("GET / HTTP/1.1\r\nX-Foo: 1\r\n\r\n", &plain),
			 SG_OK);
	assert_false(http1_is_hop_by_hop(&plain, &plain.headers[0]));
	h = hdr("Upgrade");
	assert_true(http1_is_hop_by_hop(&plain, &h));
}

/* ---- chunked framing ---- */

/* Feed msg in pieces of `step` bytes; return body bytes (or the error). */
static long scan_split(const char *msg, size_t len, size_t step, int *done)
{
	struct http1_chunked st;
	size_t off = 0;
	long total = 0;

	memset(&st, 0, sizeof(st));
	while (off < len && !st.done) {
		size_t n = SG_MIN(step, len - off);
		long k = http1_chunked_scan(&st, (const uint8_t *)msg + off, n);

		if (k < 0)
			return k;
		assert_true((size_t)k <= n);
		/* Short of n only where the body ended. */
		if ((size_t)k < n)
			assert_true(st.done);
		total += k;
		off += (size_t)k;
	}
	*done = st.done;
	return total;
}

static void test_chunked_scan(void **state)
{
	static const struct {
		const char *msg;        /* body, then what follows it */
		long body;              /* bytes that are the body; -1: error */
	} cases[] = {
		{ "5\r\nhello\r\n0\r\n\r\nGET /next HTTP/1.1\r\n", 15 },
		{ "0\r\n\r\n", 5 },
		{ "A;ext=1\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\nPIPELINED", 40 },
		{ "3\nabc\n0\n\n", 9 },                   /* bare LF */
		{ "fF\r\n", -2 },                            /* incomplete: all body */
		{ "\r\n", -1 },                              /* no size */
		{ "g\r\n", -1 },                             /* not hex */
		{ "3\r\nabcX\r\n", -1 },                    /* data not followed by CRLF */
		{ "1000000000000000\r\n", -1 },              /* 16 hex digits */
		{ "3\r\nabc\r\n0\r\nbad\x01trailer\r\n\r\n", -1 },
	};
	size_t i, step;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(cases); i++) {
		size_t len = strlen(cases[i].msg);

		for (step = 1; step <= len; step++) {
			int done = 0;
			long got = scan_split(cases[i].msg, len, step, &done);

			if (cases[i].body == -1) {
				assert_int_equal(got, SG_ERROR);
			} else if (cases[i].body == -2) {
				assert_int_equal(got, (long)len);
				assert_false(done);
			} else {
				assert_int_equal(got, cases[i].body);
				assert_true(done);
			}
		}
	}
}

static void test_response_status(void **state)
{
	(void)state;
	assert_int_equal(http1_response_status((const uint8_t *)"HTTP/1.1 200 OK\r\n", 17), 200);
	assert_int_equal(http1_response_status((const uint8_t *)"HTTP/1.0 404", 12), 404);
	assert_int_equal(http1_response_status((const uint8_t *)"HTTP/1.1 20", 11), SG_AGAIN);
	assert_int_equal(http1_response_status((const uint8_t *)"HTTP/2.0 200", 12), SG_DECLINED);
	assert_int_equal(http1_response_status((const uint8_t *)"HTTP/1.1 600", 12), SG_DECLINED);
	assert_int_equal(http1_response_status((const uint8_t *)"\x16\x03\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00", 12),
			 SG_DECLINED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect),
		cmocka_unit_test(test_absolute_get),
		cmocka_unit_test(test_origin_form),
		cmocka_unit_test(test_every_prefix),
		cmocka_unit_test(test_bare_lf),
		cmocka_unit_test(test_bare_cr),
		cmocka_unit_test(test_field_name),
		cmocka_unit_test(test_obs_fold),
		cmocka_unit_test(test_field_value_bytes),
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_cl_and_te),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_header_limit),
		cmocka_unit_test(test_max_head),
		cmocka_unit_test(test_declined),
		cmocka_unit_test(test_h2_preface),
		cmocka_unit_test(test_request_line),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_split_absolute),
		cmocka_unit_test(test_header_is),
		cmocka_unit_test(test_hop_by_hop),
		cmocka_unit_test(test_chunked_scan),
		cmocka_unit_test(test_response_status),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
