/*
 * test_tls_hello.c - tls_hello_parse() (tls/tls_hello.c) and the host name
 * normaliser it relies on, sg_host_normalize() (lib/sg_str.c).
 *
 * Fixtures are annotated byte arrays. Parametric cases (long names, the
 * 16 KiB boundary, re-recording) are built from them by small helpers
 * that write the same wire format the arrays spell out.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sg.h"
#include "sg_str.h"
#include "tls/tls_hello.h"
#include "sg_poison.h"

/*
 * A real ClientHello: OpenSSL 3.0.22 (Debian 12), captured with
 *   openssl s_client -connect 127.0.0.1:$PORT -servername example.com \
 *           -alpn h2,http/1.1
 * against a Python socket server on 127.0.0.1 that wrote the first record
 * it received to a file. One record, 335 bytes.
 */
static const uint8_t hello_openssl[] = {
	0x16, 0x03, 0x01, 0x01, 0x4a,   /* record: handshake, len 330 */
	0x01, 0x00, 0x01, 0x46,         /* client_hello, len 326 */
	0x03, 0x03,                     /* legacy_version: TLS 1.2 */
	0xd7, 0x6c, 0x3b, 0x47, 0x25, 0x42, 0x5e, 0x8d, /* random */
	0x06, 0x89, 0x41, 0x1c, 0xf1, 0x9b, 0x95, 0x51,
	0x64, 0xe1, 0x3c, 0x83, 0xba, 0x91, 0x57, 0xba,
	0xce, 0x33, 0x09, 0xe4, 0x0a, 0x21, 0xa9, 0xec,
	0x20,                           /* legacy_session_id: 32 bytes */
	0x73, 0xa3, 0xac, 0x7b, 0x9a, 0x93, 0x74, 0xc3,
	0xc9, 0x78, 0x83, 0x74, 0x9f, 0xb7, 0x07, 0xeb,
	0xaa, 0x0d, 0x63, 0x94, 0x6e, 0xf5, 0x12, 0xce,
	0x8e, 0x16, 0x45, 0x62, 0x62, 0x84, 0x41, 0xf4,
	0x00, 0x3e,                     /* cipher_suites: 31 suites */
	0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c,
	0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8,
	0xcc, 0xaa, 0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e,
	0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23,
	0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14,
	0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33,
	0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c,
	0x00, 0x35, 0x00, 0x2f, 0x00, 0xff,
	0x01, 0x00,                     /* compression: null */
	0x00, 0xbf,                     /* extensions: 191 bytes */
	0x00, 0x00, 0x00, 0x10,         /* server_name, len 16 */
	0x00, 0x0e,                     /* server_name_list: 14 */
	0x00, 0x00, 0x0b,               /* host_name, len 11 */
	0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, /* "example.com" */
	0x63, 0x6f, 0x6d,
	0x00, 0x0b, 0x00, 0x04,         /* ec_point_formats, len 4 */
	0x03, 0x00, 0x01, 0x02,
	0x00, 0x0a, 0x00, 0x16,         /* supported_groups, len 22 */
	0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e,
	0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01,
	0x01, 0x02, 0x01, 0x03, 0x01, 0x04,
	0x00, 0x23, 0x00, 0x00,         /* session_ticket, len 0 */
	0x00, 0x10, 0x00, 0x0e,         /* alpn, len 14 */
	0x00, 0x0c,                     /* protocol_name_list: 12 */
	0x02, 0x68, 0x32,               /* "h2" */
	0x08, 0x68, 0x74, 0x74, 0x70, 0x2f, 0x31, 0x2e, /* "http/1.1" */
	0x31,
	0x00, 0x16, 0x00, 0x00,         /* encrypt_then_mac, len 0 */
	0x00, 0x17, 0x00, 0x00,         /* extended_master_secret, len 0 */
	0x00, 0x0d, 0x00, 0x2a,         /* signature_algorithms, len 42 */
	0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03,
	0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a,
	0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06,
	0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03,
	0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02,
	0x06, 0x02,
	0x00, 0x2b, 0x00, 0x09,         /* supported_versions, len 9 */
	0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03,
	0x01,
	0x00, 0x2d, 0x00, 0x02,         /* psk_key_exchange_modes, len 2 */
	0x01, 0x01,
	0x00, 0x33, 0x00, 0x26,         /* key_share, len 38 */
	0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0x31, 0x25,
	0x12, 0x48, 0x42, 0x4f, 0x56, 0x03, 0x0a, 0xc5,
	0x0a, 0x5d, 0x96, 0x55, 0x25, 0x59, 0xfb, 0x20,
	0x0d, 0x35, 0xd6, 0xc7, 0xf0, 0x70, 0x03, 0xe8,
	0xa8, 0x84, 0x6a, 0x45, 0x94, 0x7e,
};

#define OPENSSL_HS_LEN (sizeof(hello_openssl) - 5)   /* 330: header + body */

/*
 * The fixed part of every synthetic hello below: what follows the
 * handshake header up to the extension block.
 */
