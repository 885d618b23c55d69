/*
 * pol_config.c - load sandgate.yaml (DESIGN.md "Configuration") into a
 * struct sg_config, then compile it (pol_index.c).
 *
 * libyaml's document API gives the whole tree; we walk only the schema, so
 * nothing here recurses into shapes the schema does not have. Every error
 * names the file, the 1-based line and column of the offending node and
 * what is wrong with it, and the first error ends the load: a config is
 * used whole or not at all. Rules themselves are parsed in pol_rule.c.
 *
 * Fail closed: unknown keys are errors (a typo must not drop a deny rule),
 * and so are the keys of features this build does not implement, so that
 * nobody believes a feature is on when it is not.
 *
 * Arrays are allocated at the size of the YAML list or mapping, zeroed,
 * with their count set at once: pol_config_free() can then free a config
 * that an error left half built.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

#define CFG_MAX_FILE    (16u << 20)
/* Aliases can make a short file expand to a huge tree: cap what we walk. */
#define CFG_MAX_NODES   2000000u
#define CFG_SUN_PATH    108     /* sizeof(((struct sockaddr_un *)0)->sun_path) */

__attribute__((format(printf, 3, 4)))
int pol_cfg_err(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->errsz)
		snprintf(c->err, c->errsz, "%s:%zu:%zu: %s", c->path,
			 (size_t)n->start_mark.line + 1,
			 (size_t)n->start_mark.column + 1, msg);
	return SG_EINVAL;
}

int pol_cfg_nomem(struct pol_cfg_ctx *c)
{
	if (c->errsz)
		snprintf(c->err, c->errsz, "%s: out of memory", c->path);
	return SG_ENOMEM;
}

void *pol_cfg_calloc(struct pol_cfg_ctx *c, size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p)
		pol_cfg_nomem(c);
	return p;
}

char *pol_cfg_strdup(struct pol_cfg_ctx *c, const char *s, size_t len)
{
	char *p = malloc(len + 1);

	if (!p) {
		pol_cfg_nomem(c);
		return NULL;
	}
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

yaml_node_t *pol_cfg_node(struct pol_cfg_ctx *c, int idx)
{
	return yaml_document_get_node(c->doc, idx);
}

/* " in WHERE", or nothing at the top level: for "KEY in WHERE: ..." */
const char *pol_cfg_in(const char *where)
{
	return *where ? " in " : "";
}

static int cfg_is_null(const yaml_node_t *n)
{
	const char *s = (const char *)n->data.scalar.value;

	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") ||
	       !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static const char *cfg_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	default:
		return cfg_is_null(n) ? "nothing" : "a string";
	}
}

/* Count the children we are about to walk against CFG_MAX_NODES. */
static int cfg_budget(struct pol_cfg_ctx *c, const yaml_node_t *n, size_t count)
{
	c->visited += count;
	if (c->visited > CFG_MAX_NODES)
		return pol_cfg_err(c, n, "configuration too large (over %u nodes once "
			       "aliases are expanded)", CFG_MAX_NODES);
	return 0;
}

size_t pol_cfg_seq_len(const yaml_node_t *n)
{
	return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

yaml_node_t *pol_cfg_item(struct pol_cfg_ctx *c, const yaml_node_t *seq, size_t i)
{
	return pol_cfg_node(c, seq->data.sequence.items.start[i]);
}

static size_t cfg_map_len(const yaml_node_t *n)
{
	return (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
}

int pol_cfg_expect_map(struct pol_cfg_ctx *c, const yaml_node_t *n,
			  const char *key, const char *where)
{
	if (n->type == YAML_MAPPING_NODE)
		return cfg_budget(c, n, cfg_map_len(n));
	return pol_cfg_err(c, n, "%s%s%s: expected a mapping, got %s", key,
		       pol_cfg_in(where), where, cfg_kind(n));
}

int pol_cfg_expect_seq(struct pol_cfg_ctx *c, const yaml_node_t *n,
			  const char *key, const char *where)
{
	if (n->type == YAML_SEQUENCE_NODE)
		return cfg_budget(c, n, pol_cfg_seq_len(n));
	return pol_cfg_err(c, n, "%s%s%s: expected a list, got %s", key,
		       pol_cfg_in(where), where, cfg_kind(n));
}

/* A non-empty list. */
int pol_cfg_expect_list(struct pol_cfg_ctx *c, const yaml_node_t *n,
			   const char *key, const char *where)
{
	int rc = pol_cfg_expect_seq(c, n, key, where);

	if (rc == 0 && pol_cfg_seq_len(n) == 0)
		rc = pol_cfg_err(c, n, "%s%s%s: the list is empty", key,
			     pol_cfg_in(where), where);
	return rc;
}

/* A scalar that is not null, not empty and holds no NUL byte. */
int pol_cfg_str(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		   const char *where, const char **out)
{
	const char *s = (const char *)n->data.scalar.value;

	if (n->type != YAML_SCALAR_NODE || cfg_is_null(n))
		return pol_cfg_err(c, n, "%s%s%s: expected a string, got %s", key,
			       pol_cfg_in(where), where, cfg_kind(n));
	if (strlen(s) != n->data.scalar.length)
		return pol_cfg_err(c, n, "%s%s%s: NUL byte in string", key,
			       pol_cfg_in(where), where);
	if (!*s)
		return pol_cfg_err(c, n, "%s%s%s: must not be empty", key,
			       pol_cfg_in(where), where);
	*out = s;
	return 0;
}

/* One of a fixed set of words; returns its index in *out. */
int pol_cfg_enum(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		    const char *where, const char *const *words, size_t nwords,
		    const char *expect, int *out)
{
	const char *s;
	size_t i;
	int rc = pol_cfg_str(c, n, key, where, &s);

	if (rc)
		return rc;
	for (i = 0; i < nwords; i++)
		if (!strcmp(s, words[i])) {
			*out = (int)i;
			return 0;
		}
	return pol_cfg_err(c, n, "%s%s%s: expected %s, got \"%s\"", key,
		       pol_cfg_in(where), where, expect, s);
}

static int cfg_int(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		   const char *where, long long min, long long max, long long *out)
{
	const char *s, *p;
	int rc = pol_cfg_str(c, n, key, where, &s);

	if (rc)
		return rc;
	/* digits only: strtoll would also take spaces, signs and "0x" */
	for (p = s; *p >= '0' && *p <= '9'; p++)
		;
	if (*p || p - s > 18 || sg_int_parse(s, min, max, out))
		return pol_cfg_err(c, n, "%s%s%s: expected an integer in %lld..%lld, "
			       "got \"%s\"", key, pol_cfg_in(where), where, min, max, s);
	return 0;
}

/*
 * "10s", "250ms", "1.5m", "1h" or plain seconds. The shape is checked here
 * first: strtod underneath would take "nan", "inf" and hex floats too.
 */
static int cfg_duration(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
			const char *where, int64_t min_ms, int64_t *out)
{
	const char *s, *p;
	int64_t ms;
	int rc = pol_cfg_str(c, n, key, where, &s);

	if (rc)
		return rc;
	p = s;
	while (*p >= '0' && *p <= '9')
		p++;
	if (p > s && *p == '.' && p[1] >= '0' && p[1] <= '9')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	if (p == s || (*p && strcmp(p, "ms") && strcmp(p, "s") &&
		       strcmp(p, "m") && strcmp(p, "h")) ||
	    sg_duration_parse(s, &ms))
		return pol_cfg_err(c, n, "%s%s%s: invalid duration \"%s\" "
			       "(e.g. 10s, 250ms, 5m, 1h)", key, pol_cfg_in(where),
			       where, s);
	if (ms < min_ms)
		return pol_cfg_err(c, n, "%s%s%s: must be at least %lldms", key,
			       pol_cfg_in(where), where, (long long)min_ms);
	*out = ms;
	return 0;
}

/*
 * Check a mapping's keys: all strings, none twice. Done for every mapping,
 * including those whose keys are names (profiles, sandboxes, hosts).
 */
static int cfg_map_keys(struct pol_cfg_ctx *c, const yaml_node_t *map, const char *where)
{
	yaml_node_pair_t *p, *q;
	const char *s;
	int rc;

	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = pol_cfg_node(c, p->key);

		if (k->type != YAML_SCALAR_NODE)
			return pol_cfg_err(c, k, "mapping keys must be strings%s%s",
				       pol_cfg_in(where), where);
		rc = pol_cfg_str(c, k, "key", where, &s);
		if (rc)
			return rc;
		for (q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *k2 = pol_cfg_node(c, q->key);

			if (k2->data.scalar.length == k->data.scalar.length &&
			    !memcmp(k2->data.scalar.value, k->data.scalar.value,
				    k->data.scalar.length))
				return pol_cfg_err(c, k, "duplicate key \"%s\"%s%s "
					       "(first at line %zu)", s,
					       pol_cfg_in(where), where,
					       (size_t)k2->start_mark.line + 1);
		}
	}
	return 0;
}

/*
 * Check a schema mapping against its key table and hand back each value
 * node in vals[] (same index as keys[]; NULL when absent).
 */
int pol_cfg_keys(struct pol_cfg_ctx *c, const yaml_node_t *map, const char *where,
		    const struct pol_cfg_key *keys, size_t nkeys, yaml_node_t **vals)
{
	yaml_node_pair_t *p;
	size_t i;
	int rc = cfg_map_keys(c, map, where);

	if (rc)
		return rc;
	for (i = 0; i < nkeys; i++)
		vals[i] = NULL;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = pol_cfg_node(c, p->key);
		const char *s = (const char *)k->data.scalar.value;

		for (i = 0; i < nkeys; i++)
			if (!strcmp(s, keys[i].name))
				break;
		if (i == nkeys) {
			if (*where)
				return pol_cfg_err(c, k, "unknown key \"%s\" in %s", s, where);
			return pol_cfg_err(c, k, "unknown top-level key \"%s\"", s);
		}
		if (keys[i].refuse)
			return pol_cfg_err(c, k, "%s", keys[i].refuse);
		vals[i] = pol_cfg_node(c, p->value);
	}
	return 0;
}

