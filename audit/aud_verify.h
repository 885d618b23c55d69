/*
 * aud_verify.h - checking and reading audit files (sandgate audit verify,
 * query, report).
 *
 * The chain: every record ends with ,"chain":"HEX"} where
 *   HEX = hex(HMAC-SHA256(key, PREV || RECORD))
 * PREV is the previous record's chain as 64 lower-case hex characters (64
 * '0' characters before the first record of a chain), and RECORD is the
 * record's line without its trailing ,"chain":"HEX" (so it ends in '}'),
 * without the newline. Records are JSON objects whose first fields are
 * "v", "seq", "ts", "event" in that order.
 */
#ifndef AUD_VERIFY_H
#define AUD_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#define AUD_CHAIN_HEX 64

struct aud_key {
	uint8_t *bytes;         /* owned; wiped with OPENSSL_cleanse on free */
	size_t len;
};

/* Load a key from a SPEC: file:PATH | env:NAME (vault:NAME arrives with the
 * vault). Returns 0 or a negative code with err set; never prints the key. */
int aud_key_load(const char *spec, struct aud_key *out, char *err, size_t errsz);
void aud_key_free(struct aud_key *k);

struct aud_verify_result {
	uint64_t records;       /* records checked */
	uint64_t first_seq, last_seq;
	char last_chain[AUD_CHAIN_HEX + 1];
	int ok;                 /* 1 when everything checked */
	char where[512];        /* "FILE:LINE: why" for the first problem */
};

/*
 * Verify files in order as one chain (rotation carries it across files).
 * Returns 0 when the chain holds (res->ok = 1), 1 when it does not
 * (res->where names the first bad line), negative on I/O errors.
 */
int aud_verify_files(const char *const *files, size_t n, const struct aud_key *key,
		     struct aud_verify_result *res);

#endif
