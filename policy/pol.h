/*
 * pol.h - configuration and policy: the loaded, validated form of
 * sandgate.yaml (DESIGN.md "Configuration"), its compiled matchers and its
 * evaluation, plus the `sandgate policy check|explain` back ends.
 *
 * Ownership: pol_config_load() returns one struct sg_config that owns every
 * string and array below it, the compiled matchers (domain and regex index,
 * CIDR ranges, PCRE2 code) and the open GeoIP databases; pol_config_free()
 * releases all of it (NULL ok). A loaded config is immutable and shared
 * read-only by every worker; the gateway wraps it in a refcounted snapshot
 * (gateway/serve.h).
 *
 * pol_eval() never fails and allocates nothing, with one exception made
 * once per thread: the PCRE2 match data of the first regex it runs there
 * (thread-local, freed when the thread exits). It is safe to call from any
 * number of threads at once on the same config.
 */
#ifndef POL_H
#define POL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sg_str.h"

struct pol_cidr {
	struct sg_addr addr;    /* masked to plen; v4-mapped folded to v4 */
	int plen;
	int line, col;          /* where it is written (warnings) */
};

struct pol_port_range {
	uint16_t lo, hi;        /* inclusive; a single port has lo == hi */
	int line, col;
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
	int line, col;
};

struct pcre2_real_code_8;       /* pcre2_code from <pcre2.h> */

/*
 * A `regex:` pattern: a full match (anchored at both ends), caseless,
 * against the normalised host name. tail is the literal every match must
 * end with, when the pattern shows one (the index files the regex under
 * it so that it runs only for names that end that way); NULL otherwise,
 * and then it runs for every name its rule list is asked about.
 */
struct pol_regex {
	char *pattern;                  /* owned; as written */
	struct pcre2_real_code_8 *code; /* owned */
	int jit;                        /* code is JIT-compiled */
	char *tail;                     /* owned or NULL; lower case */
	size_t tail_len;
	int line, col;
};

/* A country ('K' << 8 | 'P') or an AS number, where it is written. */
struct pol_geo_code {
	uint32_t v;
	int line, col;
};

enum pol_tls_mode { POL_TLS_PASSTHROUGH, POL_TLS_INSPECT };

/*
 * One rule. Its conditions: a name condition (domains and regex: any one
 * pattern matching is enough), cidrs, countries, asns and ports. The rule
 * matches when every kind it has matches.
 */
struct pol_rule {
	char *id;               /* owned; name: or its path, e.g. sandboxes/GLOB/allow/2 */
	int line, col;          /* of the rule in the config file, for messages */
	struct pol_domain *domains;     /* owned */
	size_t n_domains;
	struct pol_regex *regex;        /* owned */
	size_t n_regex;
	struct pol_cidr *cidrs;         /* owned */
	size_t n_cidrs;
	struct pol_geo_code *countries; /* owned, file order */
	size_t n_countries;
	struct pol_geo_code *asns;      /* owned, file order */
	size_t n_asns;
	uint32_t *cc_sorted;            /* owned: countries sorted, for lookups */
	uint32_t *asn_sorted;           /* owned: asns sorted */
	struct pol_port_range *ports;   /* owned; none given: see pol_rule_port_ok */
	size_t n_ports;
	enum pol_tls_mode tls;
};

struct pol_ruleset {
	struct pol_rule *rules;         /* owned */
	size_t n;
	uint32_t id;                    /* its number in the compiled index */
};

struct pol_profile {
	char *name;                     /* owned */
	int line, col;
	struct pol_ruleset allow, deny;
};

enum pol_mode { POL_MODE_ENFORCE, POL_MODE_AUDIT };

struct pol_sandbox {
	char *name;                     /* owned; a glob over sandbox names */
	int line, col;
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

struct pol_index;                       /* compiled matchers: pol_index.c */
struct pol_geo;                         /* open GeoIP databases: pol_geo.c */

struct sg_config {
	char *path;                     /* owned; the file it came from */

	/* gateway.listen: NULL when absent. "HOST:PORT", "[::]:PORT", "unix:/path" */
	char *listen_transparent, *listen_proxy, *listen_dns, *listen_admin;
	int workers;                    /* 0 = auto (number of cores) */
	char *log_level;                /* owned or NULL: "error|warn|info|debug" */
	char *admin_token;              /* owned or NULL: SPEC (file:/env:) of the TCP admin bearer token */