/* ---- gateway -------------------------------------------------------- */

/*
 * "IP:PORT" or "[IPv6]:PORT" (port 0: ephemeral, for tests), or for the
 * admin listener "unix:/absolute/path". Stored as written; the gateway
 * parses it again when it binds.
 */
static int cfg_listen(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		      int unix_ok, char **out)
{
	char tmp[INET6_ADDRSTRLEN + 16], host[INET6_ADDRSTRLEN + 2];
	struct sg_addr a;
	const char *s;
	size_t len;
	int port, rc = pol_cfg_str(c, n, key, "gateway.listen", &s);

	if (rc)
		return rc;
	len = strlen(s);
	if (unix_ok && !strncmp(s, "unix:", 5)) {
		if (s[5] != '/' || len - 5 >= CFG_SUN_PATH)
			return pol_cfg_err(c, n, "%s in gateway.listen: \"%s\": a unix "
				       "socket needs an absolute path under %d "
				       "bytes", key, s, CFG_SUN_PATH);
	} else {
		if (len >= sizeof(tmp))
			goto bad;
		memcpy(tmp, s, len + 1);
		/* sg_hostport_split refuses port 0; here it means "any free port" */
		if (len >= 2 && !strcmp(tmp + len - 2, ":0"))
			tmp[len - 1] = '1';
		if (sg_hostport_split(tmp, len, host, sizeof(host), -1, &port) ||
		    sg_addr_parse(host, strlen(host), &a) ||
		    (tmp[0] == '[') != (strchr(host, ':') != NULL))
			goto bad;
	}
	*out = pol_cfg_strdup(c, s, len);
	return *out ? 0 : SG_ENOMEM;
bad:
	return pol_cfg_err(c, n, "%s in gateway.listen: invalid address \"%s\" "
		       "(expected IP:PORT or [IPv6]:PORT%s)", key, s,
		       unix_ok ? " or unix:/path" : "");
}

enum { LK_TRANSPARENT, LK_PROXY, LK_DNS, LK_ADMIN, LK_N };

static const struct pol_cfg_key listen_keys[] = {
	[LK_TRANSPARENT] = { "transparent", NULL },
	[LK_PROXY] = { "proxy", NULL },
	[LK_DNS] = { "dns", NULL },
	[LK_ADMIN] = { "admin", NULL },
};

static int cfg_gateway_listen(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	struct sg_config *cfg = c->cfg;
	yaml_node_t *v[LK_N];
	int rc;

	rc = pol_cfg_expect_map(c, n, "listen", "gateway");
	if (!rc)
		rc = pol_cfg_keys(c, n, "gateway.listen", listen_keys, LK_N, v);
	if (!rc && v[LK_TRANSPARENT])
		rc = cfg_listen(c, v[LK_TRANSPARENT], "transparent", 0,
				&cfg->listen_transparent);
	if (!rc && v[LK_PROXY])
		rc = cfg_listen(c, v[LK_PROXY], "proxy", 0, &cfg->listen_proxy);
	if (!rc && v[LK_DNS])
		rc = cfg_listen(c, v[LK_DNS], "dns", 0, &cfg->listen_dns);
	if (!rc && v[LK_ADMIN])
		rc = cfg_listen(c, v[LK_ADMIN], "admin", 1, &cfg->listen_admin);
	return rc;
}

/*
 * "system", or a list of "IP", "IP:PORT", "[IPv6]:PORT" (port 53 when not
 * given), stored in c-ares' ares_set_servers_ports_csv() form.
 */
