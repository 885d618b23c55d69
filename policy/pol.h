/*
 * pol.h - configuration and policy: the loaded, validated form of
 * sandgate.yaml (DESIGN.md "Configuration") and its evaluation.
 *
 * Ownership: pol_config_load() returns one struct sg_config that owns every
 * string and array below it; pol_config_free() releases all of it (NULL ok).
 * A loaded config is immutable and shared read-only by every worker; the
 * gateway wraps it in a refcounted snapshot (gateway/snapshot.h), so
 * nothing here is thread-aware.
 *
 * pol_eval() allocates nothing and never fails: it always returns a
 * verdict with a stable reason code and the id of the deciding rule.
 */
#ifndef POL_H
#define POL_H

#include <stddef.h>
#include <stdint.h>

#include "sg_str.h"

struct pol_cidr {
	struct sg_addr addr;    /* masked to plen; v4-mapped folded to v4 */
	int plen;
};

struct pol_port_range {
	uint16_t lo, hi;        /* inclusive; a single port has lo == hi */
};

enum pol_dom_kind {
	POL_DOM_EXACT,          /* example.com */
	POL_DOM_ONE,            /* *.example.com: exactly one more label */
	POL_DOM_MANY,           /* **.example.com: one or more labels */
};

struct pol_domain {
	enum pol_dom_kind kind;
	char *suffix;           /* owned; normalised, without "*." / "**." */
	size_t suffix_len;
};

enum pol_tls_mode { POL_TLS_PASSTHROUGH, POL_TLS_INSPECT };

struct pol_rule {
	char *id;               /* owned; name: or its path, e.g. sandboxes/GLOB/allow/2 */
	int line;               /* line in the config file, for messages */
	struct pol_domain *domains;     /* owned */
	size_t n_domains;
	struct pol_cidr *cidrs;         /* owned */
	size_t n_cidrs;
	struct pol_port_range *ports;   /* owned; none given: see pol_rule_port_ok */
	size_t n_ports;
	enum pol_tls_mode tls;
};

struct pol_ruleset {
	struct pol_rule *rules;         /* owned */
	size_t n;
};

struct pol_profile {
	char *name;                     /* owned */
	struct pol_ruleset allow, deny;
};

enum pol_mode { POL_MODE_ENFORCE, POL_MODE_AUDIT };

struct pol_sandbox {
	char *name;                     /* owned; a glob over sandbox names */
	struct pol_cidr *sources;       /* owned */
	size_t n_sources;
	enum pol_mode mode;
	struct pol_profile **profiles;  /* owned array of borrowed pointers */
	size_t n_profiles;
	struct pol_ruleset allow, deny;
};

struct pol_static_host {
	char *name;                     /* owned; normalised */
	struct sg_addr *addrs;          /* owned */
	size_t n_addrs;
};

enum aud_fsync_mode { AUD_FSYNC_BATCH, AUD_FSYNC_ALWAYS, AUD_FSYNC_NEVER };

struct sg_config {
	char *path;                     /* owned; the file it came from */

	/* gateway.listen: NULL when absent. "HOST:PORT", "[::]:PORT", "unix:/path" */
	char *listen_transparent, *listen_proxy, *listen_dns, *listen_admin;
	int workers;                    /* 0 = auto (number of cores) */
	char *log_level;                /* owned or NULL: "error|warn|info|debug" */

	/* gateway.resolver */
	char *resolver_servers;         /* owned; NULL = system, else "ip:port,ip:port" */
	struct pol_static_host *hosts;  /* owned */
	size_t n_hosts;
	int64_t resolver_timeout_ms;    /* default 5000 */
	int64_t resolver_min_ttl_ms;    /* default 5000 */
	int64_t resolver_max_ttl_ms;    /* default 300000 */
	int64_t resolver_negative_ttl_ms; /* default 5000 */

	/* gateway.limits */
	long long max_connections;      /* default 100000 */
	int64_t connect_timeout_ms;     /* default 10000 */
	int64_t idle_timeout_ms;        /* default 300000 */
	int64_t handshake_timeout_ms;   /* default 10000: first bytes of a connection */
	int64_t drain_timeout_ms;       /* default 30000: SIGTERM grace */
	long long max_header_bytes;     /* default 65536 */

