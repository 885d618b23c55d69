/*
 * tls_hello.c - TLS ClientHello peek parser (contract in tls_hello.h).
 *
 * tls_hello_gather() walks the records and copies the hello's fragments
 * into a stack buffer (RFC 8446 5.1 lets it span records); then
 * tls_hello_body() parses the contiguous message. Headers are judged as
 * their bytes arrive, the body once whole. Any verdict but SG_AGAIN is
 * final for every longer buffer with the same start (fuzzed).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sg.h"
#include "sg_str.h"
#include "tls_hello.h"
#include "sg_poison.h"

#define TLS_CT_HANDSHAKE        22      /* ContentType handshake */
#define TLS_HS_CLIENT_HELLO     1       /* HandshakeType client_hello */
#define TLS_HS_HDR              4       /* msg_type(1) + length(3) */
/* RFC 5246 6.2.3 allows 2^14 + 2048; 8446's 2^14 is upstream's to enforce. */
#define TLS_REC_MAX             (16384 + 2048)
#define TLS_SESSION_ID_MAX      32      /* legacy_session_id<0..32> */
#define TLS_RANDOM_LEN          32
#define TLS_SNI_HOST_NAME       0       /* NameType host_name, RFC 6066 3 */

/*
 * Read one record header (type, version, length; RFC 8446 5.1) at rd.
 * SG_OK: *n is the fragment length, rd is past the header. SG_AGAIN: the
 * header is incomplete, rd untouched. SG_DECLINED: the connection's first
 * record is not handshake. SG_ERROR: *err says why. Bytes are judged as
 * they arrive, so a short buffer is refused as early as possible.
 */
static int tls_rec_hdr(struct sg_rd *rd, int first, size_t *n,
		       const char **err)
{
	struct sg_rd h = *rd;
	uint8_t type, major;

	type = sg_rd_u8(&h);
	if (!h.short_ && type != TLS_CT_HANDSHAKE) {
		if (first)
			return SG_DECLINED;
		/* RFC 8446 5.1: nothing between a message's fragments. */
		*err = "non-handshake record inside client hello";
		return SG_ERROR;
	}
	/* SSL 3.0 through TLS 1.3 all carry major version 3. */
	major = sg_rd_u8(&h);
	if (!h.short_ && major != 3) {
		*err = "bad record version";
		return SG_ERROR;
	}
	sg_rd_skip(&h, 1);
	*n = sg_rd_u16be(&h);
	if (h.short_)
		return SG_AGAIN;
	/* RFC 8446 5.1: no zero-length handshake fragments. */
	if (*n == 0) {
		*err = "empty handshake record";
		return SG_ERROR;
	}
	if (*n > TLS_REC_MAX) {
		*err = "record too long";
		return SG_ERROR;
	}
	*rd = h;
	return SG_OK;
}

/*
 * Judge the first have bytes of the handshake header. SG_OK with *want
 * the message length once all four are there, SG_AGAIN before, SG_ERROR
 * if it is not a ClientHello or its body exceeds TLS_HELLO_MAX.
 */
static int tls_hs_hdr(const uint8_t *msg, size_t have, size_t *want,
		      const char **err)
{
	struct sg_rd h;
	uint8_t type;
	uint32_t body;

	sg_rd_init(&h, msg, have);
	type = sg_rd_u8(&h);
	if (!h.short_ && type != TLS_HS_CLIENT_HELLO) {
		*err = "first handshake message is not a client hello";
		return SG_ERROR;
	}
	body = sg_rd_u24be(&h);
	if (h.short_)
		return SG_AGAIN;
	/* Bounds the reassembly buffer; no real hello comes close. */
	if (body > TLS_HELLO_MAX) {
		*err = "client hello too large";
		return SG_ERROR;
	}
	*want = TLS_HS_HDR + body;
	return SG_OK;
}

/*
 * Copy the fragments of the first handshake message in buf into msg
 * (TLS_HS_HDR + TLS_HELLO_MAX bytes). SG_OK once it is whole: *msg_len
 * counts its header too, *consumed runs through the end of its last
 * record. Other codes as for tls_hello_parse().
 *
 * The hello must end its record: nothing else is in a client's first
 * flight, and a second message there would slip past us upstream.
 */