static int cfg_resolver_servers(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	const char *where = "gateway.resolver";
	char host[INET6_ADDRSTRLEN + 2], ip[INET6_ADDRSTRLEN];
	struct sg_addr a;
	size_t i, cnt, off = 0, cap;
	const char *s;
	char *csv;
	int port, rc;

	if (n->type == YAML_SCALAR_NODE) {
		rc = pol_cfg_str(c, n, "servers", where, &s);
		if (rc)
			return rc;
		if (strcmp(s, "system"))
			return pol_cfg_err(c, n, "servers in %s: expected \"system\" or "
				       "a list of addresses, got \"%s\"", where, s);
		return 0;
	}
	rc = pol_cfg_expect_list(c, n, "servers", where);
	if (rc)
		return rc;
	cnt = pol_cfg_seq_len(n);
	/* "[v6]:65535," per entry at most */
	cap = cnt * (INET6_ADDRSTRLEN + 10) + 1;
	csv = pol_cfg_calloc(c, cap, 1);
	if (!csv)
		return SG_ENOMEM;
	c->cfg->resolver_servers = csv;
	for (i = 0; i < cnt; i++) {
		yaml_node_t *it = pol_cfg_node(c, n->data.sequence.items.start[i]);

		rc = pol_cfg_str(c, it, "servers", where, &s);
		if (rc)
			return rc;
		if (sg_addr_parse(s, strlen(s), &a) == 0) {
			port = 53;
		} else if (sg_hostport_split(s, strlen(s), host, sizeof(host), 53, &port) ||
			   sg_addr_parse(host, strlen(host), &a) ||
			   (s[0] == '[') != (strchr(host, ':') != NULL)) {
			return pol_cfg_err(c, it, "servers in %s: invalid address \"%s\" "
				       "(expected IP or IP:PORT)", where, s);
		}
		sg_addr_str(&a, ip, sizeof(ip));
		off += (size_t)snprintf(csv + off, cap - off,
					a.family == AF_INET6 ? "%s[%s]:%d" : "%s%s:%d",
					i ? "," : "", ip, port);
	}
	return 0;
}

static int cfg_resolver_hosts(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	const char *where = "gateway.resolver.hosts";
	struct sg_config *cfg = c->cfg;
	char buf[SG_HOST_MAX + 1];
	size_t i, j, cnt;
	const char *s;
	int len, rc;

	rc = pol_cfg_expect_map(c, n, "hosts", "gateway.resolver");
	if (!rc)
		rc = cfg_map_keys(c, n, where);
	if (rc)
		return rc;
	cnt = cfg_map_len(n);
	if (cnt == 0)
		return 0;
	cfg->hosts = pol_cfg_calloc(c, cnt, sizeof(*cfg->hosts));
	if (!cfg->hosts)
		return SG_ENOMEM;
	cfg->n_hosts = cnt;
	for (i = 0; i < cnt; i++) {
		yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
		yaml_node_t *k = pol_cfg_node(c, p->key), *v = pol_cfg_node(c, p->value);
		struct pol_static_host *h = &cfg->hosts[i];

		s = (const char *)k->data.scalar.value;
		len = sg_host_normalize(s, strlen(s), buf);
		if (len < 0)
			return pol_cfg_err(c, k, "invalid host name \"%s\" in %s", s, where);
		for (j = 0; j < i; j++)
			if (!strcmp(cfg->hosts[j].name, buf))
				return pol_cfg_err(c, k, "host \"%s\" is listed twice in %s",
					       s, where);
		h->name = pol_cfg_strdup(c, buf, (size_t)len);
		if (!h->name)
			return SG_ENOMEM;
		rc = pol_cfg_expect_list(c, v, h->name, where);
		if (rc)
			return rc;
		h->addrs = pol_cfg_calloc(c, pol_cfg_seq_len(v), sizeof(*h->addrs));
		if (!h->addrs)
			return SG_ENOMEM;
		h->n_addrs = pol_cfg_seq_len(v);
		for (j = 0; j < h->n_addrs; j++) {
			yaml_node_t *it = pol_cfg_node(c, v->data.sequence.items.start[j]);

			rc = pol_cfg_str(c, it, h->name, where, &s);
			if (rc)
				return rc;
			if (sg_addr_parse(s, strlen(s), &h->addrs[j]))
				return pol_cfg_err(c, it, "%s in %s: invalid address \"%s\"",
					       h->name, where, s);
		}
	}
	return 0;
}

enum { RSK_SERVERS, RSK_HOSTS, RSK_TIMEOUT, RSK_MIN_TTL, RSK_MAX_TTL,
       RSK_NEG_TTL, RSK_N };

static const struct pol_cfg_key resolver_keys[] = {
	[RSK_SERVERS] = { "servers", NULL },
	[RSK_HOSTS] = { "hosts", NULL },
	[RSK_TIMEOUT] = { "timeout", NULL },
	[RSK_MIN_TTL] = { "min_ttl", NULL },
	[RSK_MAX_TTL] = { "max_ttl", NULL },
	[RSK_NEG_TTL] = { "negative_ttl", NULL },
};

static int cfg_gateway_resolver(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	const char *where = "gateway.resolver";
	struct sg_config *cfg = c->cfg;
	yaml_node_t *v[RSK_N];
	int rc;

	rc = pol_cfg_expect_map(c, n, "resolver", "gateway");
	if (!rc)
		rc = pol_cfg_keys(c, n, where, resolver_keys, RSK_N, v);
	if (!rc && v[RSK_SERVERS])
		rc = cfg_resolver_servers(c, v[RSK_SERVERS]);
	if (!rc && v[RSK_HOSTS])
		rc = cfg_resolver_hosts(c, v[RSK_HOSTS]);
	if (!rc && v[RSK_TIMEOUT])
		rc = cfg_duration(c, v[RSK_TIMEOUT], "timeout", where, 1,
				  &cfg->resolver_timeout_ms);
	if (!rc && v[RSK_MIN_TTL])
		rc = cfg_duration(c, v[RSK_MIN_TTL], "min_ttl", where, 0,
				  &cfg->resolver_min_ttl_ms);
	if (!rc && v[RSK_MAX_TTL])
		rc = cfg_duration(c, v[RSK_MAX_TTL], "max_ttl", where, 0,
				  &cfg->resolver_max_ttl_ms);
	if (!rc && v[RSK_NEG_TTL])
		rc = cfg_duration(c, v[RSK_NEG_TTL], "negative_ttl", where, 0,
				  &cfg->resolver_negative_ttl_ms);
	if (rc)
		return rc;
	if (cfg->resolver_min_ttl_ms > cfg->resolver_max_ttl_ms)
		return pol_cfg_err(c, v[RSK_MAX_TTL] ? v[RSK_MAX_TTL] : v[RSK_MIN_TTL],
			       "min_ttl (%lldms) is above max_ttl (%lldms) in %s",
			       (long long)cfg->resolver_min_ttl_ms,
			       (long long)cfg->resolver_max_ttl_ms, where);
	return 0;
}

enum { LMK_MAX_CONN, LMK_CONNECT, LMK_IDLE, LMK_HANDSHAKE, LMK_DRAIN,
       LMK_HEADER, LMK_N };

static const struct pol_cfg_key limits_keys[] = {
	[LMK_MAX_CONN] = { "max_connections", NULL },
	[LMK_CONNECT] = { "connect_timeout", NULL },
	[LMK_IDLE] = { "idle_timeout", NULL },
	[LMK_HANDSHAKE] = { "handshake_timeout", NULL },
	[LMK_DRAIN] = { "drain_timeout", NULL },
	[LMK_HEADER] = { "max_header_bytes", NULL },
};

