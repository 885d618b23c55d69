/*
 * dns_msg.c - DNS query parser and response builder; see dns_msg.h.
 */
#include <stdio.h>
#include <string.h>

#include "sg.h"
#include "gateway/dns_msg.h"
#include "sg_poison.h"

static int host_byte(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* Where a name is written out as it is read (the question only). */
struct name_out {
	uint8_t *wire;          /* DNS_NAME_MAX bytes */
	size_t wire_len;
	char *text;             /* DNS_TEXT_MAX bytes */
	size_t text_len;
	int plain;
};

static void text_label(struct name_out *o, const uint8_t *l, size_t n)
{
	size_t i;

	if (o->text_len)
		o->text[o->text_len++] = '.';
	for (i = 0; i < n; i++) {
		uint8_t c = l[i];

		/* Presentation form (RFC 1035 5.1): a dot inside a label and
		 * bytes outside printable ASCII are escaped, so the text can
		 * never read as a different name. Such a name is not a host
		 * name, whatever sg_host_normalize would say of the text. */
		if (host_byte(c)) {
			o->text[o->text_len++] = (char)c;
			continue;
		}
		o->plain = 0;
		if (c > 0x20 && c < 0x7f && c != '.' && c != '\\' && c != '"') {
			o->text[o->text_len++] = (char)c;
		} else if (c == '.' || c == '\\' || c == '"') {
			o->text[o->text_len++] = '\\';
			o->text[o->text_len++] = (char)c;
		} else {
			o->text_len += (size_t)snprintf(o->text + o->text_len, 5, "\\%03u", c);
		}
	}
}

/*
 * Read a (possibly compressed) name starting at rd's offset; rd ends up
 * after the name's bytes in place (after the first pointer, if any).
 *
 * Loop guard (RFC 1035 4.1.4 says a pointer refers to a "prior
 * occurrence"): every pointer must point strictly before the previous
 * pointer's target (the first one: before itself) and past the header.
 * Targets then strictly decrease, so following them ends; DNS_MAX_PTRS
 * and the 255-byte limit bound the work on top of that.
 */
static int rd_name(struct sg_rd *rd, struct name_out *o, const char **err)
{
	size_t pos = rd->off, limit = rd->off, wire = 0, ptrs = 0;
	int jumped = 0;

	for (;;) {
		uint8_t c;

		if (pos >= rd->len)
			return SG_AGAIN;
		c = rd->p[pos];
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (pos + 1 >= rd->len)
				return SG_AGAIN;
			target = (size_t)(c & 0x3f) << 8 | rd->p[pos + 1];
			if (!jumped)
				rd->off = pos + 2;
			if (target >= limit || target < DNS_HDR_LEN || ++ptrs > DNS_MAX_PTRS) {
				*err = "compression pointer loop or forward pointer";
				return SG_ERROR;
			}
			limit = target;
			pos = target;
			jumped = 1;
			continue;
		}
		if (c & 0xc0) {
			/* 01 (EDNS0 extended label, RFC 6891 5) and 10 are not in use */
			*err = "label longer than 63 bytes or of an unknown type";
			return SG_ERROR;
		}
		if (wire + 1 + c > DNS_NAME_MAX) {
			*err = "name longer than 255 bytes";
			return SG_ERROR;
		}
		if (pos + 1 + c > rd->len)
			return SG_AGAIN;
		if (o) {
			o->wire[wire] = c;
			memcpy(o->wire + wire + 1, rd->p + pos + 1, c);
			if (c)
				text_label(o, rd->p + pos + 1, c);
		}
		wire += 1u + c;
		pos += 1u + c;
		if (c == 0)
			break;
	}
	if (!jumped)
		rd->off = pos;
	if (o) {
		o->wire_len = wire;
		if (wire == 1) {
			o->text[o->text_len++] = '.';
			o->plain = 0;   /* the root is not a host name */
		}
		o->text[o->text_len] = '\0';
	}
	return SG_OK;
}

/* EDNS0 options (RFC 6891 6.1.2): code, length, data, exactly filling rdata. */
static int opt_options_ok(struct sg_rd rdata)
{
	while (sg_rd_left(&rdata) > 0) {
		sg_rd_u16be(&rdata);
		sg_rd_vec16(&rdata);
		if (rdata.short_)
			return 0;
	}
	return 1;
}