static int tls_hello_gather(const uint8_t *buf, size_t len, uint8_t *msg,
			    size_t *msg_len, size_t *consumed,
			    const char **err)
{
	struct sg_rd rd;
	size_t have = 0, want = 0;
	int known = 0, first = 1;

	sg_rd_init(&rd, buf, len);
	for (;;) {
		struct sg_rd frag;
		size_t n, avail;
		int rc;

		rc = tls_rec_hdr(&rd, first, &n, err);
		if (rc != SG_OK)
			return rc;
		first = 0;
		avail = SG_MIN(n, sg_rd_left(&rd));
		frag = sg_rd_sub(&rd, avail);

		/* Copy up to the handshake header first, then up to its end. */
		while (sg_rd_left(&frag) > 0 && (!known || have < want)) {
			size_t lim = known ? want : TLS_HS_HDR;
			struct sg_rd piece;

			piece = sg_rd_sub(&frag, SG_MIN(sg_rd_left(&frag),
							lim - have));
			memcpy(msg + have, piece.p, piece.len);
			have += piece.len;
			if (!known) {
				rc = tls_hs_hdr(msg, have, &want, err);
				if (rc == SG_ERROR)
					return rc;
				known = rc == SG_OK;
			}
		}

		if (known && have == want) {
			/* frag.off < n: more record, here or to come. */
			if (frag.off < n) {
				*err = "data after client hello in its record";
				return SG_ERROR;
			}
			*msg_len = have;
			*consumed = rd.off;
			return SG_OK;
		}
		if (avail < n)
			return SG_AGAIN;
	}
}

/*
 * server_name (RFC 6066 3): server_name_list<1..2^16-1> of (NameType,
 * HostName<1..2^16-1>). Other name types (none defined) are skipped as
 * vec16, as Go does. A second host_name is an error: RFC 6066 forbids it,
 * and checking one name while the server routes on the other is a policy
 * bypass. A host_name that is no DNS name (IP literal, bad bytes, too
 * long) sets sni_invalid instead of has_sni; policy decides.
 */
static int tls_ext_sni(struct sg_rd *data, struct tls_hello *out,
		       const char **err)
{
	struct sg_rd list;
	int seen_host = 0;

	/* Empty data is a server's SNI ack; from a client it names nothing. */
	if (sg_rd_left(data) == 0)
		return SG_OK;
	list = sg_rd_vec16(data);
	if (data->short_ || sg_rd_left(data) != 0 || list.len == 0) {
		*err = "bad server_name extension";
		return SG_ERROR;
	}
	while (sg_rd_left(&list) > 0) {
		uint8_t type = sg_rd_u8(&list);
		struct sg_rd name = sg_rd_vec16(&list);

		if (list.short_) {
			*err = "bad server_name entry";
			return SG_ERROR;
		}
		if (type != TLS_SNI_HOST_NAME)
			continue;
		if (seen_host++) {
			*err = "two host_names in server_name";
			return SG_ERROR;
		}
		if (sg_host_normalize((const char *)name.p, name.len,
				      out->sni) < 0) {
			/* sg_host_normalize may have written part of it. */
			memset(out->sni, 0, sizeof(out->sni));
			out->sni_invalid = 1;
		} else {
			out->has_sni = 1;
		}
	}
	return SG_OK;
}

/*
 * ALPN (RFC 7301 3.1): protocol_name_list<2..2^16-1> of
 * ProtocolName<1..2^8-1>. Any bytes are legal, but registered names are
 * printable ASCII and we join them with ',' for policy and audit, so a
 * name outside 0x21-0x7e or holding ',' is refused, not escaped.
 * out->alpn keeps the entries before the first that would pass
 * TLS_ALPN_MAX; the rest are still validated.
 */
static int tls_ext_alpn(struct sg_rd *data, struct tls_hello *out,
			const char **err)
{
	struct sg_rd list = sg_rd_vec16(data);
	size_t used = 0;
	int full = 0;

	if (data->short_ || sg_rd_left(data) != 0 || list.len == 0) {
		*err = "bad alpn extension";
		return SG_ERROR;
	}
	while (sg_rd_left(&list) > 0) {
		struct sg_rd name = sg_rd_vec8(&list);
		struct sg_rd chars;
		size_t sep;

		if (list.short_ || name.len == 0) {
			*err = "bad alpn protocol name";
			return SG_ERROR;
		}
		chars = name;
		while (sg_rd_left(&chars) > 0) {
			uint8_t c = sg_rd_u8(&chars);

			if (c < 0x21 || c > 0x7e || c == ',') {
				*err = "alpn protocol name not printable";
				return SG_ERROR;
			}
		}
		sep = used > 0;
		if (full || used + sep + name.len > TLS_ALPN_MAX) {
			full = 1;
			continue;
		}
		if (sep)
			out->alpn[used++] = ',';
		memcpy(out->alpn + used, name.p, name.len);
		used += name.len;
	}
	out->alpn[used] = '\0';
	out->has_alpn = 1;
	return SG_OK;
}