static const uint8_t hello_head[] = {
	0x03, 0x03,                     /* legacy_version: TLS 1.2 */
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, /* random */
	0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	0x00,                           /* legacy_session_id: empty */
	0x00, 0x04,                     /* cipher_suites: 4 bytes */
	0x13, 0x01, 0x13, 0x02,         /* AES_128_GCM, AES_256_GCM */
	0x01, 0x00,                     /* legacy_compression_methods: null */
};

/* An SSL 3.0-era hello: no extension block at all (RFC 5246 7.4.1.2). */
static const uint8_t hello_noext[] = {
	0x16, 0x03, 0x00, 0x00, 0x2f,   /* record: handshake, SSL 3.0, len 47 */
	0x01, 0x00, 0x00, 0x2b,         /* client_hello, len 43 */
	0x03, 0x00,                     /* legacy_version: SSL 3.0 */
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, /* random */
	0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	0x00,                           /* legacy_session_id: empty */
	0x00, 0x04,                     /* cipher_suites: 4 bytes */
	0x00, 0x0a, 0x00, 0x2f,         /* RSA 3DES_EDE_CBC, AES_128_CBC */
	0x01, 0x00,                     /* legacy_compression_methods: null */
};

/* Extensions of a hello without server_name. */
static const uint8_t ext_nosni[] = {
	0x00, 0x2b, 0x00, 0x03,         /* supported_versions, len 3 */
	0x02, 0x03, 0x04,               /* 2 bytes: TLS 1.3 */
	0x00, 0x10, 0x00, 0x0b,         /* alpn, len 11 */
	0x00, 0x09,                     /* protocol_name_list: 9 bytes */
	0x08, 'h', 't', 't', 'p', '/', '1', '.', '1',   /* "http/1.1" */
};

static const uint8_t ext_sni_upper[] = {
	0x00, 0x00, 0x00, 0x15,         /* server_name, len 21 */
	0x00, 0x13,                     /* server_name_list: 19 bytes */
	0x00, 0x00, 0x10,               /* host_name, len 16 */
	'W', 'W', 'W', '.', 'E', 'x', 'a', 'm', 'p', 'l', 'e', '.',
	'C', 'O', 'M', '.',             /* "WWW.Example.COM.": case, root dot */
};

static const uint8_t ext_sni_ip[] = {
	0x00, 0x00, 0x00, 0x0e,         /* server_name, len 14 */
	0x00, 0x0c,                     /* server_name_list: 12 bytes */
	0x00, 0x00, 0x09,               /* host_name, len 9 */
	'1', '9', '2', '.', '0', '.', '2', '.', '1',    /* an IP literal */
};

/* RFC 6066 3: "HostName ... the ServerNameList MUST NOT contain more than
 * one name of the same name_type". */
static const uint8_t ext_sni_two_hosts[] = {
	0x00, 0x00, 0x00, 0x12,         /* server_name, len 18 */
	0x00, 0x10,                     /* server_name_list: 16 bytes */
	0x00, 0x00, 0x05,               /* host_name, len 5 */
	'a', '.', 'c', 'o', 'm',
	0x00, 0x00, 0x05,               /* host_name again, len 5 */
	'b', '.', 'c', 'o', 'm',
};

/* A name_type nobody defined, before the host_name: skipped, not fatal. */
static const uint8_t ext_sni_other_type[] = {
	0x00, 0x00, 0x00, 0x10,         /* server_name, len 16 */
	0x00, 0x0e,                     /* server_name_list: 14 bytes */
	0x07, 0x00, 0x03, 'x', 'y', 'z',        /* name_type 7, len 3 */
	0x00, 0x00, 0x05,               /* host_name, len 5 */
	'a', '.', 'c', 'o', 'm',
};

/* What a server sends back to acknowledge SNI: legal, names nothing. */
static const uint8_t ext_sni_empty[] = {
	0x00, 0x00, 0x00, 0x00,         /* server_name, len 0 */
};

/* A byte after the server_name_list, inside the extension. */
static const uint8_t ext_sni_trailing[] = {
	0x00, 0x00, 0x00, 0x0b,         /* server_name, len 11 */
	0x00, 0x08,                     /* server_name_list: 8 bytes */
	0x00, 0x00, 0x05,               /* host_name, len 5 */
	'a', '.', 'c', 'o', 'm',
	0x00,                           /* stray */
};

/* server_name_list says 20 bytes, the extension holds 14. */
static const uint8_t ext_sni_overrun[] = {
	0x00, 0x00, 0x00, 0x10,         /* server_name, len 16 */
	0x00, 0x14,                     /* server_name_list: 20 bytes (a lie) */
	0x00, 0x00, 0x0b,               /* host_name, len 11 */
	'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm',
};

/*
 * ECH (draft-ietf-tls-esni-22 5): the outer hello carries the public name
 * in server_name and the real hello sealed in encrypted_client_hello.
 */
