/*
 * fuzz_tls_hello.c - libFuzzer target for tls_hello_parse().
 *
 * Each input is used twice:
 *
 *  1. as the first bytes of a connection: parsed whole, at a split point
 *     and at the hello's own end, checking that every answer other than
 *     SG_AGAIN is final (a longer buffer with the same start gets the
 *     same answer) and that the output obeys the header's contract;
 *  2. as a handshake byte stream (the input less its first 5 bytes, so
 *     the seeds' record headers drop off): wrapped once in a single
 *     record and once in records of k bytes (k from input byte 2), which
 *     must parse alike. Here the fuzzer reaches the extension parser
 *     without having to keep record lengths consistent.
 *
 * Seeds: tests/fuzz/corpus/fuzz_tls_hello/ (real, ECH, no-SNI, multi-record).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_str.h"
#include "tls/tls_hello.h"
#include "sg_poison.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) abort(); } while (0)

/* The contract of tls_hello.h, on one result. */
static void check_out(int rc, const uint8_t *buf, size_t len,
		      const struct tls_hello *h)
{
	char norm[SG_HOST_MAX + 1];
	size_t i, n;

	CHECK(rc == SG_OK || rc == SG_AGAIN || rc == SG_DECLINED ||
	      rc == SG_ERROR);
	CHECK((rc == SG_ERROR) == (h->error != NULL));
	/* DECLINED exactly when the first byte is not a handshake record. */
	CHECK((rc == SG_DECLINED) == (len > 0 && buf[0] != 0x16));
	if (rc != SG_OK) {
		CHECK(!h->has_sni && !h->sni_invalid && !h->has_alpn &&
		      !h->has_ech && h->consumed == 0 && h->sni[0] == '\0');
		return;
	}
	CHECK(h->consumed >= 5 + 4 && h->consumed <= len);
	CHECK(!(h->has_sni && h->sni_invalid));
	/* has_sni: a normalised name, which normalising leaves alone. */
	n = strnlen(h->sni, sizeof(h->sni));
	CHECK(n < sizeof(h->sni));
	if (h->has_sni) {
		CHECK(sg_host_normalize(h->sni, n, norm) == (int)n);
		CHECK(memcmp(norm, h->sni, n + 1) == 0);
	} else {
		CHECK(n == 0);
	}
	/* alpn: printable, no empty entries, within TLS_ALPN_MAX. */
	n = strnlen(h->alpn, sizeof(h->alpn));
	CHECK(n <= TLS_ALPN_MAX);
	CHECK(h->has_alpn || n == 0);
	for (i = 0; i < n; i++) {
		CHECK(h->alpn[i] >= 0x21 && h->alpn[i] <= 0x7e);
		if (h->alpn[i] == ',')
			CHECK(i > 0 && i + 1 < n && h->alpn[i + 1] != ',');
	}
}

static void check_same(const struct tls_hello *a, const struct tls_hello *b)
{
	CHECK(a->has_sni == b->has_sni && a->sni_invalid == b->sni_invalid);
	CHECK(strcmp(a->sni, b->sni) == 0);
	CHECK(a->has_alpn == b->has_alpn && strcmp(a->alpn, b->alpn) == 0);
	CHECK(a->has_ech == b->has_ech);
	CHECK(a->legacy_version == b->legacy_version);
}

/* Parse buf[0..len) whole and cut short; every non-AGAIN answer is final. */
static void fuzz_stream(const uint8_t *buf, size_t len)
{
	struct tls_hello h, p;
	int rc, prc;

	rc = tls_hello_parse(buf, len, &h);
	check_out(rc, buf, len, &h);

	prc = tls_hello_parse(buf, len / 2, &p);
	check_out(prc, buf, len / 2, &p);
	if (prc != SG_AGAIN) {
		CHECK(prc == rc);
		if (rc == SG_OK) {
			check_same(&p, &h);
			CHECK(p.consumed == h.consumed);
		} else if (rc == SG_ERROR) {
			CHECK(strcmp(p.error, h.error) == 0);
		}
	}
	if (rc == SG_OK) {
		/* The hello ends at consumed: one byte less is AGAIN. */
		prc = tls_hello_parse(buf, h.consumed, &p);
		CHECK(prc == SG_OK && p.consumed == h.consumed);
		check_same(&p, &h);
		CHECK(tls_hello_parse(buf, h.consumed - 1, &p) == SG_AGAIN);
	}
}

/* Wrap hs[0..len) in records of at most k bytes. */
static size_t wrap(const uint8_t *hs, size_t len, size_t k, uint8_t *out)
{
	size_t o = 0, i;

	for (i = 0; i < len; i += k) {
		size_t n = SG_MIN(k, len - i);

		out[o++] = 0x16;
		out[o++] = 0x03;
		out[o++] = 0x01;
		out[o++] = (uint8_t)(n >> 8);
		out[o++] = (uint8_t)n;
		memcpy(out + o, hs + i, n);
		o += n;
	}
	return o;
}

/* The same handshake bytes in one record and in k-byte records. */
static void fuzz_records(const uint8_t *hs, size_t len, size_t k)
{
	struct tls_hello one, many;
	uint8_t *a, *b;
	size_t alen, blen;
	int r1, r2;

	/* One record holds at most 2^14 bytes here (RFC 8446 5.1). */
	if (len == 0 || len > 16384)
		return;
	a = malloc(len + 5);
	b = malloc(len + 5 * (len / k + 1));
	CHECK(a && b);
	alen = wrap(hs, len, len, a);
	blen = wrap(hs, len, k, b);
	r1 = tls_hello_parse(a, alen, &one);
	r2 = tls_hello_parse(b, blen, &many);
	check_out(r1, a, alen, &one);
	check_out(r2, b, blen, &many);
	/*
	 * Same handshake bytes, same verdict, with one exception: bytes after
	 * the hello share its record in a (ERROR) but may start a record of
	 * their own in b (OK, consumed < blen).
	 */
	CHECK((r1 == SG_AGAIN) == (r2 == SG_AGAIN));
	if (r1 == SG_OK) {
		CHECK(r2 == SG_OK && many.consumed == blen);
		check_same(&one, &many);
	}
	if (r2 == SG_ERROR)
		CHECK(r1 == SG_ERROR);
	if (r2 == SG_OK && r1 != SG_OK)
		CHECK(r1 == SG_ERROR && many.consumed < blen);
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_stream(data, size);
	if (size > 5)
		fuzz_records(data + 5, size - 5, 1 + (data[2] & 0x3f));
	return 0;
}
