/*
 * fuzz_dns.c - libFuzzer target for the DNS message parser and builder
 * (gateway/dns_msg.c).
 *
 * Each input is:
 *  1. parsed as a query, whole and cut in half: every answer but SG_AGAIN
 *     is final (the longer message gets the same answer), and the result
 *     obeys dns_msg.h (bounded name, plain text only of host-name bytes);
 *  2. if it is a query, answered (with addresses taken from the input,
 *     under the UDP and the TCP limit): the response fits its limit, and
 *     read back as a query (QR cleared) it carries the same question, its
 *     answers (or TC and none) and its OPT;
 *  3. read as a TCP stream by dns_tcp_frame.
 *
 * Seeds: tests/fuzz/corpus/fuzz_dns/ (stub-resolver queries, EDNS, the
 * malformed shapes of the integration test).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "gateway/dns_msg.h"
#include "sg_poison.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static int host_byte(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.';
}

static void check_query(int rc, const struct dns_query *q, size_t len)
{
	size_t i;

	CHECK(rc == SG_OK || rc == SG_AGAIN || rc == SG_DECLINED || rc == SG_ERROR);
	CHECK((rc == SG_ERROR) == (q->error != NULL));
	if (rc != SG_OK)
		return;
	CHECK(q->end >= DNS_HDR_LEN && q->end <= len);
	if (!q->has_question)
		return;
	CHECK(q->qwire_len >= 1 && q->qwire_len <= DNS_NAME_MAX);
	CHECK(q->qwire[q->qwire_len - 1] == 0);
	CHECK(q->qtext_len < DNS_TEXT_MAX && strlen(q->qtext) == q->qtext_len);
	if (q->qtext_plain)
		for (i = 0; i < q->qtext_len; i++)
			CHECK(host_byte(q->qtext[i]));
}

static void fuzz_build(const struct dns_query *q, const uint8_t *data, size_t size)
{
	static uint8_t out[DNS_TCP_MAX];
	struct sg_addr addrs[300];
	size_t n = size % 300, i, limits[2], k, len;
	uint16_t type = (size & 1) ? DNS_T_AAAA : DNS_T_A;

	for (i = 0; i < n; i++) {
		addrs[i].family = type == DNS_T_AAAA ? AF_INET6 : AF_INET;
		memset(&addrs[i].u, data[i % size], sizeof(addrs[i].u));
	}
	limits[0] = dns_udp_limit(q);
	limits[1] = DNS_TCP_MAX;
	CHECK(limits[0] >= DNS_UDP_MIN && limits[0] <= DNS_UDP_MAX);
	for (k = 0; k < 2; k++) {
		struct dns_query back;
		int tc = -1, rc;

		len = dns_build_response(q, data[0] & 0xf, type, addrs, n, 60, limits[k], out,
					 sizeof(out), &tc);
		CHECK(len >= DNS_HDR_LEN && len <= limits[k]);
		CHECK(tc == 0 || tc == 1);
		CHECK((out[0] << 8 | out[1]) == q->id);
		CHECK(out[2] & 0x80);
		/* read it back as a query */
		out[2] &= 0x7f;
		rc = dns_parse_query(out, len, &back);
		if (!q->has_question) {
			/* a non-QUERY opcode: header only */
			CHECK(rc == SG_OK || rc == SG_ERROR);
			continue;
		}
		CHECK(rc == SG_OK);
		CHECK(back.end == len);
		CHECK(back.qwire_len == q->qwire_len &&
		      !memcmp(back.qwire, q->qwire, q->qwire_len));
		CHECK(!strcmp(back.qtext, q->qtext));
		CHECK(back.qtype == q->qtype && back.qclass == q->qclass);
		CHECK(back.ancount == (tc ? 0 : n));
		CHECK(back.has_opt == q->has_opt);
		CHECK(!!(out[2] & 0x02) == tc);
	}
	(void)dns_build_bare(data, size, 1, out, sizeof(out));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_query q, h;
	const uint8_t *msg;
	size_t mlen;
	int rc, hrc;

	rc = dns_parse_query(data, size, &q);
	check_query(rc, &q, size);
	hrc = dns_parse_query(data, size / 2, &h);
	check_query(hrc, &h, size / 2);
	if (hrc != SG_AGAIN) {
		CHECK(hrc == rc);
		if (rc == SG_OK) {
			CHECK(h.end == q.end && h.has_question == q.has_question);
			CHECK(!strcmp(h.qtext, q.qtext));
		}
	}
	if (rc == SG_OK && size > 0)
		fuzz_build(&q, data, size);
	rc = dns_tcp_frame(data, size, &msg, &mlen);
	CHECK(rc == SG_OK || rc == SG_AGAIN || rc == SG_ERROR);
	if (rc == SG_OK)
		CHECK(msg == data + 2 && mlen + 2 <= size && mlen > 0);
	return 0;
}
