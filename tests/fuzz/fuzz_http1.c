/*
 * fuzz_http1.c - libFuzzer target for the HTTP/1.1 request-head parser.
 *
 * Beyond "no crash under ASan/UBSan" it checks the contract callers rely
 * on: every pointer the parser hands out lies inside the input, head_len
 * fits, the parse is resumable (one byte short of the head is SG_AGAIN and
 * the head alone parses the same), and http1_split_absolute() only points
 * into the target it was given. Seeds: tests/fuzz/corpus/fuzz_http1/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "gateway/http1.h"

#define MAX_HEAD 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Not assert(): the checks must hold in NDEBUG builds too. */
#define CHECK(x) do { if (!(x)) abort(); } while (0)

/* [p, p + n) lies within [base, base + len). */
static int inside(const void *p, size_t n, const void *base, size_t len)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;

	return p != NULL && a >= b && n <= len && a - b <= len - n;
}

static void check_split(const char *t, size_t n)
{
	const char *a, *p;
	size_t al, pl;
	int rc = http1_split_absolute(t, n, &a, &al, &p, &pl);

	CHECK(rc == 0 || rc == SG_DECLINED || rc == SG_ERROR);
	if (rc != 0)
		return;
	CHECK(al > 0 && inside(a, al, t, n));
	CHECK(memchr(a, '@', al) == NULL);
	CHECK(pl > 0 && p[0] == '/');
	/* path is in target, or the static "/" for an empty path */
	CHECK(inside(p, pl, t, n) || (pl == 1 && a + al == t + n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http1_request req, again;
	size_t i;
	int rc;

	rc = http1_parse_request(data, size, MAX_HEAD, &req);
	CHECK(rc == SG_OK || rc == SG_AGAIN || rc == SG_DECLINED ||
	      rc == SG_ERROR);
	CHECK((rc == SG_ERROR) == (req.error != NULL));
	if (rc == SG_AGAIN)
		CHECK(size < MAX_HEAD);
	/* the split runs on any target, well-formed head or not */
	check_split((const char *)data, size);
	/* chunked framing: whole, and split in two, agree */
	{
		struct http1_chunked a, b;
		long k1, k2 = 0, k3;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		k1 = http1_chunked_scan(&a, data, size);
		CHECK(k1 == SG_ERROR || (k1 >= 0 && (size_t)k1 <= size));
		k3 = http1_chunked_scan(&b, data, size / 2);
		if (k3 >= 0 && !b.done) {
			k2 = http1_chunked_scan(&b, data + size / 2, size - size / 2);
			if (k2 >= 0)
				CHECK(k1 == k3 + k2 && a.done == b.done);
			else
				CHECK(k1 == SG_ERROR);
		} else if (k3 >= 0) {
			CHECK(k1 == k3 && a.done);
		} else {
			CHECK(k1 == SG_ERROR);
		}
	}
	if (rc != SG_OK)
		return 0;

	CHECK(req.head_len > 0 && req.head_len <= size &&
	      req.head_len <= MAX_HEAD);
	CHECK(req.method_len > 0 && req.method_len <= 20 &&
	      inside(req.method, req.method_len, data, req.head_len));
	CHECK(req.target_len > 0 &&
	      inside(req.target, req.target_len, data, req.head_len));
	CHECK(req.minor_version == 0 || req.minor_version == 1);
	CHECK(req.num_headers <= HTTP1_MAX_HEADERS);
	for (i = 0; i < req.num_headers; i++) {
		const struct http1_header *h = &req.headers[i];

		CHECK(h->name_len > 0 &&
		      inside(h->name, h->name_len, data, req.head_len));
		/* an empty value still points into the buffer */
		CHECK(inside(h->value, h->value_len, data, req.head_len));
		(void)http1_is_hop_by_hop(&req, h);
	}
	if (req.host)
		CHECK(inside(req.host, req.host_len, data, req.head_len));
	else
		CHECK(req.host_len == 0);
	CHECK(req.content_length >= -1);
	CHECK(!(req.has_te && req.content_length >= 0));
	CHECK(!req.chunked || req.has_te);
	check_split(req.target, req.target_len);

	/* resumable: one byte short is a valid prefix ... */
	CHECK(http1_parse_request(data, req.head_len - 1, MAX_HEAD, &again) ==
	      SG_AGAIN);
	/* ... and the head alone gives what the longer buffer gave */
	CHECK(http1_parse_request(data, req.head_len, MAX_HEAD, &again) ==
	      SG_OK);
	CHECK(memcmp(&req, &again, sizeof(req)) == 0);
	return 0;
}