/* One resource record of section sec (1 answer, 2 authority, 3 additional). */
static int rd_rr(struct sg_rd *rd, struct dns_query *q, int sec)
{
	size_t name_at = rd->off;
	uint16_t type, klass, rdlen;
	uint32_t ttl;
	struct sg_rd rdata;
	int rc = rd_name(rd, NULL, &q->error);

	if (rc != SG_OK)
		return rc;
	type = sg_rd_u16be(rd);
	klass = sg_rd_u16be(rd);
	ttl = sg_rd_u32be(rd);
	rdlen = sg_rd_u16be(rd);
	rdata = sg_rd_sub(rd, rdlen);
	if (rd->short_)
		return SG_AGAIN;
	if (type != DNS_T_OPT)
		return SG_OK;
	/* RFC 6891 6.1.1: one OPT at most, in the additional section, owned
	 * by the root; anything else is FORMERR. */
	if (sec != 3 || q->has_opt || rd->p[name_at] != 0) {
		q->error = q->has_opt ? "more than one OPT record" : "misplaced OPT record";
		return SG_ERROR;
	}
	if (!opt_options_ok(rdata)) {
		q->error = "malformed EDNS option";
		return SG_ERROR;
	}
	q->has_opt = 1;
	q->udp_size = klass;
	q->edns_version = (uint8_t)(ttl >> 16);
	q->edns_do = (ttl & 0x8000) != 0;
	return SG_OK;
}

int dns_parse_query(const uint8_t *p, size_t len, struct dns_query *q)
{
	struct name_out o;
	struct sg_rd rd;
	uint32_t i, total;
	int rc;

	q->error = NULL;
	q->has_question = 0;
	q->has_opt = 0;
	q->qtext[0] = '\0';
	q->qtext_len = 0;
	q->qwire_len = 0;
	q->end = 0;
	sg_rd_init(&rd, p, len);
	q->id = sg_rd_u16be(&rd);
	q->flags = sg_rd_u16be(&rd);
	if (rd.short_)
		return SG_AGAIN;
	/* Never answer an answer: two responders would echo forever. */
	if (q->flags & DNS_F_QR)
		return SG_DECLINED;
	q->qdcount = sg_rd_u16be(&rd);
	q->ancount = sg_rd_u16be(&rd);
	q->nscount = sg_rd_u16be(&rd);
	q->arcount = sg_rd_u16be(&rd);
	if (rd.short_)
		return SG_AGAIN;
	q->opcode = (uint8_t)((q->flags >> 11) & 0xf);
	if (q->opcode != 0) {
		q->end = DNS_HDR_LEN;
		return SG_OK;
	}
	/* RFC 9619: a QUERY carries exactly one question. */
	if (q->qdcount != 1) {
		q->error = "QDCOUNT is not 1";
		return SG_ERROR;
	}
	o.wire = q->qwire;
	o.wire_len = 0;
	o.text = q->qtext;
	o.text_len = 0;
	o.plain = 1;
	rc = rd_name(&rd, &o, &q->error);
	if (rc != SG_OK)
		return rc;
	q->qwire_len = o.wire_len;
	q->qtext_len = o.text_len;
	q->qtext_plain = o.plain;
	q->qtype = sg_rd_u16be(&rd);
	q->qclass = sg_rd_u16be(&rd);
	if (rd.short_)
		return SG_AGAIN;
	q->has_question = 1;
	/* The other sections are unusual in a query but legal: skip them,
	 * looking only for the OPT record. */
	total = (uint32_t)q->ancount + q->nscount + q->arcount;
	for (i = 0; i < total; i++) {
		int sec = i < q->ancount ? 1 : i < (uint32_t)q->ancount + q->nscount ? 2 : 3;

		rc = rd_rr(&rd, q, sec);
		if (rc != SG_OK)
			return rc;
	}
	q->end = rd.off;
	return SG_OK;
}

size_t dns_udp_limit(const struct dns_query *q)
{
	if (!q->has_opt || q->udp_size <= DNS_UDP_MIN)
		return DNS_UDP_MIN;
	return q->udp_size < DNS_UDP_MAX ? q->udp_size : DNS_UDP_MAX;
}

/* ---- builder ------------------------------------------------------------ */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void put_header(uint8_t *out, uint16_t id, uint16_t qflags, int rcode, int tc,
		       uint16_t qd, uint16_t an, uint16_t ar)
{
	/* Opcode, RD and CD come from the query; we recurse for the client
	 * (RA) and never claim authority (AA) or validation (AD). */
	uint16_t f = DNS_F_QR | DNS_F_RA | (qflags & (0x7800 | DNS_F_RD | DNS_F_CD)) |
		     (uint16_t)(rcode & 0xf) | (tc ? DNS_F_TC : 0);

	put16(out, id);
	put16(out + 2, f);
	put16(out + 4, qd);
	put16(out + 6, an);
	put16(out + 8, 0);
	put16(out + 10, ar);
}

