/*
 * test_dns_msg.c - the DNS query parser and response builder
 * (gateway/dns_msg.c).
 *
 * Fixtures are queries as a stub resolver sends them, written out byte by
 * byte with what each part is; the malformed ones are what the responder
 * must answer FORMERR to (or drop) without reading past the datagram.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "sg.h"
#include "gateway/dns_msg.h"

/* Header: id 0x1234, flags RD, QDCOUNT 1, AN 0, NS 0, AR (given). */
#define HDR(ar) 0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, (ar)
/* "Example.COM" (0x20 mixed case, RFC draft-vixie-dnsext-dns0x20) */
#define QNAME 0x07, 'E', 'x', 'a', 'm', 'p', 'l', 'e', 0x03, 'C', 'O', 'M', 0x00
#define QA    0x00, 0x01, 0x00, 0x01      /* type A, class IN */
/* OPT: root owner, type 41, payload 4096, ext-rcode 0, version 0, DO, rdlen 0 */
#define OPT4096_DO 0x00, 0x00, 0x29, 0x10, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00

static const uint8_t q_a[] = { HDR(0), QNAME, QA };
static const uint8_t q_a_edns[] = { HDR(1), QNAME, QA, OPT4096_DO };

static int parse(const uint8_t *p, size_t n, struct dns_query *q)
{
	return dns_parse_query(p, n, q);
}

static void test_plain_query(void **state)
{
	struct dns_query q;

	(void)state;
	assert_int_equal(parse(q_a, sizeof(q_a), &q), SG_OK);
	assert_int_equal(q.id, 0x1234);
	assert_int_equal(q.opcode, 0);
	assert_true(q.has_question);
	assert_string_equal(q.qtext, "Example.COM");
	assert_int_equal(q.qtext_len, 11);
	assert_true(q.qtext_plain);
	assert_int_equal(q.qwire_len, 13);
	assert_memory_equal(q.qwire, q_a + 12, 13);     /* case kept for the echo */
	assert_int_equal(q.qtype, DNS_T_A);
	assert_int_equal(q.qclass, DNS_CLASS_IN);
	assert_false(q.has_opt);
	assert_int_equal(q.end, sizeof(q_a));
	assert_int_equal(dns_udp_limit(&q), 512);
}

static void test_edns(void **state)
{
	struct dns_query q;

	(void)state;
	assert_int_equal(parse(q_a_edns, sizeof(q_a_edns), &q), SG_OK);
	assert_true(q.has_opt);
	assert_int_equal(q.udp_size, 4096);
	assert_int_equal(q.edns_version, 0);
	assert_true(q.edns_do);
	/* RFC 6891 6.2.5: never more than we advertise, never under 512 */
	assert_int_equal(dns_udp_limit(&q), DNS_UDP_MAX);
	q.udp_size = 1000;
	assert_int_equal(dns_udp_limit(&q), 1000);
	q.udp_size = 100;
	assert_int_equal(dns_udp_limit(&q), 512);
}

/* Every prefix of a good query is AGAIN: nothing is decided on half a message. */
static void test_truncated(void **state)
{
	struct dns_query q;
	size_t n;

	(void)state;
	for (n = 0; n < sizeof(q_a_edns); n++)
		assert_int_equal(parse(q_a_edns, n, &q), SG_AGAIN);
	assert_int_equal(parse(q_a_edns, sizeof(q_a_edns), &q), SG_OK);
}

static void test_trailing_bytes_ignored(void **state)
{
	static const uint8_t m[] = { HDR(0), QNAME, QA, 0xde, 0xad };
	struct dns_query q;

	(void)state;
	assert_int_equal(parse(m, sizeof(m), &q), SG_OK);
	assert_int_equal(q.end, sizeof(m) - 2);
}

static void test_response_declined(void **state)
{
	uint8_t m[sizeof(q_a)];
	struct dns_query q;

	(void)state;
	memcpy(m, q_a, sizeof(m));
	m[2] |= 0x80;   /* QR */
	assert_int_equal(parse(m, sizeof(m), &q), SG_DECLINED);
	/* decided on the flags alone */
	assert_int_equal(parse(m, 4, &q), SG_DECLINED);
}

static void test_qdcount(void **state)
{
	uint8_t m[sizeof(q_a)];
	struct dns_query q;

	(void)state;
	memcpy(m, q_a, sizeof(m));
	m[5] = 0;
	assert_int_equal(parse(m, sizeof(m), &q), SG_ERROR);
	assert_non_null(q.error);
	m[5] = 2;
	assert_int_equal(parse(m, sizeof(m), &q), SG_ERROR);
}