static const uint8_t ext_ech[] = {
	0x00, 0x00, 0x00, 0x13,         /* server_name, len 19 */
	0x00, 0x11,                     /* server_name_list: 17 bytes */
	0x00, 0x00, 0x0e,               /* host_name, len 14 */
	'p', 'u', 'b', 'l', 'i', 'c', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e',
	0xfe, 0x0d, 0x00, 0x1a,         /* encrypted_client_hello, len 26 */
	0x00,                           /* ECHClientHelloType: outer */
	0x00, 0x01, 0x00, 0x01,         /* HKDF-SHA256, AES-128-GCM */
	0x2a,                           /* config_id */
	0x00, 0x04, 0xde, 0xad, 0xbe, 0xef,     /* enc (shortened) */
	0x00, 0x0c,                     /* payload: 12 bytes (shortened) */
	0x5e, 0xa1, 0xed, 0x00, 0x5e, 0xa1, 0xed, 0x00,
	0x5e, 0xa1, 0xed, 0x00,
};

/* RFC 8446 4.2: "There MUST NOT be more than one extension of the same
 * type"; here with two names a checker and a server could disagree on. */
static const uint8_t ext_dup_sni[] = {
	0x00, 0x00, 0x00, 0x0a,         /* server_name, len 10 */
	0x00, 0x08, 0x00, 0x00, 0x05,   /* list 8, host_name len 5 */
	'a', '.', 'c', 'o', 'm',
	0x00, 0x00, 0x00, 0x0a,         /* server_name again */
	0x00, 0x08, 0x00, 0x00, 0x05,
	'b', '.', 'c', 'o', 'm',
};

static const uint8_t ext_dup_other[] = {
	0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04,       /* supported_versions */
	0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x03,       /* ... again */
};

static const uint8_t ext_alpn_empty_name[] = {
	0x00, 0x10, 0x00, 0x06,         /* alpn, len 6 */
	0x00, 0x04,                     /* protocol_name_list: 4 bytes */
	0x02, 'h', '2',                 /* "h2" */
	0x00,                           /* "": ProtocolName<1..2^8-1> */
};

static const uint8_t ext_alpn_empty_list[] = {
	0x00, 0x10, 0x00, 0x02,         /* alpn, len 2 */
	0x00, 0x00,                     /* list<2..2^16-1>: empty */
};

static const uint8_t ext_alpn_comma[] = {
	0x00, 0x10, 0x00, 0x07,         /* alpn, len 7 */
	0x00, 0x05,                     /* protocol_name_list: 5 bytes */
	0x04, 'h', '2', ',', 'x',       /* "h2,x": would forge a second entry */
};

/* The extension says 10 bytes, the block ends after 4. */
static const uint8_t ext_overrun[] = {
	0x00, 0x2b, 0x00, 0x0a,         /* supported_versions, len 10 (a lie) */
	0x02, 0x03, 0x04, 0x00,
};

/* An alert record: fatal, handshake_failure. */
static const uint8_t rec_alert[] = {
	0x15, 0x03, 0x03, 0x00, 0x02,   /* record: alert, TLS 1.2, len 2 */
	0x02, 0x28,                     /* fatal, handshake_failure */
};

/* What TLS 1.3 middlebox-compat clients send right after the hello. */
static const uint8_t rec_ccs[] = {
	0x14, 0x03, 0x03, 0x00, 0x01,   /* record: change_cipher_spec, len 1 */
	0x01,
};

static uint8_t scratch[160 * 1024];
static uint8_t scratch2[160 * 1024];

/* Big-endian stores for the builders. */
static void put16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put24(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 16);
	put16(p + 1, v);
}

/*
 * One record holding client_hello { hello_head, extensions<exts> }.
 * Returns the bytes written to out.
 */
static size_t hello_build(uint8_t *out, const uint8_t *exts, size_t ext_len)
{
	size_t body = sizeof(hello_head) + 2 + ext_len;

	out[0] = 0x16;                  /* handshake */
	out[1] = 0x03;
	out[2] = 0x01;
	put16(out + 3, 4 + body);
	out[5] = 0x01;                  /* client_hello */
	put24(out + 6, body);
	memcpy(out + 9, hello_head, sizeof(hello_head));
	put16(out + 9 + sizeof(hello_head), ext_len);
	memcpy(out + 11 + sizeof(hello_head), exts, ext_len);
	return 9 + body;
}

/*
 * Cut the handshake bytes hs[0..len) into records of at most k bytes
 * each, the way a TLS stack with a small max_fragment_length would
 * (RFC 8446 5.1). Returns the bytes written to out.
 */
static size_t rerecord(const uint8_t *hs, size_t len, size_t k, uint8_t *out)
{
	size_t o = 0, i;

	for (i = 0; i < len; i += k) {
		size_t n = SG_MIN(k, len - i);

		out[o++] = 0x16;
		out[o++] = 0x03;
		out[o++] = 0x03;
		put16(out + o, n);
		o += 2;
		memcpy(out + o, hs + i, n);
		o += n;
	}
	return o;
}

/* A server_name extension with one host_name of len bytes. */
static size_t ext_sni_build(uint8_t *out, const char *name, size_t len)
{
	put16(out, TLS_EXT_SERVER_NAME);
	put16(out + 2, len + 5);
	put16(out + 4, len + 3);
	out[6] = 0;                     /* host_name */
	put16(out + 7, len);
	memcpy(out + 9, name, len);
	return 9 + len;
}