	/* gateway.resolver */
	char *resolver_servers;         /* owned; NULL = system, else "ip:port,ip:port" */
	struct pol_static_host *hosts;  /* owned */
	size_t n_hosts;
	int64_t resolver_timeout_ms;    /* default 5000 */
	int64_t resolver_min_ttl_ms;    /* default 5000 */
	int64_t resolver_max_ttl_ms;    /* default 300000 */
	int64_t resolver_negative_ttl_ms; /* default 5000 */

	/* gateway.dns: the DNS responder on listen.dns (gateway/dns.c) */
	long long dns_rate;             /* queries per second per sandbox, default 200 */
	long long dns_burst;            /* token bucket depth, default 400 */
	long long dns_max_names;        /* distinct names per sandbox per minute, default 300 */
	int64_t dns_max_ttl_ms;         /* TTL cap of answers, default 60000 */
	int64_t dns_tcp_idle_ms;        /* idle DNS-over-TCP connection, default 10000 */

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
	char *audit_key;                /* owned or NULL: key SPEC "file:PATH" | "env:NAME" */
	char *audit_syslog;             /* owned or NULL: "udp://HOST:PORT" | "tcp://HOST:PORT" */
	uint64_t audit_rotate_size;     /* bytes; 0 = no size rotation */
	int audit_rotate_keep;          /* rotated files kept; default 10 */

	/* geoip: paths as written (NULL: not configured) and the open databases */
	char *geoip_country, *geoip_asn;        /* owned */
	struct pol_geo *geo;                    /* owned, or NULL */

	/* policy */
	struct pol_ruleset floor_deny;
	struct pol_profile *profiles;   /* owned */
	size_t n_profiles;
	struct pol_sandbox *sandboxes;  /* owned, in file order: first match wins */
	size_t n_sandboxes;
	int default_allow;              /* default: deny */

	struct pol_index *index;        /* owned: built at load, read-only after */
};

/*
 * Load, validate and compile a config file. On failure returns SG_EINVAL
 * (or SG_EIO/SG_ENOMEM) and writes "FILE:LINE:COL: message" into err.
 * Unknown keys are errors (a typo must not silently widen or drop a
 * rule); keys of features this build does not implement yet are errors
 * naming the feature, never silently ignored. A regex that does not
 * compile and a GeoIP database that is missing or unreadable are errors.
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
/*
 * Does a normalised host name match a regex (full match, caseless)?
 * 1 yes, 0 no, SG_ERROR when PCRE2 gave up (match limit, no memory):
 * callers fail closed (a deny matches, an allow does not).
 */
int pol_regex_match(const struct pol_regex *re, const char *name, size_t len);

/* What the GeoIP databases say about an address. */
struct pol_geo_info {
	char country[3];                /* "" when unknown or not configured */
	uint32_t asn;                   /* 0 when unknown or not configured */
};
void pol_geo_lookup(const struct sg_config *cfg, const struct sg_addr *a,
		    struct pol_geo_info *gi);

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
	POL_NEED_ADDR,  /* addr was NULL and an address condition could decide: resolve, then ask again */
};

struct pol_verdict {
	enum pol_decision decision;
	int would_deny;                 /* audit mode: allowed, but enforce would deny */
	int by_domain;                  /* allowed by a rule without cidrs (connect to an address we resolved) */
	int name_allowed;               /* POL_NEED_ADDR only: without address rules the name would be
					 * allowed (an address can still deny it); 0: only an address
					 * rule could allow it */
	const char *reason;             /* static snake_case code */
	const char *rule_id;            /* borrowed from the config, or NULL */
	const struct pol_rule *rule;    /* borrowed, or NULL */
};

/*
 * Evaluate, in DESIGN.md order: floor deny, sandbox deny (own, then its
 * profiles'), allow (own, then profiles'), default. A rule matches when
 * every condition kind it has matches: its name condition matches q->name
 * (a domain pattern or a regex; NULL name: no match), a cidr of it
 * contains q->addr, q->addr's country and AS number are in its countries
 * and asns, and the port is in its ports (none given: 443 for a rule with
 * a name condition, any for a rule without).
 *
 * With q->addr NULL, a rule with cidrs, countries or asns cannot be
 * decided: if such a rule could change the outcome the verdict is
 * POL_NEED_ADDR. With q->addr set, an allow by a rule without cidrs is
 * turned into a deny with reason "internal_address" when the address is
 * internal (sg_addr_is_internal) and not q->addr_static.
 *
 * With POL_NEED_ADDR, name_allowed tells the two kinds apart: 1 when
 * the name would be allowed (a rule, the default, audit mode) unless an
 * address rule denies it, 0 when only an address rule could allow it.
 * Useful when the name then fails to resolve: a resolver error, or a deny.
 *
 * Reasons: "floor_deny", "rule_deny", "rule_allow", "default_deny",
 * "default_allow", "unknown_source", "internal_address", "need_addr".
 * Audit mode (sandbox mode: audit): a sandbox deny or default deny becomes
 * POL_ALLOW with would_deny = 1 and the deny's reason and rule; the floor
 * and internal_address are enforced in every mode.
 */