static void test_other_opcode(void **state)
{
	uint8_t m[sizeof(q_a)];
	struct dns_query q;

	(void)state;
	memcpy(m, q_a, sizeof(m));
	m[2] = 0x28;    /* opcode 5 (UPDATE), RD off */
	assert_int_equal(parse(m, sizeof(m), &q), SG_OK);
	assert_int_equal(q.opcode, 5);
	assert_false(q.has_question);
}

/* The question cannot be compressed: a pointer there can only point at
 * the header, itself or forward. */
static void test_pointer_in_question(void **state)
{
	static const uint8_t self[] = { HDR(0), 0xc0, 0x0c, QA };
	static const uint8_t hdr[] = { HDR(0), 0xc0, 0x02, QA };
	static const uint8_t fwd[] = { HDR(0), 0x01, 'a', 0xc0, 0x14, QA, 0x01, 'b', 0x00 };
	struct dns_query q;

	(void)state;
	assert_int_equal(parse(self, sizeof(self), &q), SG_ERROR);
	assert_int_equal(parse(hdr, sizeof(hdr), &q), SG_ERROR);
	assert_int_equal(parse(fwd, sizeof(fwd), &q), SG_ERROR);
}

/* A record after the question whose name loops: 29 -> 25 -> 29 ... */
static void test_pointer_loop_in_record(void **state)
{
	static const uint8_t m[] = {
		0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
		QNAME, QA,                              /* 12..28 */
		0x01, 'x', 0xc0, 0x1f,                  /* 29: "x" then -> 31 (itself) */
		0x00, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0x00, 0x00,
	};
	/* good compression: an answer owned by the question name */
	static const uint8_t ok[] = {
		0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
		QNAME, QA, 0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0, 0, 0, 60, 0x00, 0x04,
		192, 0, 2, 1,
	};
	struct dns_query q;

	(void)state;
	assert_int_equal(parse(m, sizeof(m), &q), SG_ERROR);
	assert_int_equal(parse(ok, sizeof(ok), &q), SG_OK);
	assert_int_equal(q.end, sizeof(ok));
}

static void test_label_over_63(void **state)
{
	uint8_t m[12 + 1 + 64 + 1 + 4] = { HDR(0) };
	struct dns_query q;

	(void)state;
	m[12] = 64;     /* 0x40: the reserved "extended label" type */
	memset(m + 13, 'a', 64);
	memcpy(m + 12 + 1 + 64, "\0\0\1\0\1", 5);
	assert_int_equal(parse(m, sizeof(m), &q), SG_ERROR);
	m[12] = 0x80;   /* 10: reserved */
	assert_int_equal(parse(m, sizeof(m), &q), SG_ERROR);
}

static void test_name_over_255(void **state)
{
	uint8_t m[12 + 5 * 52 + 1 + 4] = { HDR(0) };
	struct dns_query q;
	size_t i, o = 12;

	(void)state;
	/* 5 labels of 51 bytes: 260 bytes of wire name */
	for (i = 0; i < 5; i++) {
		m[o++] = 51;
		memset(m + o, 'a', 51);
		o += 51;
	}
	m[o++] = 0;
	memcpy(m + o, "\0\1\0\1", 4);
	assert_int_equal(parse(m, sizeof(m), &q), SG_ERROR);
	assert_string_equal(q.error, "name longer than 255 bytes");
	/* exactly 255 is fine: 4 labels of 62 (252 bytes), one of 1 (2), root (1) */
	o = 12;
	for (i = 0; i < 4; i++) {
		m[o++] = 62;
		memset(m + o, 'b', 62);
		o += 62;
	}
	m[o++] = 1;
	m[o++] = 'c';
	m[o++] = 0;
	memcpy(m + o, "\0\1\0\1", 4);
	o += 4;
	assert_int_equal(parse(m, o, &q), SG_OK);
	assert_int_equal(q.qwire_len, 255);
}

/* Bytes a host name cannot hold are shown escaped and mark the name. */
static void test_odd_bytes(void **state)
{
	static const uint8_t m[] = { HDR(0), 0x03, 'a', '.', 'b', 0x02, 0x00, 'z', 0x04, 't',
				     'e', 's', 't', 0x00, QA };
	static const uint8_t root[] = { HDR(0), 0x00, 0x00, 0x02, 0x00, 0x01 };
	struct dns_query q;

	(void)state;
	assert_int_equal(parse(m, sizeof(m), &q), SG_OK);
	assert_false(q.qtext_plain);
	assert_string_equal(q.qtext, "a\\.b.\\000z.test");
	assert_int_equal(parse(root, sizeof(root), &q), SG_OK);
	assert_string_equal(q.qtext, ".");
	assert_false(q.qtext_plain);
	assert_int_equal(q.qtype, DNS_T_NS);
}