/* An alpn extension listing each of names[0..n). */
static size_t ext_alpn_build(uint8_t *out, const char *const *names, size_t n)
{
	size_t o = 6, i;

	for (i = 0; i < n; i++) {
		size_t l = strlen(names[i]);

		out[o++] = (uint8_t)l;
		memcpy(out + o, names[i], l);
		o += l;
	}
	put16(out, TLS_EXT_ALPN);
	put16(out + 2, o - 4);
	put16(out + 4, o - 6);
	return o;
}

/* "a.b.c..." dotted labels of at most 63 bytes, exactly len bytes long. */
static void long_name(char *out, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		out[i] = (i % 64 == 63) ? '.' : (char)('a' + i % 26);
	if (len > 0 && out[len - 1] == '.')
		out[len - 1] = 'z';
}

static void assert_same_hello(const struct tls_hello *a,
			      const struct tls_hello *b)
{
	assert_int_equal(a->has_sni, b->has_sni);
	assert_int_equal(a->sni_invalid, b->sni_invalid);
	assert_string_equal(a->sni, b->sni);
	assert_int_equal(a->has_alpn, b->has_alpn);
	assert_string_equal(a->alpn, b->alpn);
	assert_int_equal(a->has_ech, b->has_ech);
	assert_int_equal(a->legacy_version, b->legacy_version);
}

static int parse(const uint8_t *buf, size_t len, struct tls_hello *h)
{
	int rc = tls_hello_parse(buf, len, h);

	/* out->error is set on SG_ERROR, and only then. */
	if (rc == SG_ERROR)
		assert_non_null(h->error);
	else
		assert_null(h->error);
	return rc;
}

static void assert_parse_error(const uint8_t *buf, size_t len)
{
	struct tls_hello h;

	assert_int_equal(parse(buf, len, &h), SG_ERROR);
	assert_int_equal(h.has_sni, 0);
	assert_int_equal(h.consumed, 0);
}

/* ---- the real hello ------------------------------------------------ */

static void test_openssl_hello(void **state)
{
	struct tls_hello h;

	(void)state;
	assert_int_equal(parse(hello_openssl, sizeof(hello_openssl), &h),
			 SG_OK);
	assert_int_equal(h.has_sni, 1);
	assert_int_equal(h.sni_invalid, 0);
	assert_string_equal(h.sni, "example.com");
	assert_int_equal(h.has_alpn, 1);
	assert_string_equal(h.alpn, "h2,http/1.1");
	assert_int_equal(h.has_ech, 0);
	assert_int_equal(h.legacy_version, 0x0303);
	assert_int_equal(h.consumed, sizeof(hello_openssl));
}

/* Every TCP segmentation: each strict prefix is a valid prefix. */
static void test_openssl_every_prefix(void **state)
{
	struct tls_hello h;
	size_t n;

	(void)state;
	for (n = 0; n < sizeof(hello_openssl); n++) {
		memset(&h, 0xa5, sizeof(h));
		assert_int_equal(parse(hello_openssl, n, &h), SG_AGAIN);
		/* out is wiped, not left half-filled. */
		assert_int_equal(h.has_sni, 0);
		assert_int_equal(h.sni[0], '\0');
		assert_int_equal(h.consumed, 0);
	}
}

/* What follows the hello (CCS, early data) is not the parser's business. */
static void test_openssl_then_more_records(void **state)
{
	struct tls_hello h;
	size_t n = sizeof(hello_openssl);

	(void)state;
	memcpy(scratch, hello_openssl, n);
	memcpy(scratch + n, rec_ccs, sizeof(rec_ccs));
	assert_int_equal(parse(scratch, n + sizeof(rec_ccs), &h), SG_OK);
	assert_int_equal(h.consumed, n);
	assert_string_equal(h.sni, "example.com");
	/* Garbage after the hello's record does not matter either. */
	memcpy(scratch + n, "GARBAGE", 7);
	assert_int_equal(parse(scratch, n + 7, &h), SG_OK);
	assert_int_equal(h.consumed, n);
}

/* The same handshake bytes in records of k = 1 .. 330 bytes. */
static void test_openssl_rerecorded(void **state)
{
	struct tls_hello want, h;
	size_t k, len;

	(void)state;
	assert_int_equal(parse(hello_openssl, sizeof(hello_openssl), &want),
			 SG_OK);
	for (k = 1; k <= OPENSSL_HS_LEN; k++) {
		len = rerecord(hello_openssl + 5, OPENSSL_HS_LEN, k, scratch);
		assert_int_equal(len, OPENSSL_HS_LEN +
				 5 * ((OPENSSL_HS_LEN + k - 1) / k));
		assert_int_equal(parse(scratch, len, &h), SG_OK);
		assert_same_hello(&h, &want);
		assert_int_equal(h.consumed, len);
	}
}

/* Records and TCP segments both cut anywhere: every prefix is AGAIN. */
static void test_openssl_rerecorded_prefixes(void **state)
{
	static const size_t ks[] = { 1, 2, 3, 4, 5, 7, 100, 329 };
	struct tls_hello h;
	size_t i, n, len;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(ks); i++) {
		len = rerecord(hello_openssl + 5, OPENSSL_HS_LEN, ks[i],
			       scratch);
		for (n = 0; n < len; n++)
			assert_int_equal(parse(scratch, n, &h), SG_AGAIN);
		assert_int_equal(parse(scratch, len, &h), SG_OK);
		assert_string_equal(h.sni, "example.com");
	}
}