/*
 * Extension block (RFC 8446 4.2): (type u16, data vec16) filling it
 * exactly. A repeated type is fatal there, and a bypass if we read the
 * first copy while the server reads the last.
 */
static int tls_hello_exts(struct sg_rd *rd, struct tls_hello *out,
			  const char **err)
{
	/* One bit per extension type: 8 KiB, O(1) per extension. */
	uint8_t seen[65536 / 8];

	memset(seen, 0, sizeof(seen));
	while (sg_rd_left(rd) > 0) {
		uint16_t type = sg_rd_u16be(rd);
		struct sg_rd data = sg_rd_vec16(rd);
		int rc = SG_OK;

		if (rd->short_) {
			*err = "truncated extension";
			return SG_ERROR;
		}
		if (seen[type >> 3] & (1u << (type & 7))) {
			*err = "duplicate extension";
			return SG_ERROR;
		}
		seen[type >> 3] |= (uint8_t)(1u << (type & 7));

		switch (type) {
		case TLS_EXT_SERVER_NAME:
			rc = tls_ext_sni(&data, out, err);
			break;
		case TLS_EXT_ALPN:
			rc = tls_ext_alpn(&data, out, err);
			break;
		case TLS_EXT_ECH:
			/* The real SNI is sealed inside; ours is public. */
			out->has_ech = 1;
			break;
		default:
			break;
		}
		if (rc != SG_OK)
			return rc;
	}
	return SG_OK;
}

/*
 * ClientHello body (RFC 8446 4.1.2, RFC 5246 7.4.1.2): legacy_version,
 * random, legacy_session_id<0..32>, cipher_suites<2..2^16-2>,
 * legacy_compression_methods<1..2^8-1>, then optional extensions that
 * must end the message. SG_OK or SG_ERROR (*err set).
 */
static int tls_hello_body(struct sg_rd *rd, struct tls_hello *out,
			  const char **err)
{
	struct sg_rd sid, suites, comp, exts;

	out->legacy_version = sg_rd_u16be(rd);
	sg_rd_skip(rd, TLS_RANDOM_LEN);
	sid = sg_rd_vec8(rd);
	suites = sg_rd_vec16(rd);
	comp = sg_rd_vec8(rd);
	if (rd->short_) {
		*err = "truncated client hello";
		return SG_ERROR;
	}
	if (sid.len > TLS_SESSION_ID_MAX) {
		*err = "session id too long";
		return SG_ERROR;
	}
	if (suites.len == 0 || suites.len % 2 != 0) {
		*err = "bad cipher suite list";
		return SG_ERROR;
	}
	if (comp.len == 0) {
		*err = "no compression methods";
		return SG_ERROR;
	}
	/* RFC 5246 7.4.1.2: SSL 3.0-era hellos stop here; no SNI. */
	if (sg_rd_left(rd) == 0)
		return SG_OK;
	exts = sg_rd_vec16(rd);
	if (rd->short_) {
		*err = "truncated extension block";
		return SG_ERROR;
	}
	if (sg_rd_left(rd) != 0) {
		*err = "trailing bytes after extensions";
		return SG_ERROR;
	}
	return tls_hello_exts(&exts, out, err);
}

/*
 * See tls_hello.h. Unless SG_OK, out is left zeroed but for out->error
 * (SG_ERROR), so no caller acts on half a hello. Uses ~24 KiB of stack
 * (reassembly buffer, extension bitmap) and no heap.
 */
int tls_hello_parse(const uint8_t *buf, size_t len, struct tls_hello *out)
{
	uint8_t msg[TLS_HS_HDR + TLS_HELLO_MAX];
	size_t msg_len = 0, consumed = 0;
	const char *err = "malformed client hello";
	int rc;

	memset(out, 0, sizeof(*out));
	rc = tls_hello_gather(buf, len, msg, &msg_len, &consumed, &err);
	if (rc == SG_OK) {
		struct sg_rd rd;

		sg_rd_init(&rd, msg + TLS_HS_HDR, msg_len - TLS_HS_HDR);
		rc = tls_hello_body(&rd, out, &err);
	}
	if (rc != SG_OK) {
		memset(out, 0, sizeof(*out));
		if (rc == SG_ERROR)
			out->error = err;
		return rc;
	}
	out->consumed = consumed;
	return SG_OK;
}
