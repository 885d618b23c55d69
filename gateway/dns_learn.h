/*
 * dns_learn.h - what each sandbox learned from the DNS responder: which
 * name an address was the answer for, until the answer's TTL ends.
 *
 * The transparent listener (conn.c) asks it for a connection that carries
 * no name of its own (no SNI, no Host) so the audit record can say which
 * name the sandbox had resolved to reach that address
 * ("dst_host_source":"dns"). It only ever names; it never changes a
 * decision: such a connection is still judged on its address alone.
 *
 * Shared by every worker (DNS and TCP for one sandbox may land on
 * different workers): 16 shards, each a fixed open-addressing table under
 * its own mutex. Bounded: DNS_LEARN_SLOTS entries in all, allocated once;
 * a full neighbourhood evicts its expired or soonest-expiring entry. One
 * name per (sandbox, address): the newest answer wins.
 *
 * A sandbox is its identity (struct dns_ident): the name it registered
 * under (control API), else its source address. The same key is used by
 * the query limits (dns_limit.h).
 */
#ifndef GW_DNS_LEARN_H
#define GW_DNS_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/registry.h"
#include "sg_str.h"

#define DNS_LEARN_SLOTS 32768

struct dns_ident {
	uint8_t key[2 + GW_REG_NAME_MAX];       /* 'n' + registered name, or 'a' + family + address */
	size_t len;
	uint64_t hash;                          /* of key; never 0 */
};

/* The identity of a client at src, as the connection code finds it:
 * registered addresses first. Returns the registry entry or NULL. */
const struct gw_reg_entry *dns_ident_of(struct dns_ident *id, const struct gw_registry *reg,
					const struct sg_addr *src);
/* The identity used for every source no sandbox claims. */
void dns_ident_unknown(struct dns_ident *id);

struct dns_learn;

struct dns_learn *dns_learn_new(void);
void dns_learn_free(struct dns_learn *l);
/* Remember that name (normalised) was answered to id with addr, until
 * expires_ms (monotonic). */
void dns_learn_put(struct dns_learn *l, const struct dns_ident *id, const struct sg_addr *addr,
		   const char *name, int64_t expires_ms);
/* The name id learned for addr, valid at now_ms: copied into out
 * (SG_HOST_MAX + 1 bytes); 1 found, 0 not. */
int dns_learn_get(struct dns_learn *l, const struct dns_ident *id, const struct sg_addr *addr,
		  int64_t now_ms, char *out);
/* Entries held (valid or not yet overwritten), for /metrics. */
uint64_t dns_learn_count(struct dns_learn *l);

#endif