/* ---- extension content ------------------------------------------------ */

static void test_no_sni(void **state)
{
	struct tls_hello h;
	size_t len = hello_build(scratch, ext_nosni, sizeof(ext_nosni));

	(void)state;
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 0);
	assert_int_equal(h.sni_invalid, 0);
	assert_string_equal(h.sni, "");
	assert_int_equal(h.has_alpn, 1);
	assert_string_equal(h.alpn, "http/1.1");
	assert_int_equal(h.consumed, len);
}

static void test_no_extensions(void **state)
{
	struct tls_hello h;

	(void)state;
	assert_int_equal(parse(hello_noext, sizeof(hello_noext), &h), SG_OK);
	assert_int_equal(h.has_sni, 0);
	assert_int_equal(h.has_alpn, 0);
	assert_int_equal(h.legacy_version, 0x0300);
	assert_int_equal(h.consumed, sizeof(hello_noext));
}

static void test_sni_ip_literal(void **state)
{
	struct tls_hello h;
	size_t len = hello_build(scratch, ext_sni_ip, sizeof(ext_sni_ip));

	(void)state;
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 0);
	assert_int_equal(h.sni_invalid, 1);
	assert_string_equal(h.sni, "");
}

static void test_sni_normalised(void **state)
{
	struct tls_hello h;
	size_t len = hello_build(scratch, ext_sni_upper, sizeof(ext_sni_upper));

	(void)state;
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 1);
	assert_int_equal(h.sni_invalid, 0);
	assert_string_equal(h.sni, "www.example.com");
}

static void test_sni_empty_extension(void **state)
{
	struct tls_hello h;
	size_t len = hello_build(scratch, ext_sni_empty, sizeof(ext_sni_empty));

	(void)state;
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 0);
	assert_int_equal(h.sni_invalid, 0);
}

static void test_sni_other_name_type(void **state)
{
	struct tls_hello h;
	size_t len = hello_build(scratch, ext_sni_other_type,
				 sizeof(ext_sni_other_type));

	(void)state;
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 1);
	assert_string_equal(h.sni, "a.com");
}

static void test_sni_two_host_names(void **state)
{
	size_t len = hello_build(scratch, ext_sni_two_hosts,
				 sizeof(ext_sni_two_hosts));

	(void)state;
	assert_parse_error(scratch, len);
}

static void test_sni_overrun(void **state)
{
	size_t len = hello_build(scratch, ext_sni_overrun,
				 sizeof(ext_sni_overrun));

	(void)state;
	assert_parse_error(scratch, len);
	len = hello_build(scratch, ext_sni_trailing, sizeof(ext_sni_trailing));
	assert_parse_error(scratch, len);
}

/* 253 bytes is the longest name (RFC 1035 2.3.4 less the root dot). */
static void test_sni_length_limit(void **state)
{
	struct tls_hello h;
	char name[600];
	uint8_t ext[700];
	size_t len, elen;

	(void)state;
	long_name(name, 253);
	elen = ext_sni_build(ext, name, 253);
	len = hello_build(scratch, ext, elen);
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 1);
	assert_int_equal(strlen(h.sni), 253);
	assert_memory_equal(h.sni, name, 253);

	long_name(name, 254);
	elen = ext_sni_build(ext, name, 254);
	len = hello_build(scratch, ext, elen);
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 0);
	assert_int_equal(h.sni_invalid, 1);

	/* Far longer than sni[] can hold: nothing may be copied. */
	long_name(name, 600);
	elen = ext_sni_build(ext, name, 600);
	len = hello_build(scratch, ext, elen);
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.sni_invalid, 1);
	assert_string_equal(h.sni, "");
}

/* A NUL inside the name (the old CN "a.com\0.evil" trick). */
static void test_sni_embedded_nul(void **state)
{
	struct tls_hello h;
	uint8_t ext[64];
	size_t len, elen;

	(void)state;
	elen = ext_sni_build(ext, "a.com\0.evil", 11);
	len = hello_build(scratch, ext, elen);
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_sni, 0);
	assert_int_equal(h.sni_invalid, 1);
}

static void test_ech(void **state)
{
	struct tls_hello h;
	size_t len = hello_build(scratch, ext_ech, sizeof(ext_ech));

	(void)state;
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_ech, 1);
	/* The outer (public) name is still reported. */
	assert_int_equal(h.has_sni, 1);
	assert_string_equal(h.sni, "public.example");
}

static void test_duplicate_extension(void **state)
{
	size_t len;

	(void)state;
	len = hello_build(scratch, ext_dup_sni, sizeof(ext_dup_sni));
	assert_parse_error(scratch, len);
	len = hello_build(scratch, ext_dup_other, sizeof(ext_dup_other));
	assert_parse_error(scratch, len);
}

