/*
 * aud_chain.h - the HMAC-SHA256 record chain and the line layout shared by
 * the writer (aud_writer.c) and `audit verify` (aud_verify.c).
 *
 * The chain itself is specified in aud_verify.h: a record's chain is
 * hex(HMAC-SHA256(key, PREV || RECORD)) where RECORD is the line without
 * its ,"chain":"HEX" suffix. struct aud_mac holds one EVP_MAC context keyed
 * once; each MAC re-initialises it without the key (OpenSSL keeps the
 * padded key state), so nothing is allocated per record. It is not
 * thread-safe: one per thread.
 *
 * The key bytes live only inside OpenSSL once aud_mac_new() returns; the
 * caller wipes its struct aud_key (aud_key_free) right after.
 *
 * Returns: 0 or a negative SG_* code; parsers return 0 or SG_EINVAL.
 */
#ifndef AUD_CHAIN_H
#define AUD_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "audit/aud_verify.h"

/* ,"chain":"<64 hex>"} : what a chained line ends with */
#define AUD_CHAIN_SUFFIX_LEN (10 + AUD_CHAIN_HEX + 2)
/* The longest line the writer makes: a body of AUD_REC_MAX (aud.h) plus
 * the fields it adds; verify refuses longer lines as "not a record". */
#define AUD_LINE_MAX 8192
/* Shortest key accepted: 128 bits. */
#define AUD_KEY_MIN 16
/* What a chain starts from: 64 '0' characters. */
extern const char aud_chain_zero[AUD_CHAIN_HEX + 1];

struct aud_mac;

struct aud_mac *aud_mac_new(const struct aud_key *key, char *err, size_t errsz);
void aud_mac_free(struct aud_mac *m);

/* One MAC in pieces: begin, update..., end (hex, NUL-terminated). */
int aud_mac_begin(struct aud_mac *m);
int aud_mac_update(struct aud_mac *m, const void *p, size_t n);
int aud_mac_end_hex(struct aud_mac *m, char out[AUD_CHAIN_HEX + 1]);

/*
 * The chain of a record: body is the record without its chain and without
 * its closing '}' (the function adds it), prev the previous chain (64 hex).
 */
int aud_chain_compute(struct aud_mac *m, const char *prev, const char *body,
		      size_t len, char out[AUD_CHAIN_HEX + 1]);

/*
 * One line (without its '\n') split into what verify needs. Records begin
 * {"v":1,"seq":N,"ts":"...","event":"NAME", (the writer's fixed order).
 */
struct aud_line {
	uint64_t seq;
	const char *event;      /* borrowed from the line */
	size_t event_len;
	const char *chain;      /* the 64 hex of the suffix, or NULL: no chain */
	size_t body_len;        /* bytes before the chain suffix / closing '}' */
};

int aud_line_parse(const char *p, size_t len, struct aud_line *out);
int aud_line_is(const struct aud_line *l, const char *event);

/*
 * The link fields of an audit_rotate record: prev_seq (has_seq 0 when
 * null) and prev_chain (NULL when null). SG_EINVAL when absent.
 */
int aud_line_rotate_link(const char *p, size_t len, int *has_seq, uint64_t *prev_seq,
			 const char **prev_chain);
/* Does the line carry "NAME":true / "NAME":N? (top-level, written by the writer) */
int aud_line_flag(const char *p, size_t len, const char *name);
int aud_line_u64(const char *p, size_t len, const char *name, uint64_t *out);

int aud_hex_ok(const char *p, size_t n);

/*
 * The anchor, PATH.head: the last seq and chain the writer wrote, MAC'd
 * so that it cannot be moved back to an earlier record without the key:
 *   {"v":1,"file":"BASENAME","seq":N,"chain":"HEX","ts":"...","mac":"HEX"}
 * mac = hex(HMAC(key, "sandgate-audit-head:" || the object without
 * ,"mac":"HEX" )). The prefix keeps it apart from any chain input (those
 * begin with 64 hex characters).
 */
#define AUD_HEAD_SUFFIX ".head"
#define AUD_HEAD_MAX 1024

struct aud_head {
	uint64_t seq;
	char chain[AUD_CHAIN_HEX + 1];
	char file[256];         /* as written (JSON-escaped basename) */
};

/* Format into out (AUD_HEAD_MAX); returns the length or a negative code. */
int aud_head_format(struct aud_mac *m, const char *file_base, uint64_t seq,
		    const char *chain, char *out, size_t outsz);
/* Parse and check; SG_EINVAL for a malformed file, SG_ERROR for a MAC mismatch. */
int aud_head_parse(struct aud_mac *m, const char *p, size_t len, struct aud_head *out);

#endif
