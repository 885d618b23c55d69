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
 * vault). The key is the file's bytes (or the variable's value) without one
 * trailing newline, at least 16 bytes. Returns 0 or a negative code with
 * err set; never prints the key. */
int aud_key_load(const char *spec, struct aud_key *out, char *err, size_t errsz);
void aud_key_free(struct aud_key *k);

struct aud_verify_result {
	uint64_t records;       /* records checked */
	uint64_t first_seq, last_seq;
	char last_chain[AUD_CHAIN_HEX + 1];
	int ok;                 /* 1 when everything checked */
	char where[512];        /* "FILE:LINE: why" for the first problem */
	/* extensions (aud_verify_files_ex) */
	uint64_t lost;          /* records the writer declared lost (lost_before) */
	uint64_t torn;          /* writer-announced torn lines accepted */
	uint64_t recovered;     /* anchor_mismatch records accepted */
	int anchor_ok;          /* an anchor was given and matched */
	char note[512];         /* where the first declared loss is, or "" */
};

/*
 * Verify files in order as one chain (rotation carries it across files).
 * Returns 0 when the chain holds (res->ok = 1), 1 when it does not
 * (res->where names the first bad line), negative on I/O errors (a file
 * that cannot be read: res->where says which and why; ok = 0).
 */
int aud_verify_files(const char *const *files, size_t n, const struct aud_key *key,
		     struct aud_verify_result *res);

/*
 * What verify finds, and where (each is the first problem, "FILE:LINE:"):
 *  - a line that is not a complete record (a torn write, garbage, a line
 *    cut by truncation): that line; if the next record announces the tear
 *    ("recovered_torn_tail", written by the writer after a crash), it is
 *    still reported unless accept_recovered;
 *  - a record without chain (written without audit.key);
 *  - seq not the previous + 1 (a record removed, inserted, reordered, or
 *    a file missing at the start): that line;
 *  - a MAC mismatch (a changed byte, a forged record, a wrong key; for the
 *    first record "wrong key or the first record was changed");
 *  - an audit_rotate record whose prev_seq/prev_chain do not match the end
 *    of the file before it (a dropped middle file);
 *  - an audit_rotate "anchor_mismatch" record (the writer found records
 *    removed while it was stopped), unless accept_recovered;
 *  - with an anchor: a chain that ends before the anchor's seq (the last
 *    file or its tail records removed), or differs from it at that seq.
 * A file that starts with audit_rotate verifies alone, from its prev_chain.
 */
struct aud_verify_opts {
	int accept_recovered;   /* accept what the writer itself put on record */
	const char *anchor;     /* PATH.head to check the end against, or NULL */
};

int aud_verify_files_ex(const char *const *files, size_t n, const struct aud_key *key,
			const struct aud_verify_opts *opts, struct aud_verify_result *res);

#endif