static int cfg_gateway_limits(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	const char *where = "gateway.limits";
	struct sg_config *cfg = c->cfg;
	yaml_node_t *v[LMK_N];
	int rc;

	rc = pol_cfg_expect_map(c, n, "limits", "gateway");
	if (!rc)
		rc = pol_cfg_keys(c, n, where, limits_keys, LMK_N, v);
	if (!rc && v[LMK_MAX_CONN])
		rc = cfg_int(c, v[LMK_MAX_CONN], "max_connections", where, 1,
			     10000000, &cfg->max_connections);
	if (!rc && v[LMK_CONNECT])
		rc = cfg_duration(c, v[LMK_CONNECT], "connect_timeout", where, 1,
				  &cfg->connect_timeout_ms);
	if (!rc && v[LMK_IDLE])
		rc = cfg_duration(c, v[LMK_IDLE], "idle_timeout", where, 1,
				  &cfg->idle_timeout_ms);
	if (!rc && v[LMK_HANDSHAKE])
		rc = cfg_duration(c, v[LMK_HANDSHAKE], "handshake_timeout", where,
				  1, &cfg->handshake_timeout_ms);
	/* drain_timeout: 0 closes everything at once on SIGTERM */
	if (!rc && v[LMK_DRAIN])
		rc = cfg_duration(c, v[LMK_DRAIN], "drain_timeout", where, 0,
				  &cfg->drain_timeout_ms);
	if (!rc && v[LMK_HEADER])
		rc = cfg_int(c, v[LMK_HEADER], "max_header_bytes", where, 1024,
			     1048576, &cfg->max_header_bytes);
	return rc;
}

/* ---- gateway.dns (the DNS responder, gateway/dns.c) ---- */

enum { DK_RATE, DK_BURST, DK_NAMES, DK_MAX_TTL, DK_TCP_IDLE, DK_N };

static const struct pol_cfg_key dns_keys[] = {
	[DK_RATE] = { "rate", NULL },
	[DK_BURST] = { "burst", NULL },
	[DK_NAMES] = { "max_names_per_minute", NULL },
	[DK_MAX_TTL] = { "max_ttl", NULL },
	[DK_TCP_IDLE] = { "tcp_idle_timeout", NULL },
};

static int cfg_gateway_dns(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	const char *where = "gateway.dns";
	struct sg_config *cfg = c->cfg;
	yaml_node_t *v[DK_N];
	int rc;

	rc = pol_cfg_expect_map(c, n, "dns", "gateway");
	if (!rc)
		rc = pol_cfg_keys(c, n, where, dns_keys, DK_N, v);
	if (!rc && v[DK_RATE])
		rc = cfg_int(c, v[DK_RATE], "rate", where, 1, 100000000, &cfg->dns_rate);
	if (!rc && v[DK_BURST])
		rc = cfg_int(c, v[DK_BURST], "burst", where, 1, 100000000, &cfg->dns_burst);
	if (!rc && v[DK_NAMES])
		rc = cfg_int(c, v[DK_NAMES], "max_names_per_minute", where, 1, 10000000,
			     &cfg->dns_max_names);
	if (!rc && v[DK_MAX_TTL])
		rc = cfg_duration(c, v[DK_MAX_TTL], "max_ttl", where, 0, &cfg->dns_max_ttl_ms);
	if (!rc && v[DK_MAX_TTL] && cfg->dns_max_ttl_ms > 86400000)
		rc = pol_cfg_err(c, v[DK_MAX_TTL], "max_ttl in %s: at most 24h", where);
	if (!rc && v[DK_TCP_IDLE])
		rc = cfg_duration(c, v[DK_TCP_IDLE], "tcp_idle_timeout", where, 100,
				  &cfg->dns_tcp_idle_ms);
	return rc;
}

static int cfg_spec(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		    const char *section, char **out);

enum { GK_LISTEN, GK_WORKERS, GK_LOG_LEVEL, GK_RESOLVER, GK_LIMITS, GK_ADMIN_TOKEN, GK_DNS,
       GK_N };

static const struct pol_cfg_key gateway_keys[] = {
	[GK_LISTEN] = { "listen", NULL },
	[GK_WORKERS] = { "workers", NULL },
	[GK_LOG_LEVEL] = { "log_level", NULL },
	[GK_RESOLVER] = { "resolver", NULL },
	[GK_LIMITS] = { "limits", NULL },
	[GK_ADMIN_TOKEN] = { "admin_token", NULL },
	[GK_DNS] = { "dns", NULL },
	{ "tls", "gateway.tls: TLS interception is not supported by this build yet" },
};

static int cfg_gateway(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	static const char *const levels[] = { "error", "warn", "info", "debug" };
	struct sg_config *cfg = c->cfg;
	yaml_node_t *v[SG_ARRAY_LEN(gateway_keys)];
	const char *s;
	long long workers = 0;
	int rc, lvl = 0;

	rc = pol_cfg_expect_map(c, n, "gateway", "");
	if (!rc)
		rc = pol_cfg_keys(c, n, "gateway", gateway_keys,
			      SG_ARRAY_LEN(gateway_keys), v);
	if (!rc && v[GK_LISTEN])
		rc = cfg_gateway_listen(c, v[GK_LISTEN]);
	if (!rc && v[GK_WORKERS]) {
		rc = pol_cfg_str(c, v[GK_WORKERS], "workers", "gateway", &s);
		if (!rc && strcmp(s, "auto")) {
			if (strspn(s, "0123456789") != strlen(s) ||
			    sg_int_parse(s, 1, 256, &workers))
				rc = pol_cfg_err(c, v[GK_WORKERS], "workers in gateway: "
					     "expected auto or 1..256, got \"%s\"", s);
			else
				cfg->workers = (int)workers;
		}
	}
	if (!rc && v[GK_LOG_LEVEL]) {
		rc = pol_cfg_enum(c, v[GK_LOG_LEVEL], "log_level", "gateway", levels,
			      SG_ARRAY_LEN(levels), "error, warn, info or debug", &lvl);
		if (!rc) {
			cfg->log_level = pol_cfg_strdup(c, levels[lvl], strlen(levels[lvl]));
			if (!cfg->log_level)
				rc = SG_ENOMEM;
		}
	}
	if (!rc && v[GK_RESOLVER])
		rc = cfg_gateway_resolver(c, v[GK_RESOLVER]);
	if (!rc && v[GK_LIMITS])
		rc = cfg_gateway_limits(c, v[GK_LIMITS]);
	if (!rc && v[GK_ADMIN_TOKEN])
		rc = cfg_spec(c, v[GK_ADMIN_TOKEN], "admin_token", "gateway", &cfg->admin_token);
	if (!rc && v[GK_DNS])
		rc = cfg_gateway_dns(c, v[GK_DNS]);
	return rc;
}

/* ---- audit ---------------------------------------------------------- */

/*
 * A size: "64k", "10MB", "1GB", "512KiB" or plain bytes. Units are powers
 * of 1024 (an audit file's size is counted in bytes on disk, where 10MB
 * meaning 10 MiB surprises nobody); case does not matter.
 */