static void test_opt_rules(void **state)
{
	/* two OPT records */
	static const uint8_t two[] = { HDR(2), QNAME, QA, OPT4096_DO, OPT4096_DO };
	/* OPT owned by "a." */
	static const uint8_t owner[] = { HDR(1), QNAME, QA, 0x01, 'a', 0x00, 0x00, 0x29, 0x10,
					 0x00, 0, 0, 0, 0, 0x00, 0x00 };
	/* OPT in the answer section */
	static const uint8_t sect[] = { 0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
					0x00, 0x00, 0x00, QNAME, QA, OPT4096_DO };
	/* an option whose length runs past the rdata */
	static const uint8_t badopt[] = { HDR(1), QNAME, QA, 0x00, 0x00, 0x29, 0x04, 0xd0, 0, 0,
					  0, 0, 0x00, 0x05, 0x00, 0x0a, 0x00, 0x08, 0x01 };
	/* a cookie option (10), well formed; version 1 */
	static const uint8_t cookie_v1[] = { HDR(1), QNAME, QA, 0x00, 0x00, 0x29, 0x04, 0xd0, 0,
					     1, 0, 0, 0x00, 0x0c, 0x00, 0x0a, 0x00, 0x08, 1, 2,
					     3, 4, 5, 6, 7, 8 };
	struct dns_query q;

	(void)state;
	assert_int_equal(parse(two, sizeof(two), &q), SG_ERROR);
	assert_int_equal(parse(owner, sizeof(owner), &q), SG_ERROR);
	assert_int_equal(parse(sect, sizeof(sect), &q), SG_ERROR);
	assert_int_equal(parse(badopt, sizeof(badopt), &q), SG_ERROR);
	assert_int_equal(parse(cookie_v1, sizeof(cookie_v1), &q), SG_OK);
	assert_int_equal(q.udp_size, 1232);
	assert_int_equal(q.edns_version, 1);
	assert_false(q.edns_do);
}

/* ---- builder ---- */

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void test_build_answer(void **state)
{
	struct dns_query q;
	struct sg_addr a[2];
	uint8_t out[DNS_UDP_MAX];
	size_t n, o;
	int tc = -1;

	(void)state;
	assert_int_equal(sg_addr_parse("192.0.2.1", 9, &a[0]), 0);
	assert_int_equal(sg_addr_parse("192.0.2.2", 9, &a[1]), 0);
	assert_int_equal(parse(q_a_edns, sizeof(q_a_edns), &q), SG_OK);
	n = dns_build_response(&q, DNS_R_NOERROR, DNS_T_A, a, 2, 60, dns_udp_limit(&q), out,
			       sizeof(out), &tc);
	assert_int_equal(tc, 0);
	assert_int_equal(n, 12 + 13 + 4 + 2 * 16 + 11);
	assert_int_equal(get16(out), 0x1234);
	/* QR RD RA, NOERROR */
	assert_int_equal(get16(out + 2), DNS_F_QR | DNS_F_RD | DNS_F_RA);
	assert_int_equal(get16(out + 4), 1);
	assert_int_equal(get16(out + 6), 2);
	assert_int_equal(get16(out + 8), 0);
	assert_int_equal(get16(out + 10), 1);
	assert_memory_equal(out + 12, q_a + 12, 13 + 4);        /* question echoed, case kept */
	o = 12 + 17;
	assert_int_equal(get16(out + o), 0xc00c);
	assert_int_equal(get16(out + o + 2), DNS_T_A);
	assert_int_equal(get16(out + o + 4), DNS_CLASS_IN);
	assert_int_equal(get16(out + o + 6), 0);
	assert_int_equal(get16(out + o + 8), 60);
	assert_int_equal(get16(out + o + 10), 4);
	assert_memory_equal(out + o + 12, "\xc0\x00\x02\x01", 4);
	o += 32;
	/* OPT: root, 41, our size, DO copied */
	assert_int_equal(out[o], 0);
	assert_int_equal(get16(out + o + 1), DNS_T_OPT);
	assert_int_equal(get16(out + o + 3), DNS_UDP_MAX);
	assert_int_equal(get16(out + o + 7), 0x8000);
}