static void test_alpn_bad(void **state)
{
	static const char *const bad[] = { "h 2", "h2\x7f", "\x01", "h2\x80" };
	uint8_t ext[64];
	size_t len, i;

	(void)state;
	len = hello_build(scratch, ext_alpn_empty_name,
			  sizeof(ext_alpn_empty_name));
	assert_parse_error(scratch, len);
	len = hello_build(scratch, ext_alpn_empty_list,
			  sizeof(ext_alpn_empty_list));
	assert_parse_error(scratch, len);
	len = hello_build(scratch, ext_alpn_comma, sizeof(ext_alpn_comma));
	assert_parse_error(scratch, len);
	for (i = 0; i < SG_ARRAY_LEN(bad); i++) {
		size_t elen = ext_alpn_build(ext, &bad[i], 1);

		len = hello_build(scratch, ext, elen);
		assert_parse_error(scratch, len);
	}
}

/* Joined names stop before the first entry that would pass 128 bytes. */
static void test_alpn_truncated(void **state)
{
	char a[61], b[61], c[61], x[64], y[65];
	const char *names[] = { a, b, c, "h2" };
	struct tls_hello h;
	uint8_t ext[512];
	size_t len;

	(void)state;
	memset(a, 'a', 60);
	memset(b, 'b', 60);
	memset(c, 'c', 60);
	a[60] = b[60] = c[60] = '\0';
	len = hello_build(scratch, ext, ext_alpn_build(ext, names, 4));
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(h.has_alpn, 1);
	assert_int_equal(strlen(h.alpn), 121);
	assert_memory_equal(h.alpn, a, 60);
	assert_int_equal(h.alpn[60], ',');
	assert_memory_equal(h.alpn + 61, b, 60);

	/* Exactly TLS_ALPN_MAX fits: 63 + ',' + 64. */
	memset(x, 'x', 63);
	memset(y, 'y', 64);
	x[63] = y[64] = '\0';
	names[0] = x;
	names[1] = y;
	len = hello_build(scratch, ext, ext_alpn_build(ext, names, 2));
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_int_equal(strlen(h.alpn), TLS_ALPN_MAX);
	assert_int_equal(h.alpn[63], ',');
}

/* ---- not TLS, or broken TLS --------------------------------------------- */

static void test_not_tls(void **state)
{
	static const uint8_t sslv2[] = { 0x80, 0x2e, 0x01, 0x00, 0x02 };
	const char *get = "GET / HTTP/1.1\r\n";
	struct tls_hello h;

	(void)state;
	assert_int_equal(parse((const uint8_t *)get, strlen(get), &h),
			 SG_DECLINED);
	/* One byte is enough to decline. */
	assert_int_equal(parse((const uint8_t *)get, 1, &h), SG_DECLINED);
	/* An SSLv2-format hello is not something we parse either. */
	assert_int_equal(parse(sslv2, sizeof(sslv2), &h), SG_DECLINED);
	assert_int_equal(parse(NULL, 0, &h), SG_AGAIN);
}

static void test_bad_record_version(void **state)
{
	static const uint8_t bad[] = {
		0x16, 0x07, 0x01, 0x00, 0x2f,   /* handshake, "version 7.1" */
		0x01, 0x00, 0x00, 0x2b,
	};

	(void)state;
	assert_parse_error(bad, sizeof(bad));
	/* Judged as soon as the byte is there. */
	assert_parse_error(bad, 2);
}

static void test_bad_record_length(void **state)
{
	static const uint8_t empty[] = {
		0x16, 0x03, 0x01, 0x00, 0x00,   /* zero-length record */
		0x16, 0x03, 0x01, 0x00, 0x2f,
	};
	static const uint8_t huge[] = {
		0x16, 0x03, 0x01, 0x48, 0x01,   /* 18433 > 2^14 + 2048 */
	};

	(void)state;
	assert_parse_error(empty, sizeof(empty));
	assert_parse_error(empty, 5);
	assert_parse_error(huge, sizeof(huge));
}

static void test_not_client_hello(void **state)
{
	static const uint8_t sh[] = {
		0x16, 0x03, 0x03, 0x00, 0x2f,   /* handshake record */
		0x02,                           /* server_hello */
	};

	(void)state;
	assert_parse_error(sh, sizeof(sh));
}

/* The handshake header alone is enough to refuse a 16 KiB + 1 hello. */
static void test_oversized(void **state)
{
	static const uint8_t big[] = {
		0x16, 0x03, 0x01, 0x40, 0x05,   /* record, len 16389 */
		0x01, 0x00, 0x40, 0x01,         /* client_hello, len 16385 */
	};
	struct tls_hello h;

	(void)state;
	assert_int_equal(parse(big, sizeof(big), &h), SG_ERROR);
	assert_string_equal(h.error, "client hello too large");
	/* The header split over two records is still caught. */
	memcpy(scratch, big, 5);
	put16(scratch + 3, 2);
	memcpy(scratch + 5, big + 5, 2);
	rerecord(big + 7, 2, 2, scratch + 7);
	assert_parse_error(scratch, 14);
}

