/*
 * dns_msg.h - DNS messages: a pure query parser and a response builder
 * (RFC 1035 4.1, EDNS0 per RFC 6891), used by the responder (dns.c).
 *
 * Pure functions over (bytes, length): no I/O, no allocation, nothing
 * kept between calls. The parser reads through the bounds-checked sg_rd
 * cursor and is resumable in the sense of STYLE.md: a message cut short
 * gives SG_AGAIN, and every other answer is final (the same bytes with
 * more after them give the same answer: bytes after the last record are
 * ignored). A UDP datagram is all there is, so the responder treats AGAIN
 * as malformed; over TCP the 2-byte length prefix (dns_tcp_frame) says
 * when a message is complete.
 *
 * Return codes:
 *   SG_OK        a query: header, its one question and any OPT were read;
 *                with an opcode other than QUERY only the header was
 *                (the caller answers NOTIMP)
 *   SG_AGAIN     the message ends early (truncated)
 *   SG_DECLINED  not a query (QR set: a response); never answer it
 *   SG_ERROR     malformed (q->error says why): answer FORMERR
 */
#ifndef GW_DNS_MSG_H
#define GW_DNS_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "sg_str.h"

#define DNS_HDR_LEN     12
#define DNS_NAME_MAX    255     /* wire form, length bytes and root included (RFC 1035 2.3.4) */
#define DNS_LABEL_MAX   63
#define DNS_TEXT_MAX    1024    /* presentation form: every byte may need "\DDD" */
#define DNS_UDP_MIN     512     /* RFC 1035 4.2.1; RFC 6891 6.2.5: smaller EDNS sizes count as 512 */
#define DNS_UDP_MAX     1232    /* what we advertise and send at most: no IP fragmentation (DNS flag day 2020) */
#define DNS_TCP_MAX     65535   /* RFC 1035 4.2.2: the 2-byte length prefix */
#define DNS_MAX_PTRS    64      /* compression pointers followed in one name */

enum dns_type {
	DNS_T_A = 1, DNS_T_NS = 2, DNS_T_CNAME = 5, DNS_T_SOA = 6, DNS_T_PTR = 12,
	DNS_T_MX = 15, DNS_T_TXT = 16, DNS_T_AAAA = 28, DNS_T_SRV = 33, DNS_T_OPT = 41,
	DNS_T_SVCB = 64, DNS_T_HTTPS = 65, DNS_T_ANY = 255,
};

#define DNS_CLASS_IN 1

enum dns_rcode {
	DNS_R_NOERROR = 0, DNS_R_FORMERR = 1, DNS_R_SERVFAIL = 2, DNS_R_NXDOMAIN = 3,
	DNS_R_NOTIMP = 4, DNS_R_REFUSED = 5,
	DNS_R_BADVERS = 16,     /* extended (RFC 6891 6.1.3): needs an OPT in the response */
};

/* Header flag bits (RFC 1035 4.1.1, RFC 4035 3.2 for AD/CD). */
#define DNS_F_QR 0x8000
#define DNS_F_AA 0x0400
#define DNS_F_TC 0x0200
#define DNS_F_RD 0x0100
#define DNS_F_RA 0x0080
#define DNS_F_AD 0x0020
#define DNS_F_CD 0x0010

struct dns_query {
	uint16_t id;
	uint16_t flags;                 /* as received */
	uint8_t opcode;
	uint16_t qdcount, ancount, nscount, arcount;
	int has_question;               /* the question below was read */
	uint8_t qwire[DNS_NAME_MAX];    /* the question name, uncompressed, case as sent (0x20) */
	size_t qwire_len;               /* root label included */
	char qtext[DNS_TEXT_MAX];       /* presentation form, NUL-terminated, no trailing dot;
					 * "." for the root; odd bytes as \DDD or \. */
	size_t qtext_len;
	int qtext_plain;                /* every label byte is [A-Za-z0-9_-]: qtext is a
					 * candidate host name (sg_host_normalize decides) */
	uint16_t qtype, qclass;
	int has_opt;                    /* an EDNS0 OPT record was read */
	uint16_t udp_size;              /* its payload size (raw) */
	uint8_t edns_version;
	int edns_do;                    /* DNSSEC OK (RFC 3225): copied to the response */
	size_t end;                     /* bytes of the message read */
	const char *error;              /* static, for SG_ERROR */
};

int dns_parse_query(const uint8_t *p, size_t len, struct dns_query *q);

/* The largest response the client takes over UDP: 512 without EDNS,
 * else its payload size clamped to [512, DNS_UDP_MAX]. */
size_t dns_udp_limit(const struct dns_query *q);

/*
 * Build a response to q into out (cap bytes) and return its length (0 when
 * cap cannot hold even the header: never with cap >= DNS_UDP_MIN).
 *
 * Header: q's id, opcode, RD and CD; QR and RA set; rcode's low 4 bits.
 * The question is echoed as received when q has one; an OPT record is
 * added when q had one (advertising DNS_UDP_MAX, rcode's high 8 bits, DO
 * copied). Answers: n records of rrtype (A or AAAA, matching addrs'
 * family) under the question name (a compression pointer to it), class
 * IN, ttl seconds.
 *
 * When the whole response would exceed limit (or cap) it is sent without
 * answers and with TC set (RFC 1035 4.2.1, RFC 2181 9): the client asks
 * again over TCP. *truncated says so.
 */
size_t dns_build_response(const struct dns_query *q, int rcode, uint16_t rrtype,
			  const struct sg_addr *addrs, size_t n, uint32_t ttl,
			  size_t limit, uint8_t *out, size_t cap, int *truncated);

/*
 * A response with no question, for a message whose question could not
 * be read: id and opcode from the first bytes (len >= DNS_HDR_LEN).
 */
size_t dns_build_bare(const uint8_t *req, size_t len, int rcode, uint8_t *out, size_t cap);

/*
 * TCP framing (RFC 1035 4.2.2, RFC 7766 8): SG_OK with *msg and *msglen the
 * first message of buf (whose framed size is *msglen + 2), SG_AGAIN when
 * it is not all there yet, SG_ERROR for a zero length.
 */
int dns_tcp_frame(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msglen);

/* "A", "AAAA", "HTTPS" ... or "TYPE123" (RFC 3597) into buf. */
const char *dns_type_str(uint16_t t, char *buf, size_t bufsz);
/* "NOERROR", "NXDOMAIN" ... or "RCODE17". */
const char *dns_rcode_str(int rcode);

#endif