	/* audit */
	char *audit_path;               /* owned; NULL = no audit file ("-" = stdout) */
	enum aud_fsync_mode audit_fsync;
	int audit_on_failure_allow;     /* 0 = deny (default) */

	/* policy */
	struct pol_ruleset floor_deny;
	struct pol_profile *profiles;   /* owned */
	size_t n_profiles;
	struct pol_sandbox *sandboxes;  /* owned, in file order: first match wins */
	size_t n_sandboxes;
	int default_allow;              /* default: deny */
};

/*
 * Load and validate a config file. On failure returns SG_EINVAL (or
 * SG_EIO/SG_ENOMEM) and writes "FILE:LINE:COL: message" into err.
 * Unknown keys are errors (a typo must not silently widen or drop a
 * rule); keys of features this build does not implement yet are errors
 * naming the feature, never silently ignored.
 */
int pol_config_load(const char *path, struct sg_config **out, char *err, size_t errsz);
void pol_config_free(struct sg_config *cfg);

/* The sandbox whose sources contain src (first in file order), or NULL. */
const struct pol_sandbox *pol_sandbox_by_addr(const struct sg_config *cfg,
					      const struct sg_addr *src);
/* The sandbox whose name glob matches name (first in file order), or NULL. */
const struct pol_sandbox *pol_sandbox_by_name(const struct sg_config *cfg,
					      const char *name);

/* Does a normalised host name match a domain pattern? */
int pol_domain_match(const struct pol_domain *d, const char *name, size_t len);
int pol_cidr_match(const struct pol_cidr *c, const struct sg_addr *a);

struct pol_query {
	const struct pol_sandbox *sbx;  /* NULL: unknown source */
	const char *name;               /* normalised host name, or NULL (IP only) */
	const struct sg_addr *addr;     /* the address sandgate will connect to, or NULL (not known yet) */
	int addr_static;                /* addr came from resolver.hosts (operator's own) */
	uint16_t port;
};

enum pol_decision {
	POL_ALLOW,
	POL_DENY,
	POL_NEED_ADDR,  /* addr was NULL and a rule with cidrs could decide: resolve, then ask again */
};

struct pol_verdict {
	enum pol_decision decision;
	int would_deny;                 /* audit mode: allowed, but enforce would deny */
	int by_domain;                  /* allowed by a domain match (connect to an address we resolved) */
	const char *reason;             /* static snake_case code */
	const char *rule_id;            /* borrowed from the config, or NULL */
	const struct pol_rule *rule;    /* borrowed, or NULL */
};

/*
 * Evaluate, in DESIGN.md order: floor deny, sandbox deny (own, then its
 * profiles'), allow (own, then profiles'), default. A rule matches when
 * every condition kind it has matches: a domain of it matches q->name
 * (NULL name: no match), a cidr of it contains q->addr, and the port is
 * in its ports (none given: 443 for a rule with domains, any for a
 * cidr-only rule).
 *
 * With q->addr NULL, a rule with cidrs cannot be decided: if such a rule
 * could change the outcome the verdict is POL_NEED_ADDR. With q->addr
 * set, an allow that came from domains alone is turned into a deny with
 * reason "internal_address" when the address is internal
 * (sg_addr_is_internal) and not q->addr_static.
 *
 * Reasons: "floor_deny", "rule_deny", "rule_allow", "default_deny",
 * "default_allow", "unknown_source", "internal_address".
 * Audit mode (sandbox mode: audit): a sandbox deny or default deny becomes
 * POL_ALLOW with would_deny = 1 and the deny's reason and rule; the floor
 * and internal_address are enforced in every mode.
 */
void pol_eval(const struct sg_config *cfg, const struct pol_query *q,
	      struct pol_verdict *v);

/* Is port allowed by the rule (see pol_eval)? */
int pol_rule_port_ok(const struct pol_rule *r, uint16_t port);

#endif