size_t dns_build_response(const struct dns_query *q, int rcode, uint16_t rrtype,
			  const struct sg_addr *addrs, size_t n, uint32_t ttl,
			  size_t limit, uint8_t *out, size_t cap, int *truncated)
{
	size_t rdlen = rrtype == DNS_T_AAAA ? 16 : 4;
	size_t qlen = q->has_question ? q->qwire_len + 4 : 0;
	size_t optlen = q->has_opt ? 11 : 0;
	size_t need, o, i;
	int tc = 0;

	if (limit > cap)
		limit = cap;
	if (DNS_HDR_LEN + qlen + optlen > limit)
		return 0;
	/* answers: pointer (2), type, class, ttl, rdlength, rdata */
	need = DNS_HDR_LEN + qlen + n * (12 + rdlen) + optlen;
	if (n > 0xffff || need > limit) {
		tc = 1;
		n = 0;
	}
	if (truncated)
		*truncated = tc;
	put_header(out, q->id, q->flags, rcode, tc, q->has_question ? 1 : 0, (uint16_t)n,
		   q->has_opt ? 1 : 0);
	o = DNS_HDR_LEN;
	if (q->has_question) {
		memcpy(out + o, q->qwire, q->qwire_len);
		o += q->qwire_len;
		put16(out + o, q->qtype);
		put16(out + o + 2, q->qclass);
		o += 4;
	}
	for (i = 0; i < n; i++) {
		/* 0xc00c: the question name, right after the header (4.1.4) */
		put16(out + o, 0xc000 | DNS_HDR_LEN);
		put16(out + o + 2, rrtype);
		put16(out + o + 4, DNS_CLASS_IN);
		put32(out + o + 6, ttl);
		put16(out + o + 10, (uint16_t)rdlen);
		if (rdlen == 4)
			memcpy(out + o + 12, &addrs[i].u.v4, 4);
		else
			memcpy(out + o + 12, &addrs[i].u.v6, 16);
		o += 12 + rdlen;
	}
	if (q->has_opt) {
		/* RFC 6891 6.1.2-6.1.3: root owner, our payload size, extended
		 * rcode bits, version 0, DO copied (RFC 3225 3), no options. */
		out[o] = 0;
		put16(out + o + 1, DNS_T_OPT);
		put16(out + o + 3, DNS_UDP_MAX);
		put32(out + o + 5, (uint32_t)((rcode >> 4) & 0xff) << 24 |
		      (q->edns_do ? 0x8000u : 0));
		put16(out + o + 9, 0);
		o += 11;
	}
	return o;
}

size_t dns_build_bare(const uint8_t *req, size_t len, int rcode, uint8_t *out, size_t cap)
{
	if (len < DNS_HDR_LEN || cap < DNS_HDR_LEN)
		return 0;
	put_header(out, (uint16_t)(req[0] << 8 | req[1]), (uint16_t)(req[2] << 8 | req[3]),
		   rcode, 0, 0, 0, 0);
	return DNS_HDR_LEN;
}

int dns_tcp_frame(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msglen)
{
	size_t n;

	if (len < 2)
		return SG_AGAIN;
	n = (size_t)buf[0] << 8 | buf[1];
	if (n == 0)
		return SG_ERROR;
	if (len < 2 + n)
		return SG_AGAIN;
	*msg = buf + 2;
	*msglen = n;
	return SG_OK;
}

const char *dns_type_str(uint16_t t, char *buf, size_t bufsz)
{
	static const struct { uint16_t t; const char *s; } names[] = {
		{ DNS_T_A, "A" }, { DNS_T_NS, "NS" }, { DNS_T_CNAME, "CNAME" },
		{ DNS_T_SOA, "SOA" }, { DNS_T_PTR, "PTR" }, { DNS_T_MX, "MX" },
		{ DNS_T_TXT, "TXT" }, { DNS_T_AAAA, "AAAA" }, { DNS_T_SRV, "SRV" },
		{ DNS_T_OPT, "OPT" }, { DNS_T_SVCB, "SVCB" }, { DNS_T_HTTPS, "HTTPS" },
		{ DNS_T_ANY, "ANY" }, { 43, "DS" }, { 46, "RRSIG" }, { 48, "DNSKEY" },
		{ 52, "TLSA" }, { 257, "CAA" }, { 252, "AXFR" }, { 251, "IXFR" },
	};
	size_t i;

	for (i = 0; i < SG_ARRAY_LEN(names); i++)
		if (names[i].t == t)
			return names[i].s;
	snprintf(buf, bufsz, "TYPE%u", t);
	return buf;
}

const char *dns_rcode_str(int rcode)
{
	static const char *const names[] = {
		"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
	};

	if (rcode >= 0 && rcode < (int)SG_ARRAY_LEN(names))
		return names[rcode];
	return rcode == DNS_R_BADVERS ? "BADVERS" : "OTHER";
}