/* Too big for the client's UDP size: no answers, TC set (RFC 2181 9). */
static void test_build_truncated(void **state)
{
	struct dns_query q;
	struct sg_addr a[100];
	uint8_t out[DNS_UDP_MAX];
	size_t n, i;
	int tc = 0;

	(void)state;
	for (i = 0; i < 100; i++) {
		a[i].family = AF_INET6;
		memset(&a[i].u.v6, (int)i, 16);
	}
	assert_int_equal(parse(q_a, sizeof(q_a), &q), SG_OK);
	n = dns_build_response(&q, DNS_R_NOERROR, DNS_T_AAAA, a, 100, 60, dns_udp_limit(&q),
			       out, sizeof(out), &tc);
	assert_int_equal(tc, 1);
	assert_int_equal(n, 12 + 17);
	assert_true(get16(out + 2) & DNS_F_TC);
	assert_int_equal(get16(out + 6), 0);
	/* 18 AAAA records (28 bytes each) fit in 512 with this question */
	n = dns_build_response(&q, DNS_R_NOERROR, DNS_T_AAAA, a, 17, 60, 512, out, sizeof(out),
			       &tc);
	assert_int_equal(tc, 0);
	assert_true(n <= 512);
	assert_int_equal(get16(out + 6), 17);
}

static void test_build_badvers(void **state)
{
	uint8_t m[sizeof(q_a_edns)], out[512];
	struct dns_query q;
	size_t n;

	(void)state;
	memcpy(m, q_a_edns, sizeof(m));
	m[sizeof(m) - 5] = 1;   /* version 1 */
	assert_int_equal(parse(m, sizeof(m), &q), SG_OK);
	n = dns_build_response(&q, DNS_R_BADVERS, 0, NULL, 0, 0, 512, out, sizeof(out), NULL);
	assert_int_equal(n, 12 + 17 + 11);
	/* header rcode 0, extended rcode 1 in the OPT TTL (16 = 1 << 4) */
	assert_int_equal(get16(out + 2) & 0xf, 0);
	assert_int_equal(out[12 + 17 + 5], 1);
}

static void test_build_bare_and_frame(void **state)
{
	uint8_t out[64], framed[2 + sizeof(q_a)];
	const uint8_t *msg;
	size_t n, mlen;

	(void)state;
	n = dns_build_bare(q_a, sizeof(q_a), DNS_R_FORMERR, out, sizeof(out));
	assert_int_equal(n, 12);
	assert_int_equal(get16(out), 0x1234);
	assert_int_equal(get16(out + 2), DNS_F_QR | DNS_F_RD | DNS_F_RA | DNS_R_FORMERR);
	assert_int_equal(get16(out + 4), 0);
	assert_int_equal(dns_build_bare(q_a, 11, DNS_R_FORMERR, out, sizeof(out)), 0);

	framed[0] = 0;
	framed[1] = sizeof(q_a);
	memcpy(framed + 2, q_a, sizeof(q_a));
	assert_int_equal(dns_tcp_frame(framed, 1, &msg, &mlen), SG_AGAIN);
	assert_int_equal(dns_tcp_frame(framed, sizeof(framed) - 1, &msg, &mlen), SG_AGAIN);
	assert_int_equal(dns_tcp_frame(framed, sizeof(framed), &msg, &mlen), SG_OK);
	assert_ptr_equal(msg, framed + 2);
	assert_int_equal(mlen, sizeof(q_a));
	assert_int_equal(dns_tcp_frame((const uint8_t *)"\0\0", 2, &msg, &mlen), SG_ERROR);
}

static void test_names(void **state)
{
	char b[16];

	(void)state;
	assert_string_equal(dns_type_str(DNS_T_AAAA, b, sizeof(b)), "AAAA");
	assert_string_equal(dns_type_str(65, b, sizeof(b)), "HTTPS");
	assert_string_equal(dns_type_str(999, b, sizeof(b)), "TYPE999");
	assert_string_equal(dns_rcode_str(DNS_R_NXDOMAIN), "NXDOMAIN");
	assert_string_equal(dns_rcode_str(DNS_R_BADVERS), "BADVERS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_query),
		cmocka_unit_test(test_edns),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_trailing_bytes_ignored),
		cmocka_unit_test(test_response_declined),
		cmocka_unit_test(test_qdcount),
		cmocka_unit_test(test_other_opcode),
		cmocka_unit_test(test_pointer_in_question),
		cmocka_unit_test(test_pointer_loop_in_record),
		cmocka_unit_test(test_label_over_63),
		cmocka_unit_test(test_name_over_255),
		cmocka_unit_test(test_odd_bytes),
		cmocka_unit_test(test_opt_rules),
		cmocka_unit_test(test_build_answer),
		cmocka_unit_test(test_build_truncated),
		cmocka_unit_test(test_build_badvers),
		cmocka_unit_test(test_build_bare_and_frame),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
