/*
 * tls_hello.h - TLS ClientHello peek parser.
 *
 * tls_hello_parse() is a pure function over the bytes a client has sent so
 * far (from the first byte of the connection). It does no I/O and no
 * allocation; it is "resumable" the picohttpparser way: call it again with
 * the longer buffer when it returns SG_AGAIN. It handles a ClientHello that
 * is split across TCP segments and across several TLS records (RFC 8446
 * 5.1: handshake messages may be fragmented over records), by reading the
 * handshake bytes through a cursor that steps over record headers.
 *
 * Returns:
 *   SG_OK        a whole ClientHello was parsed; *out is filled;
 *   SG_AGAIN     the bytes so far are a valid prefix, more are needed;
 *   SG_DECLINED  this is not TLS (first byte is not a handshake record);
 *   SG_ERROR     TLS, but malformed, or the ClientHello is over
 *                TLS_HELLO_MAX bytes; out->error names why.
 */
#ifndef TLS_HELLO_H
#define TLS_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "sg_str.h"

#define TLS_HELLO_MAX (16 * 1024)       /* handshake message bytes we accept */
#define TLS_ALPN_MAX 128                /* bytes of the comma-joined list we keep */

#define TLS_EXT_SERVER_NAME 0x0000
#define TLS_EXT_ALPN        0x0010
#define TLS_EXT_ECH         0xfe0d      /* draft-ietf-tls-esni: encrypted_client_hello */

struct tls_hello {
	int has_sni;                    /* a server_name extension with a host_name */
	int sni_invalid;                /* present, but not a valid host name (IP literal, ...) */
	char sni[SG_HOST_MAX + 1];      /* normalised (lower case, no trailing dot) */
	int has_alpn;
	char alpn[TLS_ALPN_MAX + 1];    /* "h2,http/1.1"; truncated at a whole entry */
	int has_ech;                    /* encrypted_client_hello extension present */
	uint16_t legacy_version;        /* client_version field */
	size_t consumed;                /* bytes of records that held the hello */
	const char *error;              /* static string on SG_ERROR */
};

int tls_hello_parse(const uint8_t *buf, size_t len, struct tls_hello *out);

#endif