/* A body of exactly TLS_HELLO_MAX parses, one more byte does not. */
static void test_size_boundary(void **state)
{
	static uint8_t pad[TLS_HELLO_MAX];
	struct tls_hello h;
	size_t pad_ext = TLS_HELLO_MAX - sizeof(hello_head) - 2;
	size_t len, len2;

	(void)state;
	/* padding (RFC 7685), then server_name as the last 16 bytes. */
	memset(pad, 0, sizeof(pad));
	put16(pad, 0x0015);
	put16(pad + 2, pad_ext - 4 - 16);
	ext_sni_build(pad + pad_ext - 16, "big.xyz", 7);
	len = hello_build(scratch, pad, pad_ext);
	assert_int_equal(len, 9 + TLS_HELLO_MAX);
	assert_int_equal(parse(scratch, len, &h), SG_OK);
	assert_string_equal(h.sni, "big.xyz");

	/* The same in 1-byte records (a 98 KiB stream) and 1000-byte ones. */
	len2 = rerecord(scratch + 5, len - 5, 1, scratch2);
	assert_int_equal(parse(scratch2, len2, &h), SG_OK);
	assert_string_equal(h.sni, "big.xyz");
	assert_int_equal(h.consumed, len2);
	len2 = rerecord(scratch + 5, len - 5, 1000, scratch2);
	assert_int_equal(parse(scratch2, len2, &h), SG_OK);
	assert_int_equal(parse(scratch2, len2 - 1, &h), SG_AGAIN);

	put16(pad + 2, pad_ext - 4 - 16 + 1);
	len = hello_build(scratch, pad, pad_ext + 1);
	assert_int_equal(parse(scratch, len, &h), SG_ERROR);
	assert_string_equal(h.error, "client hello too large");
}

/* RFC 8446 5.1: nothing may come between the fragments of a message. */
static void test_interleaved_record(void **state)
{
	struct tls_hello h;
	size_t first = 100, len, n;

	(void)state;
	/* hello bytes [0,100) | alert | hello bytes [100,330) */
	len = rerecord(hello_openssl + 5, first, first, scratch);
	memcpy(scratch + len, rec_alert, sizeof(rec_alert));
	len += sizeof(rec_alert);
	len += rerecord(hello_openssl + 5 + first, OPENSSL_HS_LEN - first,
			OPENSSL_HS_LEN, scratch + len);
	for (n = 0; n <= 5 + first; n++)
		assert_int_equal(parse(scratch, n, &h), SG_AGAIN);
	/* Refused from the alert's first byte on. */
	for (; n <= len; n++)
		assert_parse_error(scratch, n);

	/* A CCS record in the same place fails the same way. */
	memcpy(scratch + 5 + first, rec_ccs, sizeof(rec_ccs));
	assert_parse_error(scratch, 5 + first + 1);
}

/* The hello must end its record: RFC 8446 5.1 and the first flight. */
static void test_data_after_hello_in_record(void **state)
{
	size_t n = sizeof(hello_openssl);

	(void)state;
	memcpy(scratch, hello_openssl, n);
	put16(scratch + 3, OPENSSL_HS_LEN + 1);
	scratch[n] = 0x01;
	assert_parse_error(scratch, n + 1);
	/* The record length alone says it: no need to wait for the byte. */
	assert_parse_error(scratch, n);
}

static void test_malformed_body(void **state)
{
	struct tls_hello h;
	size_t len;

	(void)state;
	/* Handshake length 2 short: the compression vector is cut. */
	memcpy(scratch, hello_noext, sizeof(hello_noext));
	put16(scratch + 3, 0x2f - 2);
	put24(scratch + 6, 0x2b - 2);
	assert_parse_error(scratch, sizeof(hello_noext) - 2);

	/* Session id of 33 bytes (legacy_session_id<0..32>). */
	len = hello_build(scratch, ext_nosni, sizeof(ext_nosni));
	memmove(scratch + 9 + 35 + 33, scratch + 9 + 35, len - 9 - 35);
	memset(scratch + 9 + 35, 0x33, 33);
	scratch[9 + 34] = 33;
	len += 33;
	put16(scratch + 3, len - 5);
	put24(scratch + 6, len - 9);
	assert_parse_error(scratch, len);
	/* ... while 32 is fine. */
	scratch[9 + 34] = 32;
	memmove(scratch + 9 + 35 + 32, scratch + 9 + 35 + 33,
		len - 9 - 35 - 33);
	len -= 1;
	put16(scratch + 3, len - 5);
	put24(scratch + 6, len - 9);
	assert_int_equal(tls_hello_parse(scratch, len, &h), SG_OK);

	/* Odd cipher suite vector (3 bytes, 1 stolen from compression). */
	len = hello_build(scratch, ext_nosni, sizeof(ext_nosni));
	scratch[9 + 36] = 0x03;
	assert_parse_error(scratch, len);

	/* No compression methods: <1..2^8-1> (byte 1 of the vector is 0). */
	memcpy(scratch, hello_noext, sizeof(hello_noext));
	scratch[sizeof(hello_noext) - 2] = 0x00;
	scratch[sizeof(hello_noext) - 1] = 0x00;
	put16(scratch + 3, 0x2f - 1);
	put24(scratch + 6, 0x2b - 1);
	assert_parse_error(scratch, sizeof(hello_noext) - 1);

	/* Extension data running past the block. */
	len = hello_build(scratch, ext_overrun, sizeof(ext_overrun));
	assert_parse_error(scratch, len);

	/* Extension block ends after supported_versions (7 bytes): the
	 * alpn extension trails inside the message. */
	len = hello_build(scratch, ext_nosni, sizeof(ext_nosni));
	put16(scratch + 9 + sizeof(hello_head), 7);
	assert_parse_error(scratch, len);

	/* Extension block longer than the message. */
	len = hello_build(scratch, ext_nosni, sizeof(ext_nosni));
	put16(scratch + 9 + sizeof(hello_head), sizeof(ext_nosni) + 1);
	assert_parse_error(scratch, len);

	/* One stray byte where the extension block would start. */
	memcpy(scratch, hello_noext, sizeof(hello_noext));
	put16(scratch + 3, 0x2f + 1);
	put24(scratch + 6, 0x2b + 1);
	scratch[sizeof(hello_noext)] = 0x00;
	assert_parse_error(scratch, sizeof(hello_noext) + 1);
}