void pol_eval(const struct sg_config *cfg, const struct pol_query *q,
	      struct pol_verdict *v);

/*
 * ---- Names regardless of the port (pol_dns.c, for the DNS responder) ----
 *
 * pol_eval() judges one port; a DNS answer is good for every port. These
 * ask "is there a port on which ..." by evaluating pol_eval() once per
 * range of ports that every rule of the sandbox (its lists, its profiles'
 * and the floor) treats alike. struct pol_ports holds one port of each
 * such range (443 and 80 are tried first) and the sandbox's allow rules
 * that have a name condition and an address condition; build it once per
 * config and sandbox (NULL sbx: an unknown source). Read-only after, safe
 * from any thread. Passing NULL instead builds one for the call (which
 * then allocates).
 */
struct pol_ports;

struct pol_ports *pol_ports_new(const struct sg_config *cfg, const struct pol_sandbox *sbx);
void pol_ports_free(struct pol_ports *ps);
size_t pol_ports_count(const struct pol_ports *ps);

/*
 * Could a connection to name be allowed on some port, by the name alone
 * (an allow that some address may still turn, POL_NEED_ADDR with
 * name_allowed, counts)? A name that only an address-only rule (cidrs,
 * countries, asns without domains/regex) could allow does NOT count: its
 * name says nothing, and resolving it would send any name upstream. A
 * rule with both a name condition matching name and an address
 * condition does count (the address is judged after resolution).
 *
 * Returns 1 and the allowing verdict (with *port, when not NULL, the port
 * it was found on), or 0 and the deny verdict to report: a floor or deny
 * rule when one denied on some port, else the verdict at port 443.
 */
int pol_eval_name(const struct sg_config *cfg, const struct pol_sandbox *sbx,
		  const struct pol_ports *ps, const char *name, struct pol_verdict *v,
		  uint16_t *port);

/*
 * Could a connection to addr, resolved for name (addr_static: from
 * resolver.hosts), be allowed on some port? pol_eval with the address on
 * every port range: floor and deny CIDRs and the internal-address guard
 * apply (only a cidrs rule unlocks an internal address). Returns 1 with
 * the allowing verdict, or 0 with the verdict at hint_port (the port
 * pol_eval_name allowed the name on; its reason is the one to report,
 * e.g. "internal_address").
 */
int pol_eval_name_addr(const struct sg_config *cfg, const struct pol_sandbox *sbx,
		       const struct pol_ports *ps, const char *name,
		       const struct sg_addr *addr, int addr_static, uint16_t hint_port,
		       struct pol_verdict *v);

/* Is port allowed by the rule (see pol_eval)? */
int pol_rule_port_ok(const struct pol_rule *r, uint16_t port);

/*
 * Which step of the evaluation produced v: "floor", "deny", "allow",
 * "default", "internal_address_guard" or "undecided"; *list, when not
 * NULL, gets the rule list of the deciding rule ("floor/deny",
 * "sandboxes/GLOB/allow", "profiles/web/deny") or "" for none.
 */
const char *pol_verdict_step(const struct sg_config *cfg, const struct pol_verdict *v,
			     char *list, size_t listsz);

/*
 * `policy check`: warnings about a loaded config, sorted by line. Each is
 * passed to fn with its line, column and message (without the "FILE:L:C:
 * warning: " prefix). Returns the number of warnings, or SG_ENOMEM.
 */
typedef void pol_warn_fn(void *arg, int line, int col, const char *msg);
int pol_check(const struct sg_config *cfg, pol_warn_fn *fn, void *arg);

/*
 * `policy explain`: judge target (a URL, HOST[:PORT] or IP[:PORT]) for the
 * sandbox called sandbox the way the gateway would, resolving the name
 * (static hosts, else the configured DNS servers, synchronously) unless
 * no_resolve, and print the result to out as text or one JSON object.
 * Nothing but DNS queries leaves the process.
 * Returns 0 allowed, 1 denied (or undecided), 2 a target that does not
 * parse (message in err), SG_ENOMEM / SG_EIO on failure (message in err).
 */
struct pol_explain_opts {
	const char *sandbox;            /* sandbox name (not a glob) */
	const char *target;
	int json;
	int no_resolve;
};
int pol_explain(const struct sg_config *cfg, const struct pol_explain_opts *o,
		FILE *out, char *err, size_t errsz);

#endif