static int cfg_size(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		    const char *where, uint64_t min, uint64_t max, uint64_t *out)
{
	static const struct { const char *sfx; int shift; } units[] = {
		{ "", 0 }, { "b", 0 },
		{ "k", 10 }, { "kb", 10 }, { "kib", 10 },
		{ "m", 20 }, { "mb", 20 }, { "mib", 20 },
		{ "g", 30 }, { "gb", 30 }, { "gib", 30 },
	};
	const char *s, *p;
	uint64_t v = 0;
	size_t i;
	int rc = pol_cfg_str(c, n, key, where, &s);

	if (rc)
		return rc;
	for (p = s; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			goto bad;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		goto bad;
	for (i = 0; i < SG_ARRAY_LEN(units); i++)
		if (!strcasecmp(p, units[i].sfx))
			break;
	if (i == SG_ARRAY_LEN(units) || v > (UINT64_MAX >> units[i].shift))
		goto bad;
	v <<= units[i].shift;
	if (v < min || v > max)
		return pol_cfg_err(c, n, "%s%s%s: %s is out of range (%llu bytes to %llu GiB)",
			       key, pol_cfg_in(where), where, s, (unsigned long long)min,
			       (unsigned long long)(max >> 30));
	*out = v;
	return 0;
bad:
	return pol_cfg_err(c, n, "%s%s%s: invalid size \"%s\" (e.g. 64k, 10MB, 1GB or bytes)",
		       key, pol_cfg_in(where), where, s);
}

/*
 * A key or token SPEC (audit.key, gateway.admin_token), never the secret
 * itself: an invalid value is not echoed, in case someone pasted the
 * secret here.
 */
static int cfg_spec(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
		    const char *section, char **out)
{
	const char *s;
	int rc = pol_cfg_str(c, n, key, section, &s);

	if (rc)
		return rc;
	if (!strncmp(s, "vault:", 6))
		return pol_cfg_err(c, n, "%s.%s: vault keys arrive with the vault; use "
			       "file:PATH or env:NAME", section, key);
	if ((strncmp(s, "file:", 5) || !s[5]) && (strncmp(s, "env:", 4) || !s[4]))
		return pol_cfg_err(c, n, "%s.%s: expected file:PATH or env:NAME (the %s "
			       "itself never goes in the configuration)", section, key,
			       !strcmp(key, "key") ? "key" : "token");
	*out = pol_cfg_strdup(c, s, strlen(s));
	return *out ? 0 : SG_ENOMEM;
}

static int cfg_audit_key(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	return cfg_spec(c, n, "key", "audit", &c->cfg->audit_key);
}

static int cfg_audit_syslog(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	char host[SG_HOST_MAX + 1];
	const char *s;
	int port, rc = pol_cfg_str(c, n, "syslog", "audit", &s);

	if (rc)
		return rc;
	if ((strncmp(s, "udp://", 6) && strncmp(s, "tcp://", 6)) ||
	    sg_hostport_split(s + 6, strlen(s + 6), host, sizeof(host), -1, &port) < 0 ||
	    !host[0] || port < 1 || port > 65535)
		return pol_cfg_err(c, n, "audit.syslog: expected udp://HOST:PORT or "
			       "tcp://HOST:PORT, got \"%s\"", s);
	c->cfg->audit_syslog = pol_cfg_strdup(c, s, strlen(s));
	return c->cfg->audit_syslog ? 0 : SG_ENOMEM;
}

enum { ARK_SIZE, ARK_KEEP, ARK_N };

static const struct pol_cfg_key rotate_keys[] = {
	[ARK_SIZE] = { "size", NULL },
	[ARK_KEEP] = { "keep", NULL },
};

static int cfg_audit_rotate(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	const char *where = "audit.rotate";
	yaml_node_t *v[ARK_N];
	long long keep;
	int rc;

	rc = pol_cfg_expect_map(c, n, "rotate", "audit");
	if (!rc)
		rc = pol_cfg_keys(c, n, where, rotate_keys, ARK_N, v);
	if (!rc && !v[ARK_SIZE])
		rc = pol_cfg_err(c, n, "audit.rotate: size is required (e.g. size: 100MB); "
			     "SIGUSR1 reopens the file without it");
	/* at least one record of AUD_REC_MAX fits */
	if (!rc)
		rc = cfg_size(c, v[ARK_SIZE], "size", where, 8192, (uint64_t)1 << 40,
			      &c->cfg->audit_rotate_size);
	if (!rc && v[ARK_KEEP]) {
		rc = cfg_int(c, v[ARK_KEEP], "keep", where, 1, 100000, &keep);
		if (!rc)
			c->cfg->audit_rotate_keep = (int)keep;
	}
	return rc;
}

enum { AK_PATH, AK_FSYNC, AK_ON_FAILURE, AK_KEY, AK_SYSLOG, AK_ROTATE, AK_N };

static const struct pol_cfg_key audit_keys[] = {
	[AK_PATH] = { "path", NULL },
	[AK_FSYNC] = { "fsync", NULL },
	[AK_ON_FAILURE] = { "on_failure", NULL },
	[AK_KEY] = { "key", NULL },
	[AK_SYSLOG] = { "syslog", NULL },
	[AK_ROTATE] = { "rotate", NULL },
};

static int cfg_audit(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	static const char *const fsyncs[] = { "batch", "always", "never" };
	static const char *const failures[] = { "deny", "allow" };
	struct sg_config *cfg = c->cfg;
	yaml_node_t *v[AK_N];
	const char *s;
	int rc, i = 0;

	rc = pol_cfg_expect_map(c, n, "audit", "");
	if (!rc)
		rc = pol_cfg_keys(c, n, "audit", audit_keys, AK_N, v);
	if (!rc && v[AK_PATH]) {
		rc = pol_cfg_str(c, v[AK_PATH], "path", "audit", &s);
		if (!rc) {
			cfg->audit_path = pol_cfg_strdup(c, s, strlen(s));
			if (!cfg->audit_path)
				rc = SG_ENOMEM;
		}
	}
	/* fsyncs[] is in enum aud_fsync_mode order */
	if (!rc && v[AK_FSYNC]) {
		rc = pol_cfg_enum(c, v[AK_FSYNC], "fsync", "audit", fsyncs,
			      SG_ARRAY_LEN(fsyncs), "always, batch or never", &i);
		if (!rc)
			cfg->audit_fsync = (enum aud_fsync_mode)i;
	}
	if (!rc && v[AK_ON_FAILURE]) {
		rc = pol_cfg_enum(c, v[AK_ON_FAILURE], "on_failure", "audit", failures,
			      SG_ARRAY_LEN(failures), "deny or allow", &i);
		if (!rc)
			cfg->audit_on_failure_allow = i;
	}
	if (!rc && v[AK_KEY])
		rc = cfg_audit_key(c, v[AK_KEY]);
	if (!rc && v[AK_SYSLOG])
		rc = cfg_audit_syslog(c, v[AK_SYSLOG]);
	if (!rc && v[AK_ROTATE])
		rc = cfg_audit_rotate(c, v[AK_ROTATE]);
	return rc;
}

/* ---- geoip ---------------------------------------------------------- */

enum { GEK_COUNTRY, GEK_ASN, GEK_N };

static const struct pol_cfg_key geoip_keys[] = {
	[GEK_COUNTRY] = { "country", NULL },
	[GEK_ASN] = { "asn", NULL },
};

/* One database: opened (mmap) and checked now, so that a missing or wrong
 * file fails the load at its line instead of a connection later. */
static int cfg_geoip_db(struct pol_cfg_ctx *c, const yaml_node_t *n, const char *key,
			enum pol_geo_db which, char **path)
{
	char msg[512];
	const char *s;
	int rc = pol_cfg_str(c, n, key, "geoip", &s);

	if (rc)
		return rc;
	*path = pol_cfg_strdup(c, s, strlen(s));
	if (!*path)
		return SG_ENOMEM;
	msg[0] = '\0';
	rc = pol_geo_open(&c->cfg->geo, which, s, msg, sizeof(msg));
	if (rc == SG_ENOMEM)
		return pol_cfg_nomem(c);
	if (rc)
		return pol_cfg_err(c, n, "geoip.%s: %s", key, msg);
	return 0;
}

static int cfg_geoip(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	yaml_node_t *v[GEK_N];
	int rc;

	rc = pol_cfg_expect_map(c, n, "geoip", "");
	if (!rc)
		rc = pol_cfg_keys(c, n, "geoip", geoip_keys, GEK_N, v);
	if (!rc && v[GEK_COUNTRY])
		rc = cfg_geoip_db(c, v[GEK_COUNTRY], "country", POL_GEO_COUNTRY,
				  &c->cfg->geoip_country);
	if (!rc && v[GEK_ASN])
		rc = cfg_geoip_db(c, v[GEK_ASN], "asn", POL_GEO_ASN, &c->cfg->geoip_asn);
	return rc;
}

/* ---- policy --------------------------------------------------------- */

static const struct pol_cfg_key floor_keys[] = {
	{ "deny", NULL },
	{ "allow", "floor.allow: the floor only narrows: put allow rules in "
		   "profiles or sandboxes" },
};

static int cfg_floor(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	yaml_node_t *v[SG_ARRAY_LEN(floor_keys)];
	int rc;

	rc = pol_cfg_expect_map(c, n, "floor", "");
	if (!rc)
		rc = pol_cfg_keys(c, n, "floor", floor_keys, SG_ARRAY_LEN(floor_keys), v);
	if (!rc && v[0])
		rc = pol_cfg_rules(c, v[0], "deny", "floor", "floor/deny",
			       &c->cfg->floor_deny);
	return rc;
}

/* The key of a profiles: or sandboxes: entry, as a name of bounded size. */
static int cfg_entry_name(struct pol_cfg_ctx *c, const yaml_node_t *k,
			  const char *where, char **out)
{
	const char *s = (const char *)k->data.scalar.value;

	if (strlen(s) > CFG_MAX_NAME)
		return pol_cfg_err(c, k, "name in %s is longer than %d bytes", where,
			       CFG_MAX_NAME);
	*out = pol_cfg_strdup(c, s, strlen(s));
	return *out ? 0 : SG_ENOMEM;
}

enum { PK_ALLOW, PK_DENY, PK_N };

static const struct pol_cfg_key profile_keys[] = {
	[PK_ALLOW] = { "allow", NULL },
	[PK_DENY] = { "deny", NULL },
};

static int cfg_profiles(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	struct sg_config *cfg = c->cfg;
	char where[CFG_WHERE_MAX], prefix[CFG_WHERE_MAX + 8];
	yaml_node_t *v[PK_N];
	size_t i, cnt;
	int rc;

	rc = pol_cfg_expect_map(c, n, "profiles", "");
	if (!rc)
		rc = cfg_map_keys(c, n, "profiles");
	if (rc)
		return rc;
	cnt = cfg_map_len(n);
	if (cnt == 0)
		return 0;
	cfg->profiles = pol_cfg_calloc(c, cnt, sizeof(*cfg->profiles));
	if (!cfg->profiles)
		return SG_ENOMEM;
	cfg->n_profiles = cnt;
	for (i = 0; i < cnt; i++) {
		yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
		struct pol_profile *pr = &cfg->profiles[i];
		yaml_node_t *val = pol_cfg_node(c, p->value);

		rc = cfg_entry_name(c, pol_cfg_node(c, p->key), "profiles", &pr->name);
		pol_cfg_pos(pol_cfg_node(c, p->key), &pr->line, &pr->col);
		if (rc)
			return rc;
		snprintf(where, sizeof(where), "profiles/%s", pr->name);
		rc = pol_cfg_expect_map(c, val, where, "");
		if (!rc)
			rc = pol_cfg_keys(c, val, where, profile_keys, PK_N, v);
		if (!rc && v[PK_ALLOW]) {
			snprintf(prefix, sizeof(prefix), "%s/allow", where);
			rc = pol_cfg_rules(c, v[PK_ALLOW], "allow", where, prefix, &pr->allow);
		}
		if (!rc && v[PK_DENY]) {
			snprintf(prefix, sizeof(prefix), "%s/deny", where);
			rc = pol_cfg_rules(c, v[PK_DENY], "deny", where, prefix, &pr->deny);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int cfg_sandbox_profiles(struct pol_cfg_ctx *c, const yaml_node_t *n,
				const char *where, struct pol_sandbox *sb)
{
	struct sg_config *cfg = c->cfg;
	size_t i, j, cnt;
	const char *s;
	int rc = pol_cfg_expect_seq(c, n, "profiles", where);

	if (rc)
		return rc;
	cnt = pol_cfg_seq_len(n);
	if (cnt == 0)
		return 0;
	sb->profiles = pol_cfg_calloc(c, cnt, sizeof(*sb->profiles));
	if (!sb->profiles)
		return SG_ENOMEM;
	for (i = 0; i < cnt; i++) {
		yaml_node_t *it = pol_cfg_node(c, n->data.sequence.items.start[i]);
		struct pol_profile *found = NULL;

		rc = pol_cfg_str(c, it, "profiles", where, &s);
		if (rc)
			return rc;
		for (j = 0; j < cfg->n_profiles && !found; j++)
			if (!strcmp(cfg->profiles[j].name, s))
				found = &cfg->profiles[j];
		if (!found)
			return pol_cfg_err(c, it, "unknown profile \"%s\" in %s", s, where);
		for (j = 0; j < sb->n_profiles; j++)
			if (sb->profiles[j] == found)
				return pol_cfg_err(c, it, "profile \"%s\" is listed twice "
					       "in %s", s, where);
		sb->profiles[sb->n_profiles++] = found;
	}
	return 0;
}

enum { SK_SOURCES, SK_MODE, SK_PROFILES, SK_ALLOW, SK_DENY, SK_N };

static const struct pol_cfg_key sandbox_keys[] = {
	[SK_SOURCES] = { "sources", NULL },
	[SK_MODE] = { "mode", NULL },
	[SK_PROFILES] = { "profiles", NULL },
	[SK_ALLOW] = { "allow", NULL },
	[SK_DENY] = { "deny", NULL },
};

static int cfg_sandbox(struct pol_cfg_ctx *c, const yaml_node_t *n,
		       const char *where, struct pol_sandbox *sb)
{
	static const char *const modes[] = { "enforce", "audit" };
	char prefix[CFG_WHERE_MAX + 8];
	yaml_node_t *v[SK_N];
	size_t i, cnt;
	int rc, mode = 0;

	rc = pol_cfg_expect_map(c, n, where, "");
	if (!rc)
		rc = pol_cfg_keys(c, n, where, sandbox_keys, SK_N, v);
	if (rc)
		return rc;
	if (v[SK_SOURCES]) {
		rc = pol_cfg_expect_seq(c, v[SK_SOURCES], "sources", where);
		if (rc)
			return rc;
		cnt = pol_cfg_seq_len(v[SK_SOURCES]);
		if (cnt) {
			sb->sources = pol_cfg_calloc(c, cnt, sizeof(*sb->sources));
			if (!sb->sources)
				return SG_ENOMEM;
			sb->n_sources = cnt;
		}
		for (i = 0; i < cnt; i++) {
			rc = pol_cfg_cidr(c, pol_cfg_node(c, v[SK_SOURCES]->data.sequence.items.start[i]),
				      "sources", where, &sb->sources[i]);
			if (rc)
				return rc;
		}
	}
	sb->mode = POL_MODE_ENFORCE;
	if (v[SK_MODE]) {
		rc = pol_cfg_enum(c, v[SK_MODE], "mode", where, modes, SG_ARRAY_LEN(modes),
			      "enforce or audit", &mode);
		if (rc)
			return rc;
		sb->mode = mode ? POL_MODE_AUDIT : POL_MODE_ENFORCE;
	}
	if (v[SK_PROFILES]) {
		rc = cfg_sandbox_profiles(c, v[SK_PROFILES], where, sb);
		if (rc)
			return rc;
	}
	if (v[SK_ALLOW]) {
		snprintf(prefix, sizeof(prefix), "%s/allow", where);
		rc = pol_cfg_rules(c, v[SK_ALLOW], "allow", where, prefix, &sb->allow);
		if (rc)
			return rc;
	}
	if (v[SK_DENY]) {
		snprintf(prefix, sizeof(prefix), "%s/deny", where);
		rc = pol_cfg_rules(c, v[SK_DENY], "deny", where, prefix, &sb->deny);
	}
	return rc;
}

static int cfg_sandboxes(struct pol_cfg_ctx *c, const yaml_node_t *n)
{
	struct sg_config *cfg = c->cfg;
	char where[CFG_WHERE_MAX];
	size_t i, cnt;
	int rc;

	rc = pol_cfg_expect_map(c, n, "sandboxes", "");
	if (!rc)
		rc = cfg_map_keys(c, n, "sandboxes");
	if (rc)
		return rc;
	cnt = cfg_map_len(n);
	if (cnt == 0)
		return 0;
	cfg->sandboxes = pol_cfg_calloc(c, cnt, sizeof(*cfg->sandboxes));
	if (!cfg->sandboxes)
		return SG_ENOMEM;
	cfg->n_sandboxes = cnt;
	for (i = 0; i < cnt; i++) {
		yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
		struct pol_sandbox *sb = &cfg->sandboxes[i];

		rc = cfg_entry_name(c, pol_cfg_node(c, p->key), "sandboxes", &sb->name);
		pol_cfg_pos(pol_cfg_node(c, p->key), &sb->line, &sb->col);
		if (rc)
			return rc;
		snprintf(where, sizeof(where), "sandboxes/%s", sb->name);
		rc = cfg_sandbox(c, pol_cfg_node(c, p->value), where, sb);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- top level ------------------------------------------------------ */

enum { TK_VERSION, TK_GATEWAY, TK_AUDIT, TK_GEOIP, TK_FLOOR, TK_PROFILES,
       TK_SANDBOXES, TK_DEFAULT, TK_N };

static const struct pol_cfg_key top_keys[] = {
	[TK_VERSION] = { "version", NULL },
	[TK_GATEWAY] = { "gateway", NULL },
	[TK_AUDIT] = { "audit", NULL },
	[TK_GEOIP] = { "geoip", NULL },
	[TK_FLOOR] = { "floor", NULL },
	[TK_PROFILES] = { "profiles", NULL },
	[TK_SANDBOXES] = { "sandboxes", NULL },
	[TK_DEFAULT] = { "default", NULL },
	{ "vault", "vault: not supported by this build yet" },
	{ "secrets", "secrets: not supported by this build yet" },
};

/* version comes first: another version may have another schema. */
static int cfg_version(struct pol_cfg_ctx *c, const yaml_node_t *root)
{
	yaml_node_pair_t *p;

	for (p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
		yaml_node_t *k = pol_cfg_node(c, p->key), *v = pol_cfg_node(c, p->value);

		if (k->type != YAML_SCALAR_NODE ||
		    strcmp((const char *)k->data.scalar.value, "version"))
			continue;
		if (v->type != YAML_SCALAR_NODE ||
		    strcmp((const char *)v->data.scalar.value, "1"))
			return pol_cfg_err(c, v, "unsupported version%s%s%s (this build "
				       "reads version: 1)",
				       v->type == YAML_SCALAR_NODE ? " \"" : "",
				       v->type == YAML_SCALAR_NODE ?
				       (const char *)v->data.scalar.value : "",
				       v->type == YAML_SCALAR_NODE ? "\"" : "");
		return 0;
	}
	return pol_cfg_err(c, root, "version: missing (this build reads version: 1)");
}

static int cfg_root(struct pol_cfg_ctx *c, const yaml_node_t *root)
{
	static const char *const defaults[] = { "deny", "allow" };
	yaml_node_t *v[SG_ARRAY_LEN(top_keys)];
	int rc;

	if (root->type != YAML_MAPPING_NODE)
		return pol_cfg_err(c, root, "expected a mapping at the top level, got %s",
			       cfg_kind(root));
	rc = cfg_budget(c, root, cfg_map_len(root));
	if (!rc)
		rc = cfg_version(c, root);
	if (!rc)
		rc = pol_cfg_keys(c, root, "", top_keys, SG_ARRAY_LEN(top_keys), v);
	if (!rc && v[TK_GATEWAY])
		rc = cfg_gateway(c, v[TK_GATEWAY]);
	if (!rc && v[TK_AUDIT])
		rc = cfg_audit(c, v[TK_AUDIT]);
	/* before any rule: countries and asns need their database */
	if (!rc && v[TK_GEOIP])
		rc = cfg_geoip(c, v[TK_GEOIP]);
	if (!rc && v[TK_FLOOR])
		rc = cfg_floor(c, v[TK_FLOOR]);
	/* before sandboxes, which refer to profiles by name */
	if (!rc && v[TK_PROFILES])
		rc = cfg_profiles(c, v[TK_PROFILES]);
	if (!rc && v[TK_SANDBOXES])
		rc = cfg_sandboxes(c, v[TK_SANDBOXES]);
	if (!rc && v[TK_DEFAULT])
		rc = pol_cfg_enum(c, v[TK_DEFAULT], "default", "", defaults,
			      SG_ARRAY_LEN(defaults), "deny or allow",
			      &c->cfg->default_allow);
	return rc;
}

/* libyaml's own message, at its own position. */
static int cfg_yaml_err(struct pol_cfg_ctx *c, const yaml_parser_t *p,
			const char *buf, size_t len)
{
	size_t line = p->problem_mark.line + 1, col = p->problem_mark.column + 1;
	size_t i;

	if (p->error == YAML_MEMORY_ERROR)
		return pol_cfg_nomem(c);
	if (p->error == YAML_READER_ERROR) {
		/* the reader reports a byte offset (bad UTF-8): find its line */
		line = col = 1;
		for (i = 0; i < p->problem_offset && i < len; i++) {
			if (buf[i] == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
	}
	if (c->errsz) {
		if (p->context)
			snprintf(c->err, c->errsz, "%s:%zu:%zu: %s (%s at line %zu, "
				 "column %zu)", c->path, line, col,
				 p->problem ? p->problem : "syntax error", p->context,
				 (size_t)p->context_mark.line + 1,
				 (size_t)p->context_mark.column + 1);
		else
			snprintf(c->err, c->errsz, "%s:%zu:%zu: %s", c->path, line,
				 col, p->problem ? p->problem : "syntax error");
	}
	return SG_EINVAL;
}

static int cfg_read(const char *path, char **out, size_t *outlen,
		    char *err, size_t errsz)
{
	size_t len = 0, cap = 0, n;
	char *buf = NULL, *nb;
	FILE *f;
	int rc = 0;

	f = fopen(path, "rb");
	if (!f) {
		if (errsz)
			snprintf(err, errsz, "%s: cannot open: %s", path, strerror(errno));
		return SG_EIO;
	}
	for (;;) {
		if (len == cap) {
			cap = cap ? 2 * cap : 8192;
			if (cap > CFG_MAX_FILE + 1)
				cap = CFG_MAX_FILE + 1;
			if (len == cap) {
				if (errsz)
					snprintf(err, errsz, "%s: larger than %u bytes",
						 path, CFG_MAX_FILE);
				rc = SG_EINVAL;
				goto out;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				if (errsz)
					snprintf(err, errsz, "%s: out of memory", path);
				rc = SG_ENOMEM;
				goto out;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		if (errsz)
			snprintf(err, errsz, "%s: cannot read: %s", path, strerror(errno));
		rc = SG_EIO;
	}
out:
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

static void cfg_defaults(struct sg_config *cfg)
{
	cfg->workers = 0;
	cfg->resolver_timeout_ms = 5000;
	cfg->resolver_min_ttl_ms = 5000;
	cfg->resolver_max_ttl_ms = 300000;
	cfg->resolver_negative_ttl_ms = 5000;
	cfg->max_connections = 100000;
	cfg->connect_timeout_ms = 10000;
	cfg->idle_timeout_ms = 300000;
	cfg->handshake_timeout_ms = 10000;
	cfg->drain_timeout_ms = 30000;
	cfg->max_header_bytes = 65536;
	cfg->dns_rate = 200;
	cfg->dns_burst = 400;
	cfg->dns_max_names = 300;
	cfg->dns_max_ttl_ms = 60000;
	cfg->dns_tcp_idle_ms = 10000;
	cfg->audit_fsync = AUD_FSYNC_BATCH;
	cfg->audit_on_failure_allow = 0;
	cfg->audit_rotate_keep = 10;
	cfg->default_allow = 0;
}

int pol_config_load(const char *path, struct sg_config **out, char *err, size_t errsz)
{
	struct pol_cfg_ctx c = { .path = path, .err = err, .errsz = err ? errsz : 0 };
	yaml_parser_t parser;
	yaml_document_t doc, doc2;
	int have_parser = 0, have_doc = 0;
	struct sg_config *cfg = NULL;
	yaml_node_t *root;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (c.errsz)
		err[0] = '\0';
	rc = cfg_read(path, &buf, &len, err, c.errsz);
	if (rc)
		goto out;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		rc = pol_cfg_nomem(&c);
		goto out;
	}
	cfg_defaults(cfg);
	c.cfg = cfg;
	cfg->path = pol_cfg_strdup(&c, path, strlen(path));
	if (!cfg->path) {
		rc = SG_ENOMEM;
		goto out;
	}

	if (!yaml_parser_initialize(&parser)) {
		rc = pol_cfg_nomem(&c);
		goto out;
	}
	have_parser = 1;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = cfg_yaml_err(&c, &parser, buf, len);
		goto out;
	}
	have_doc = 1;
	c.doc = &doc;
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		if (c.errsz)
			snprintf(err, c.errsz, "%s:1:1: empty configuration "
				 "(version: 1 is required)", path);
		rc = SG_EINVAL;
		goto out;
	}
	rc = cfg_root(&c, root);
	if (rc)
		goto out;

	/* One document per file: a second one would be silently ignored. */
	if (!yaml_parser_load(&parser, &doc2)) {
		rc = cfg_yaml_err(&c, &parser, buf, len);
		goto out;
	}
	root = yaml_document_get_root_node(&doc2);
	if (root) {
		c.doc = &doc2;
		rc = pol_cfg_err(&c, root, "a second YAML document: one configuration "
			     "per file");
	}
	yaml_document_delete(&doc2);
	/* Compile only a config that loaded whole. */
	if (!rc)
		rc = pol_index_build(cfg, err, c.errsz);
out:
	if (have_doc)
		yaml_document_delete(&doc);
	if (have_parser)
		yaml_parser_delete(&parser);
	free(c.ids);
	free(buf);
	if (rc) {
		pol_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

void pol_config_free(struct sg_config *cfg)
{
	size_t i;

	if (!cfg)
		return;
	for (i = 0; i < cfg->n_sandboxes; i++) {
		struct pol_sandbox *sb = &cfg->sandboxes[i];

		free(sb->name);
		free(sb->sources);
		free(sb->profiles);
		pol_ruleset_free(&sb->allow);
		pol_ruleset_free(&sb->deny);
	}
	free(cfg->sandboxes);
	for (i = 0; i < cfg->n_profiles; i++) {
		free(cfg->profiles[i].name);
		pol_ruleset_free(&cfg->profiles[i].allow);
		pol_ruleset_free(&cfg->profiles[i].deny);
	}
	free(cfg->profiles);
	pol_ruleset_free(&cfg->floor_deny);
	pol_index_free(cfg->index);
	pol_geo_free(cfg->geo);
	free(cfg->geoip_country);
	free(cfg->geoip_asn);
	for (i = 0; i < cfg->n_hosts; i++) {
		free(cfg->hosts[i].name);
		free(cfg->hosts[i].addrs);
	}
	free(cfg->hosts);
	free(cfg->resolver_servers);
	free(cfg->log_level);
	free(cfg->admin_token);
	free(cfg->audit_path);
	free(cfg->audit_key);
	free(cfg->audit_syslog);
	free(cfg->listen_transparent);
	free(cfg->listen_proxy);
	free(cfg->listen_dns);
	free(cfg->listen_admin);
	free(cfg->path);
	free(cfg);
}