/* ---- sg_host_normalize (lib/sg_str.c) ---------------------------------- */

static void test_host_normalize_ok(void **state)
{
	static const struct {
		const char *in, *out;
	} ok[] = {
		{ "example.com", "example.com" },
		{ "Example.COM", "example.com" },
		{ "example.com.", "example.com" },
		{ "localhost", "localhost" },
		{ "a-b.c_d.example", "a-b.c_d.example" },
		{ "3com.com", "3com.com" },
		{ "1.2.3.example", "1.2.3.example" },
		{ "xn--caf-dma.example", "xn--caf-dma.example" },
		{ "A", "a" },
	};
	char out[SG_HOST_MAX + 1];
	size_t i;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(ok); i++) {
		int rc = sg_host_normalize(ok[i].in, strlen(ok[i].in), out);

		assert_int_equal(rc, strlen(ok[i].out));
		assert_string_equal(out, ok[i].out);
	}
}

static void test_host_normalize_bad(void **state)
{
	static const char *const bad[] = {
		"", ".", "..", "example.com..", ".example.com", "a..b",
		"1.2.3.4", "1.2.3.4.", "127.1", "123",
		"-a.com", "a-.com", "a.-com", "a.com-",
		"a b.com", "a/b.com", "a:b", "::1", "[::1]",
		"caf\xc3\xa9.example",
		"a*.com", "a%2e.com",
		"0x7f000001", "0x7f.1", "1.2.3.0x4", "0X7F.1",  /* hex IPv4 */
	};
	char out[SG_HOST_MAX + 1];
	size_t i;

	(void)state;
	for (i = 0; i < SG_ARRAY_LEN(bad); i++)
		assert_int_equal(sg_host_normalize(bad[i], strlen(bad[i]), out),
				 SG_EINVAL);
	/* A NUL is a byte like any other, and not a host name byte. */
	assert_int_equal(sg_host_normalize("a.com\0x", 7, out), SG_EINVAL);
}

static void test_host_normalize_lengths(void **state)
{
	char in[300], out[SG_HOST_MAX + 1];

	(void)state;
	/* One label: 63 bytes fine, 64 not (RFC 1035 2.3.4). */
	memset(in, 'a', 64);
	memcpy(in + 64, ".com", 4);
	assert_int_equal(sg_host_normalize(in + 1, 63 + 4, out), 67);
	assert_int_equal(sg_host_normalize(in, 64 + 4, out), SG_EINVAL);
	/* Whole name: 253 fine, and with a root dot; 254 not. */
	long_name(in, 254);
	assert_int_equal(sg_host_normalize(in, 253, out), 253);
	assert_int_equal(strlen(out), 253);
	in[253] = '.';
	assert_int_equal(sg_host_normalize(in, 254, out), 253);
	long_name(in, 254);
	assert_int_equal(sg_host_normalize(in, 254, out), SG_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openssl_hello),
		cmocka_unit_test(test_openssl_every_prefix),
		cmocka_unit_test(test_openssl_then_more_records),
		cmocka_unit_test(test_openssl_rerecorded),
		cmocka_unit_test(test_openssl_rerecorded_prefixes),
		cmocka_unit_test(test_no_sni),
		cmocka_unit_test(test_no_extensions),
		cmocka_unit_test(test_sni_ip_literal),
		cmocka_unit_test(test_sni_normalised),
		cmocka_unit_test(test_sni_empty_extension),
		cmocka_unit_test(test_sni_other_name_type),
		cmocka_unit_test(test_sni_two_host_names),
		cmocka_unit_test(test_sni_overrun),
		cmocka_unit_test(test_sni_length_limit),
		cmocka_unit_test(test_sni_embedded_nul),
		cmocka_unit_test(test_ech),
		cmocka_unit_test(test_duplicate_extension),
		cmocka_unit_test(test_alpn_bad),
		cmocka_unit_test(test_alpn_truncated),
		cmocka_unit_test(test_not_tls),
		cmocka_unit_test(test_bad_record_version),
		cmocka_unit_test(test_bad_record_length),
		cmocka_unit_test(test_not_client_hello),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_size_boundary),
		cmocka_unit_test(test_interleaved_record),
		cmocka_unit_test(test_data_after_hello_in_record),
		cmocka_unit_test(test_malformed_body),
		cmocka_unit_test(test_host_normalize_ok),
		cmocka_unit_test(test_host_normalize_bad),
		cmocka_unit_test(test_host_normalize_lengths),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
