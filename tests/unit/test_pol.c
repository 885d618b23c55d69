/*
 * test_pol.c - the config loader and the policy evaluator, through their
 * public API (policy/pol.h): configs are written to a temporary directory
 * and loaded the way the daemon loads them.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "pol_test_util.h"

#include "sg.h"
#include "sg_str.h"
#include "policy/pol.h"
#include "sg_poison.h"

/* want: what follows "PATH:" in the message, exactly. */
static void load_err(const char *text, const char *want)
{
	struct sg_config *cfg = (struct sg_config *)1;
	char err[512], full[512];
	int rc;

	write_cfg(text);
	rc = pol_config_load(cfgpath, &cfg, err, sizeof(err));
	if (rc == 0) {
		pol_config_free(cfg);
		fail_msg("loaded, expected %s", want);
	}
	assert_int_equal(rc, SG_EINVAL);
	assert_null(cfg);
	snprintf(full, sizeof(full), "%s:%s", cfgpath, want);
	assert_string_equal(err, full);
}

static struct sg_addr addr(const char *s)
{
	struct sg_addr a;

	assert_int_equal(sg_addr_parse(s, strlen(s), &a), 0);
	return a;
}

/* ---- loading ------------------------------------------------------------ */

static const char full_yaml[] =
	"# DESIGN.md's example, with only what this build implements\n"
	"version: 1\n"
	"gateway:\n"
	"  listen:\n"
	"    transparent: \"[::]:15001\"\n"
	"    proxy: 127.0.0.1:3128\n"
	"    dns: \"[::]:0\"\n"
	"    admin: unix:/run/sandgate/admin.sock\n"
	"  workers: auto\n"
	"  log_level: debug\n"
	"  resolver:\n"
	"    servers: [ \"127.0.0.1:5353\", \"::1\", \"[2001:db8::1]:54\", 192.0.2.1 ]\n"
	"    hosts: { API.Example.Test.: [127.0.0.1, \"::1\"] }\n"
	"    timeout: 2s\n"
	"    min_ttl: 1s\n"
	"    max_ttl: 10m\n"
	"    negative_ttl: 250ms\n"
	"  limits: { max_connections: 1000, connect_timeout: 3s, idle_timeout: 1h,\n"
	"            handshake_timeout: 1.5s, drain_timeout: 0, max_header_bytes: 1024 }\n"
	"audit:\n"
	"  path: audit.jsonl\n"
	"  fsync: always\n"
	"  on_failure: allow\n"
	"\n"
	"floor:\n"
	"  deny:\n"
	"    - cidrs: [169.254.0.0/16, \"::ffff:100.64.0.0/106\"]\n"
	"\n"
	"profiles:\n"
	"  registries:\n"
	"    allow:\n"
	"      - { domains: [pypi.org, files.pythonhosted.org, registry.npmjs.org], ports: [443] }\n"
	"\n"
	"sandboxes:\n"
	"  \"agent-*\":\n"
	"    sources: [10.200.0.0/16, \"fd00:200::/32\"]\n"
	"    mode: enforce\n"
	"    profiles: [registries]\n"
	"    allow:\n"
	"      - name: openai\n"
	"        domains: [API.OpenAI.com.]\n"
	"        ports: [443, \"8000-8100\"]\n"
	"        tls: passthrough\n"
	"      - { cidrs: [10.0.0.0/8], ports: [5432] }\n"
	"    deny:\n"
	"      - { domains: [\"**.pastebin.com\", \"*.paste.io\"] }\n"
	"  ci:\n"
	"    mode: audit\n"
	"default: allow\n";

static void test_full_config(void **state)
{
	struct sg_config *cfg;
	const struct pol_sandbox *sb;
	const struct pol_rule *r;
	struct sg_addr a;
	char ip[INET6_ADDRSTRLEN];

	SG_UNUSED(state);
	cfg = load_ok(full_yaml);
	assert_string_equal(cfg->path, cfgpath);
	assert_string_equal(cfg->listen_transparent, "[::]:15001");
	assert_string_equal(cfg->listen_proxy, "127.0.0.1:3128");
	assert_string_equal(cfg->listen_dns, "[::]:0");
	assert_string_equal(cfg->listen_admin, "unix:/run/sandgate/admin.sock");
	assert_int_equal(cfg->workers, 0);
	assert_string_equal(cfg->log_level, "debug");
	assert_string_equal(cfg->resolver_servers,
			    "127.0.0.1:5353,[::1]:53,[2001:db8::1]:54,192.0.2.1:53");
	assert_int_equal(cfg->n_hosts, 1);
	assert_string_equal(cfg->hosts[0].name, "api.example.test");
	assert_int_equal(cfg->hosts[0].n_addrs, 2);
	a = addr("127.0.0.1");
	assert_true(sg_addr_eq(&cfg->hosts[0].addrs[0], &a));
	a = addr("::1");
	assert_true(sg_addr_eq(&cfg->hosts[0].addrs[1], &a));
	assert_int_equal(cfg->resolver_timeout_ms, 2000);
	assert_int_equal(cfg->resolver_min_ttl_ms, 1000);
	assert_int_equal(cfg->resolver_max_ttl_ms, 600000);
	assert_int_equal(cfg->resolver_negative_ttl_ms, 250);
	assert_int_equal(cfg->max_connections, 1000);
	assert_int_equal(cfg->connect_timeout_ms, 3000);
	assert_int_equal(cfg->idle_timeout_ms, 3600000);
	assert_int_equal(cfg->handshake_timeout_ms, 1500);
	assert_int_equal(cfg->drain_timeout_ms, 0);
	assert_int_equal(cfg->max_header_bytes, 1024);
	assert_string_equal(cfg->audit_path, "audit.jsonl");
	assert_int_equal(cfg->audit_fsync, AUD_FSYNC_ALWAYS);
	assert_int_equal(cfg->audit_on_failure_allow, 1);
	assert_int_equal(cfg->default_allow, 1);

	/* floor: path id, line, a mapped network folded to IPv4 */
	assert_int_equal(cfg->floor_deny.n, 1);
	r = &cfg->floor_deny.rules[0];
	assert_string_equal(r->id, "floor/deny/0");
	assert_int_equal(r->line, 27);
	assert_int_equal(r->n_cidrs, 2);
	assert_int_equal(r->cidrs[0].plen, 16);
	assert_string_equal(sg_addr_str(&r->cidrs[0].addr, ip, sizeof(ip)), "169.254.0.0");
	assert_int_equal(r->cidrs[1].addr.family, AF_INET);
	assert_int_equal(r->cidrs[1].plen, 10);
	assert_string_equal(sg_addr_str(&r->cidrs[1].addr, ip, sizeof(ip)), "100.64.0.0");
	assert_int_equal(r->n_domains, 0);
	assert_int_equal(r->n_ports, 0);

	assert_int_equal(cfg->n_profiles, 1);
	assert_string_equal(cfg->profiles[0].name, "registries");
	assert_int_equal(cfg->profiles[0].allow.n, 1);
	assert_int_equal(cfg->profiles[0].deny.n, 0);
	r = &cfg->profiles[0].allow.rules[0];
	assert_string_equal(r->id, "profiles/registries/allow/0");
	assert_int_equal(r->line, 32);
	assert_int_equal(r->n_domains, 3);
	assert_string_equal(r->domains[2].suffix, "registry.npmjs.org");
	assert_int_equal(r->domains[2].suffix_len, strlen("registry.npmjs.org"));
	assert_int_equal(r->n_ports, 1);
	assert_int_equal(r->ports[0].lo, 443);
	assert_int_equal(r->ports[0].hi, 443);

	/* sandboxes in file order */
	assert_int_equal(cfg->n_sandboxes, 2);
	sb = &cfg->sandboxes[0];
	assert_string_equal(sb->name, "agent-*");
	assert_int_equal(sb->mode, POL_MODE_ENFORCE);
	assert_int_equal(sb->n_sources, 2);
	assert_int_equal(sb->sources[0].plen, 16);
	assert_int_equal(sb->sources[1].addr.family, AF_INET6);
	assert_int_equal(sb->sources[1].plen, 32);
	assert_int_equal(sb->n_profiles, 1);
	assert_ptr_equal(sb->profiles[0], &cfg->profiles[0]);
	assert_int_equal(sb->allow.n, 2);
	r = &sb->allow.rules[0];
	assert_string_equal(r->id, "openai");
	assert_int_equal(r->line, 40);
	assert_int_equal(r->domains[0].kind, POL_DOM_EXACT);
	assert_string_equal(r->domains[0].suffix, "api.openai.com");
	assert_int_equal(r->n_ports, 2);
	assert_int_equal(r->ports[1].lo, 8000);
	assert_int_equal(r->ports[1].hi, 8100);
	assert_int_equal(r->tls, POL_TLS_PASSTHROUGH);
	r = &sb->allow.rules[1];
	assert_string_equal(r->id, "sandboxes/agent-*/allow/1");
	assert_int_equal(r->line, 44);
	assert_int_equal(r->n_cidrs, 1);
	assert_int_equal(r->cidrs[0].plen, 8);
	assert_int_equal(sb->deny.n, 1);
	r = &sb->deny.rules[0];
	assert_string_equal(r->id, "sandboxes/agent-*/deny/0");
	assert_int_equal(r->domains[0].kind, POL_DOM_MANY);
	assert_string_equal(r->domains[0].suffix, "pastebin.com");
	assert_int_equal(r->domains[1].kind, POL_DOM_ONE);
	assert_string_equal(r->domains[1].suffix, "paste.io");
	sb = &cfg->sandboxes[1];
	assert_string_equal(sb->name, "ci");
	assert_int_equal(sb->mode, POL_MODE_AUDIT);
	assert_int_equal(sb->n_sources, 0);
	assert_int_equal(sb->allow.n + sb->deny.n + sb->n_profiles, 0);
	pol_config_free(cfg);
}

static void test_defaults(void **state)
{
	struct sg_config *cfg;

	SG_UNUSED(state);
	cfg = load_ok("version: 1\n");
	assert_null(cfg->listen_transparent);
	assert_null(cfg->listen_proxy);
	assert_null(cfg->listen_dns);
	assert_null(cfg->listen_admin);
	assert_int_equal(cfg->workers, 0);
	assert_null(cfg->log_level);
	assert_null(cfg->resolver_servers);
	assert_int_equal(cfg->n_hosts, 0);
	assert_int_equal(cfg->resolver_timeout_ms, 5000);
	assert_int_equal(cfg->resolver_min_ttl_ms, 5000);
	assert_int_equal(cfg->resolver_max_ttl_ms, 300000);
	assert_int_equal(cfg->resolver_negative_ttl_ms, 5000);
	assert_int_equal(cfg->max_connections, 100000);
	assert_int_equal(cfg->connect_timeout_ms, 10000);
	assert_int_equal(cfg->idle_timeout_ms, 300000);
	assert_int_equal(cfg->handshake_timeout_ms, 10000);
	assert_int_equal(cfg->drain_timeout_ms, 30000);
	assert_int_equal(cfg->max_header_bytes, 65536);
	assert_null(cfg->audit_path);
	assert_int_equal(cfg->audit_fsync, AUD_FSYNC_BATCH);
	assert_int_equal(cfg->audit_on_failure_allow, 0);
	assert_int_equal(cfg->floor_deny.n, 0);
	assert_int_equal(cfg->n_profiles, 0);
	assert_int_equal(cfg->n_sandboxes, 0);
	assert_int_equal(cfg->default_allow, 0);
	pol_config_free(cfg);

	/* explicit values that equal the defaults, and empty sections */
	cfg = load_ok("version: 1\ngateway: {workers: 4, resolver: {servers: system}}\n"
		      "audit: {fsync: batch, on_failure: deny}\nprofiles: {}\n"
		      "sandboxes: {a: {allow: [], sources: []}}\nfloor: {deny: []}\n"
		      "default: deny\n");
	assert_int_equal(cfg->workers, 4);
	assert_null(cfg->resolver_servers);
	assert_int_equal(cfg->audit_fsync, AUD_FSYNC_BATCH);
	assert_int_equal(cfg->n_sandboxes, 1);
	assert_int_equal(cfg->sandboxes[0].allow.n, 0);
	assert_int_equal(cfg->sandboxes[0].mode, POL_MODE_ENFORCE);
	pol_config_free(cfg);
	pol_config_free(NULL);
}

struct err_case {
	const char *yaml;
	const char *want;       /* after "PATH:" */
};

static const struct err_case err_cases[] = {
	/* unknown keys, everywhere, named with their section */
	{ "version: 1\ngatewy: {}\n",
	  "2:1: unknown top-level key \"gatewy\"" },
	{ "version: 1\nsandboxes:\n  \"agent-*\":\n    alow:\n      - { domains: [a.com] }\n",
	  "4:5: unknown key \"alow\" in sandboxes/agent-*" },
	{ "version: 1\nfloor:\n  deny:\n    - { cidr: [10.0.0.0/8] }\n",
	  "4:9: unknown key \"cidr\" in floor/deny/0" },
	{ "version: 1\ngateway:\n  resolver:\n    server: [1.1.1.1]\n",
	  "4:5: unknown key \"server\" in gateway.resolver" },
	{ "version: 1\nprofiles:\n  web:\n    allow: []\n    dney: []\n",
	  "5:5: unknown key \"dney\" in profiles/web" },
	{ "version: 1\ngateway: {limits: {max_conns: 5}}\n",
	  "2:20: unknown key \"max_conns\" in gateway.limits" },
	/* wrong types */
	{ "version: 1\nsandboxes:\n  a:\n    sources: 10.0.0.0/8\n",
	  "4:14: sources in sandboxes/a: expected a list, got a string" },
	{ "version: 1\ngateway: [a]\n",
	  "2:10: gateway: expected a mapping, got a list" },
	{ "version: 1\nfloor:\n  deny:\n",
	  "3:8: deny in floor: expected a list, got nothing" },
	{ "version: 1\nfloor:\n  deny:\n    - 10.0.0.0/8\n",
	  "4:7: floor/deny/0: expected a mapping, got a string" },
	{ "version: 1\nfloor:\n  deny:\n    - domains: a.com\n",
	  "4:16: domains in floor/deny/0: expected a list, got a string" },
	{ "version: 1\naudit:\n  path: [a]\n",
	  "3:9: path in audit: expected a string, got a list" },
	{ "version: 1\nfloor:\n  deny:\n    - { domains: [] }\n",
	  "4:18: domains in floor/deny/0: the list is empty" },
	/* version */
	{ "# sandgate\ndefault: deny\n",
	  "2:1: version: missing (this build reads version: 1)" },
	{ "version: 2\nnew_thing: {}\n",
	  "1:10: unsupported version \"2\" (this build reads version: 1)" },
	{ "version: [1]\n",
	  "1:10: unsupported version (this build reads version: 1)" },
	{ "", "1:1: empty configuration (version: 1 is required)" },
	{ "- version: 1\n", "1:1: expected a mapping at the top level, got a list" },
	/* duplicate keys */
	{ "version: 1\ndefault: deny\ndefault: allow\n",
	  "3:1: duplicate key \"default\" (first at line 2)" },
	{ "version: 1\nsandboxes:\n  a: {}\n  b: {}\n  a: {}\n",
	  "5:3: duplicate key \"a\" in sandboxes (first at line 3)" },
	{ "version: 1\nfloor:\n  deny:\n    - cidrs: [10.0.0.0/8]\n      cidrs: [11.0.0.0/8]\n",
	  "5:7: duplicate key \"cidrs\" in floor/deny/0 (first at line 4)" },
	/* domains, cidrs, ports */
	{ "version: 1\nfloor:\n  deny:\n    - domains: [ok.com, \"foo.*.com\"]\n",
	  "4:25: invalid domain pattern \"foo.*.com\" in floor/deny/0 (expected "
	  "example.com, *.example.com or **.example.com)" },
	{ "version: 1\nfloor:\n  deny:\n    - cidrs: [10.0.0.1/8]\n",
	  "4:15: cidrs in floor/deny/0: host bits set in 10.0.0.1/8" },
	{ "version: 1\nsandboxes:\n  a: {sources: [\"fd00::1/8\"]}\n",
	  "3:17: sources in sandboxes/a: host bits set in fd00::1/8" },
	{ "version: 1\nfloor:\n  deny:\n    - cidrs: [10.0.0.0/33]\n",
	  "4:15: cidrs in floor/deny/0: invalid CIDR \"10.0.0.0/33\" (expected "
	  "10.0.0.0/8, fd00::/8 or an address)" },
	{ "version: 1\nfloor:\n  deny:\n    - cidrs: [10.0.0.0/8]\n      ports: [80, 9000-8000]\n",
	  "5:19: invalid port range \"9000-8000\" in floor/deny/0: the low end is "
	  "above the high end" },
	{ "version: 1\nfloor:\n  deny:\n    - cidrs: [10.0.0.0/8]\n      ports: [0]\n",
	  "5:15: invalid port \"0\" in floor/deny/0 (expected 1..65535 or LOW-HIGH)" },
	{ "version: 1\nfloor:\n  deny:\n    - cidrs: [10.0.0.0/8]\n      ports: [1-65536]\n",
	  "5:15: invalid port \"1-65536\" in floor/deny/0 (expected 1..65535 or LOW-HIGH)" },
	{ "version: 1\nfloor:\n  deny:\n    - { ports: [80] }\n",
	  "4:7: rule matches nothing: give domains, regex, cidrs, countries or asns "
	  "(in floor/deny/0)" },
	/* references and names */
	{ "version: 1\nprofiles:\n  web: {}\nsandboxes:\n  a:\n    profiles: [web, db]\n",
	  "6:21: unknown profile \"db\" in sandboxes/a" },
	{ "version: 1\nsandboxes:\n  a:\n    profiles: [web]\nprofiles:\n  web: {}\n"
	  "  db: {}\n  x:\n    deny: [{domains: [\"*.a.b\"]}]\n", NULL },
	{ "version: 1\nfloor:\n  deny:\n    - { name: x, cidrs: [10.0.0.0/8] }\n"
	  "sandboxes:\n  a:\n    deny:\n      - { name: x, domains: [a.com] }\n",
	  "8:17: duplicate rule name \"x\" (first at line 4)" },
	{ "version: 1\nfloor:\n  deny:\n    - { cidrs: [10.0.0.0/8] }\n"
	  "    - { name: floor/deny/0, cidrs: [11.0.0.0/8] }\n",
	  "5:15: rule id \"floor/deny/0\" is used twice (also at line 4)" },
	/* features this build does not have: refused, never ignored */
	{ "version: 1\ngateway:\n  tls: {ca: {cert: ca.pem, key: ca-key.pem}}\n",
	  "3:3: gateway.tls: TLS interception is not supported by this build yet" },
	{ "version: 1\naudit:\n  path: a.jsonl\n  key: secret\n",
	  "4:8: audit.key: expected file:PATH or env:NAME (the key itself never goes "
	  "in the configuration)" },
	{ "version: 1\naudit:\n  syslog: udp://127.0.0.1\n",
	  "3:11: audit.syslog: expected udp://HOST:PORT or tcp://HOST:PORT, got "
	  "\"udp://127.0.0.1\"" },
	{ "version: 1\nvault: {path: vault.db}\n",
	  "2:1: vault: not supported by this build yet" },
	{ "version: 1\nsecrets: {}\n", "2:1: secrets: not supported by this build yet" },
	{ "version: 1\ngeoip: {country: /nonexistent/c.mmdb}\n",
	  "2:18: geoip.country: cannot open /nonexistent/c.mmdb: No such file or directory" },
	{ "version: 1\ngeoip: {city: c.mmdb}\n",
	  "2:9: unknown key \"city\" in geoip" },
	{ "version: 1\nfloor:\n  deny:\n    - domains: [a.com]\n      http: {methods: [GET]}\n",
	  "5:7: http: not supported by this build yet" },
	{ "version: 1\nfloor:\n  deny:\n    - domains: [a.com]\n      secrets: [openai]\n",
	  "5:7: secrets: not supported by this build yet" },
	{ "version: 1\nfloor:\n  deny:\n    - regex: '^a\\.(com$'\n",
	  "4:14: regex \"^a\\.(com$\" in floor/deny/0: missing closing parenthesis "
	  "at offset 9" },
	{ "version: 1\nfloor:\n  deny:\n    - regex: []\n",
	  "4:14: regex in floor/deny/0: the list is empty" },
	{ "version: 1\nfloor:\n  deny:\n    - regex: {a: b}\n",
	  "4:14: regex in floor/deny/0: expected a string, got a mapping" },
	{ "version: 1\nfloor:\n  deny:\n    - regex: [ok, \"a[\"]\n",
	  "4:19: regex \"a[\" in floor/deny/0: missing terminating ] for character "
	  "class at offset 2" },
	{ "version: 1\nfloor:\n  deny:\n    - countries: [KP]\n",
	  "4:18: countries in floor/deny/0: needs a country database (geoip.country)" },
	{ "version: 1\nfloor:\n  deny:\n    - asns: [64496]\n",
	  "4:13: asns in floor/deny/0: needs an ASN database (geoip.asn)" },
	{ "version: 1\nprofiles:\n  p:\n    allow:\n      - domains: [a.com]\n        tls: inspect\n",
	  "6:14: tls: inspect is not supported by this build yet" },
	{ "version: 1\nfloor:\n  allow: []\n",
	  "3:3: floor.allow: the floor only narrows: put allow rules in profiles or "
	  "sandboxes" },
	/* gateway values */
	{ "version: 1\ngateway:\n  listen:\n    proxy: localhost:3128\n",
	  "4:12: proxy in gateway.listen: invalid address \"localhost:3128\" "
	  "(expected IP:PORT or [IPv6]:PORT)" },
	{ "version: 1\ngateway:\n  listen:\n    proxy: 127.0.0.1\n",
	  "4:12: proxy in gateway.listen: invalid address \"127.0.0.1\" "
	  "(expected IP:PORT or [IPv6]:PORT)" },
	{ "version: 1\ngateway:\n  listen:\n    transparent: unix:/run/x.sock\n",
	  "4:18: transparent in gateway.listen: invalid address \"unix:/run/x.sock\" "
	  "(expected IP:PORT or [IPv6]:PORT)" },
	{ "version: 1\ngateway:\n  listen:\n    admin: unix:run/x.sock\n",
	  "4:12: admin in gateway.listen: \"unix:run/x.sock\": a unix socket needs "
	  "an absolute path under 108 bytes" },
	{ "version: 1\ngateway:\n  workers: 0\n",
	  "3:12: workers in gateway: expected auto or 1..256, got \"0\"" },
	{ "version: 1\ngateway:\n  workers: \" 8\"\n",
	  "3:12: workers in gateway: expected auto or 1..256, got \" 8\"" },
	{ "version: 1\ngateway:\n  workers: {}\n",
	  "3:12: workers in gateway: expected a string, got a mapping" },
	{ "version: 1\ngateway:\n  log_level: verbose\n",
	  "3:14: log_level in gateway: expected error, warn, info or debug, got \"verbose\"" },
	{ "version: 1\ngateway:\n  resolver:\n    servers: [\"1.1.1.1:0\"]\n",
	  "4:15: servers in gateway.resolver: invalid address \"1.1.1.1:0\" "
	  "(expected IP or IP:PORT)" },
	{ "version: 1\ngateway:\n  resolver:\n    servers: local\n",
	  "4:14: servers in gateway.resolver: expected \"system\" or a list of "
	  "addresses, got \"local\"" },
	{ "version: 1\ngateway:\n  resolver:\n    hosts: {\"a_b..c\": [127.0.0.1]}\n",
	  "4:13: invalid host name \"a_b..c\" in gateway.resolver.hosts" },
	{ "version: 1\ngateway:\n  resolver:\n    hosts: {a.test: []}\n",
	  "4:21: a.test in gateway.resolver.hosts: the list is empty" },
	{ "version: 1\ngateway:\n  resolver:\n    hosts: {a.test: [1.2.3.4], A.test.: [\"::1\"]}\n",
	  "4:32: host \"A.test.\" is listed twice in gateway.resolver.hosts" },
	{ "version: 1\ngateway:\n  resolver:\n    timeout: nan\n",
	  "4:14: timeout in gateway.resolver: invalid duration \"nan\" "
	  "(e.g. 10s, 250ms, 5m, 1h)" },
	{ "version: 1\ngateway:\n  resolver:\n    timeout: 0s\n",
	  "4:14: timeout in gateway.resolver: must be at least 1ms" },
	{ "version: 1\ngateway:\n  resolver:\n    min_ttl: 10m\n",
	  "4:14: min_ttl (600000ms) is above max_ttl (300000ms) in gateway.resolver" },
	{ "version: 1\ngateway:\n  limits:\n    max_header_bytes: 100\n",
	  "4:23: max_header_bytes in gateway.limits: expected an integer in "
	  "1024..1048576, got \"100\"" },
	{ "version: 1\ngateway:\n  limits:\n    max_connections: 0x10\n",
	  "4:22: max_connections in gateway.limits: expected an integer in "
	  "1..10000000, got \"0x10\"" },
	/* other values */
	{ "version: 1\nsandboxes:\n  a: {mode: strict}\n",
	  "3:13: mode in sandboxes/a: expected enforce or audit, got \"strict\"" },
	{ "version: 1\naudit:\n  fsync: sometimes\n",
	  "3:10: fsync in audit: expected always, batch or never, got \"sometimes\"" },
	{ "version: 1\ndefault: maybe\n",
	  "2:10: default: expected deny or allow, got \"maybe\"" },
	{ "version: 1\nfloor:\n  deny:\n    - { name: \"a\\0b\", cidrs: [10.0.0.0/8] }\n",
	  "4:15: name in floor/deny/0: NUL byte in string" },
	/* YAML itself: libyaml's message at libyaml's position */
	{ "version: 1\nfloor:\n  deny: [a, b\nsandboxes: x\n",
	  "4:10: did not find expected ',' or ']' (while parsing a flow sequence "
	  "at line 3, column 9)" },
	{ "version: 1\n default: deny\n",
	  "2:9: mapping values are not allowed in this context" },
	{ "version: 1\ndefault: *nope\n", "2:10: found undefined alias" },
	{ "version: 1\ndefault: \"deny\xff\"\n", "2:15: invalid leading UTF-8 octet" },
	{ "version: 1\n---\nversion: 1\n",
	  "3:1: a second YAML document: one configuration per file" },
};

static void test_errors(void **state)
{
	size_t i;

	SG_UNUSED(state);
	for (i = 0; i < SG_ARRAY_LEN(err_cases); i++) {
		if (!err_cases[i].want) {
			pol_config_free(load_ok(err_cases[i].yaml));
			continue;
		}
		load_err(err_cases[i].yaml, err_cases[i].want);
	}
}

static void test_bad_domain_patterns(void **state)
{
	static const char *const bad[] = {
		"*", "*.*", "foo.*.com", "**", "**.", "*.", "*a.com", "a*.com",
		"***.a.com", "*.**.a.com", "1.2.3.4", "*.10.0.0.1", "::1",
		"[::1]", "exa mple.com", "-a.com", "a-.com", "a..com", ".a.com",
		"a.com:443", "regex:^a$", "xn--a.com/x", "..",
	};
	static const char *const good[] = {
		"a.com", "A.COM.", "*.a.com", "**.a.com", "*.com", "localhost",
		"_dmarc.a.com", "xn--p1ai", "1a.com", "a.1com",
	};
	char yaml[256], want[512];
	struct sg_config *cfg;
	size_t i;

	SG_UNUSED(state);
	for (i = 0; i < SG_ARRAY_LEN(bad); i++) {
		snprintf(yaml, sizeof(yaml), "version: 1\nfloor:\n  deny:\n"
			 "    - domains: ['%s']\n", bad[i]);
		snprintf(want, sizeof(want), "4:17: invalid domain pattern \"%s\" in "
			 "floor/deny/0 (expected example.com, *.example.com or "
			 "**.example.com)", bad[i]);
		load_err(yaml, want);
	}
	for (i = 0; i < SG_ARRAY_LEN(good); i++) {
		snprintf(yaml, sizeof(yaml), "version: 1\nfloor:\n  deny:\n"
			 "    - domains: ['%s']\n", good[i]);
		cfg = load_ok(yaml);
		pol_config_free(cfg);
	}
}

static void test_missing_file(void **state)
{
	struct sg_config *cfg = (struct sg_config *)1;
	char err[512], want[512], path[256];

	SG_UNUSED(state);
	snprintf(path, sizeof(path), "%s/nope.yaml", tmpdir);
	assert_int_equal(pol_config_load(path, &cfg, err, sizeof(err)), SG_EIO);
	assert_null(cfg);
	snprintf(want, sizeof(want), "%s: cannot open: %s", path, strerror(ENOENT));
	assert_string_equal(err, want);
	/* a tiny err buffer is never overrun and still NUL-terminated */
	assert_int_equal(pol_config_load(path, &cfg, err, 8), SG_EIO);
	assert_int_equal(strlen(err), 7);
	write_cfg("version: 3\n");
	assert_int_equal(pol_config_load(cfgpath, &cfg, err, 5), SG_EINVAL);
	assert_int_equal(strlen(err), 4);
}

/* ---- matching primitives ------------------------------------------------ */

static int dm(enum pol_dom_kind kind, const char *suffix, const char *name)
{
	struct pol_domain d = { .kind = kind, .suffix = (char *)suffix,
				.suffix_len = strlen(suffix) };

	return pol_domain_match(&d, name, strlen(name));
}

static void test_domain_match(void **state)
{
	SG_UNUSED(state);
	assert_true(dm(POL_DOM_EXACT, "example.com", "example.com"));
	assert_false(dm(POL_DOM_EXACT, "example.com", "a.example.com"));
	assert_false(dm(POL_DOM_EXACT, "example.com", "xexample.com"));
	assert_false(dm(POL_DOM_EXACT, "example.com", "example.co"));
	assert_false(dm(POL_DOM_EXACT, "example.com", "example.com.au"));

	assert_true(dm(POL_DOM_ONE, "example.com", "a.example.com"));
	assert_true(dm(POL_DOM_ONE, "example.com", "www-2.example.com"));
	assert_false(dm(POL_DOM_ONE, "example.com", "a.b.example.com"));
	assert_false(dm(POL_DOM_ONE, "example.com", "example.com"));
	assert_false(dm(POL_DOM_ONE, "example.com", "aexample.com"));
	assert_false(dm(POL_DOM_ONE, "example.com", "a.xexample.com"));
	assert_false(dm(POL_DOM_ONE, "example.com", "a.example.com.evil"));

	assert_true(dm(POL_DOM_MANY, "example.com", "a.example.com"));
	assert_true(dm(POL_DOM_MANY, "example.com", "a.b.c.example.com"));
	assert_false(dm(POL_DOM_MANY, "example.com", "example.com"));
	assert_false(dm(POL_DOM_MANY, "example.com", "badexample.com"));
	assert_false(dm(POL_DOM_MANY, "example.com", "a.example.comx"));

	/* names arrive normalised: upper case and a trailing dot are the
	 * caller's to remove, so they do not match here */
	assert_false(dm(POL_DOM_EXACT, "example.com", "Example.com"));
	assert_false(dm(POL_DOM_EXACT, "example.com", "example.com."));

	/* NULL name (IP only) matches no domain */
	{
		struct pol_domain d = { .kind = POL_DOM_MANY, .suffix = (char *)"com",
					.suffix_len = 3 };

		assert_false(pol_domain_match(&d, NULL, 0));
	}
}

/* Independent reference: compare label lists from the right. */
static int ref_match(enum pol_dom_kind kind, const char *suffix, const char *name)
{
	const char *nl[16], *sl[16];
	size_t nlen[16], slen[16];
	int nn = 0, ns = 0, i, extra;
	const char *p, *start;

	for (start = p = name;; p++)
		if (*p == '.' || !*p) {
			nl[nn] = start;
			nlen[nn++] = (size_t)(p - start);
			if (!*p)
				break;
			start = p + 1;
		}
	for (start = p = suffix;; p++)
		if (*p == '.' || !*p) {
			sl[ns] = start;
			slen[ns++] = (size_t)(p - start);
			if (!*p)
				break;
			start = p + 1;
		}
	if (nn < ns)
		return 0;
	for (i = 0; i < ns; i++) {
		int j = nn - ns + i;

		if (nlen[j] != slen[i] || memcmp(nl[j], sl[i], slen[i]))
			return 0;
	}
	extra = nn - ns;
	if (kind == POL_DOM_EXACT)
		return extra == 0;
	if (kind == POL_DOM_ONE)
		return extra == 1;
	return extra >= 1;
}

static uint64_t rng_state;

static uint32_t rng(void)
{
	/* xorshift64*: small, seeded, the same sequence everywhere */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}

static void rand_labels(char *out, size_t outsz, int n)
{
	static const char *const labels[] = {
		"a", "b", "ab", "ba", "aa", "com", "co", "m", "example", "x-y",
		"_srv", "xn--p1ai", "1",
	};
	size_t off = 0;
	int i;

	out[0] = '\0';
	for (i = 0; i < n; i++)
		off += (size_t)snprintf(out + off, outsz - off, "%s%s", i ? "." : "",
					labels[rng() % SG_ARRAY_LEN(labels)]);
}

static void test_domain_match_random(void **state)
{
	char suffix[128], prefix[128], name[256];
	unsigned matched = 0, missed = 0, i;
	enum pol_dom_kind kind;

	SG_UNUSED(state);
	rng_state = 0x5eed5a4d6a7e0001ULL;
	for (i = 0; i < 6000; i++) {
		kind = (enum pol_dom_kind)(i % 3);
		rand_labels(suffix, sizeof(suffix), 1 + (int)(rng() % 3));
		/* half the names end in the suffix, so matches are common */
		if (rng() % 2) {
			int np = (int)(rng() % 4);

			rand_labels(prefix, sizeof(prefix), np);
			snprintf(name, sizeof(name), "%s%s%s", prefix, np ? "." : "",
				 suffix);
		} else {
			rand_labels(name, sizeof(name), 1 + (int)(rng() % 5));
		}
		if (dm(kind, suffix, name) != ref_match(kind, suffix, name))
			fail_msg("seed 0x5eed5a4d6a7e0001, case %u: kind %d suffix %s "
				 "name %s: got %d", i, kind, suffix, name,
				 dm(kind, suffix, name));
		if (ref_match(kind, suffix, name))
			matched++;
		else
			missed++;
	}
	/* the generator must exercise both outcomes to prove anything */
	assert_true(matched > 1000);
	assert_true(missed > 1000);
}

static void test_cidr_match(void **state)
{
	struct sg_config *cfg;
	const struct pol_rule *r;
	struct sg_addr a, mapped;

	SG_UNUSED(state);
	cfg = load_ok("version: 1\nfloor:\n  deny:\n"
		      "    - cidrs: [10.0.0.0/8, \"2001:db8::/32\", 192.0.2.7,\n"
		      "              \"2001:db8:ffff::1\", \"::ffff:198.51.100.0/120\",\n"
		      "              0.0.0.0/0, \"::/0\"]\n");
	r = &cfg->floor_deny.rules[0];
	assert_int_equal(r->n_cidrs, 7);
	assert_int_equal(r->cidrs[2].plen, 32);
	assert_int_equal(r->cidrs[3].plen, 128);
	assert_int_equal(r->cidrs[4].addr.family, AF_INET);
	assert_int_equal(r->cidrs[4].plen, 24);

	a = addr("10.255.1.2");
	assert_true(pol_cidr_match(&r->cidrs[0], &a));
	a = addr("11.0.0.1");
	assert_false(pol_cidr_match(&r->cidrs[0], &a));
	a = addr("2001:db8:1234::5");
	assert_true(pol_cidr_match(&r->cidrs[1], &a));
	assert_false(pol_cidr_match(&r->cidrs[0], &a));
	a = addr("2001:db9::");
	assert_false(pol_cidr_match(&r->cidrs[1], &a));
	a = addr("192.0.2.7");
	assert_true(pol_cidr_match(&r->cidrs[2], &a));
	a = addr("192.0.2.8");
	assert_false(pol_cidr_match(&r->cidrs[2], &a));
	a = addr("2001:db8:ffff::1");
	assert_true(pol_cidr_match(&r->cidrs[3], &a));
	a = addr("2001:db8:ffff::2");
	assert_false(pol_cidr_match(&r->cidrs[3], &a));
	a = addr("198.51.100.200");
	assert_true(pol_cidr_match(&r->cidrs[4], &a));
	/* an unfolded v4-mapped address still compares as IPv4 */
	memset(&mapped, 0, sizeof(mapped));
	mapped.family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "::ffff:10.1.2.3", &mapped.u.v6), 1);
	assert_true(pol_cidr_match(&r->cidrs[0], &mapped));
	assert_false(pol_cidr_match(&r->cidrs[1], &mapped));
	/* /0 covers its own family only */
	a = addr("203.0.113.9");
	assert_true(pol_cidr_match(&r->cidrs[5], &a));
	assert_false(pol_cidr_match(&r->cidrs[6], &a));
	a = addr("2001:db8::9");
	assert_false(pol_cidr_match(&r->cidrs[5], &a));
	assert_true(pol_cidr_match(&r->cidrs[6], &a));
	assert_false(pol_cidr_match(&r->cidrs[0], NULL));
	pol_config_free(cfg);

	/* a mapped prefix shorter than /96 always has the ffff bits as host bits */
	load_err("version: 1\nfloor: {deny: [{cidrs: [\"::ffff:0.0.0.0/95\"]}]}\n",
		 "2:25: cidrs in floor/deny/0: host bits set in ::ffff:0.0.0.0/95");
	load_err("version: 1\nfloor: {deny: [{cidrs: [\"10.0.0.0/08\"]}]}\n",
		 "2:25: cidrs in floor/deny/0: invalid CIDR \"10.0.0.0/08\" (expected "
		 "10.0.0.0/8, fd00::/8 or an address)");
	load_err("version: 1\nfloor: {deny: [{cidrs: [\"010.0.0.0/8\"]}]}\n",
		 "2:25: cidrs in floor/deny/0: invalid CIDR \"010.0.0.0/8\" (expected "
		 "10.0.0.0/8, fd00::/8 or an address)");
}

static void test_ports(void **state)
{
	struct sg_config *cfg;
	const struct pol_ruleset *rs;

	SG_UNUSED(state);
	cfg = load_ok("version: 1\nfloor:\n  deny:\n"
		      "    - domains: [a.com]\n"
		      "    - cidrs: [10.0.0.0/8]\n"
		      "    - { domains: [b.com], cidrs: [10.0.0.0/8] }\n"
		      "    - { domains: [c.com], ports: [22, \"8000-8100\", 65535] }\n"
		      "    - { cidrs: [10.0.0.0/8], ports: [\"1-1\"] }\n");
	rs = &cfg->floor_deny;
	/* a domain rule without ports: 443 only */
	assert_true(pol_rule_port_ok(&rs->rules[0], 443));
	assert_false(pol_rule_port_ok(&rs->rules[0], 80));
	assert_false(pol_rule_port_ok(&rs->rules[0], 0));
	/* a cidr-only rule without ports: any */
	assert_true(pol_rule_port_ok(&rs->rules[1], 1));
	assert_true(pol_rule_port_ok(&rs->rules[1], 65535));
	assert_true(pol_rule_port_ok(&rs->rules[1], 443));
	/* domains and cidrs: a domain rule, so 443 */
	assert_true(pol_rule_port_ok(&rs->rules[2], 443));
	assert_false(pol_rule_port_ok(&rs->rules[2], 5432));
	/* explicit ports and ranges, ends inclusive */
	assert_true(pol_rule_port_ok(&rs->rules[3], 22));
	assert_false(pol_rule_port_ok(&rs->rules[3], 443));
	assert_false(pol_rule_port_ok(&rs->rules[3], 7999));
	assert_true(pol_rule_port_ok(&rs->rules[3], 8000));
	assert_true(pol_rule_port_ok(&rs->rules[3], 8050));
	assert_true(pol_rule_port_ok(&rs->rules[3], 8100));
	assert_false(pol_rule_port_ok(&rs->rules[3], 8101));
	assert_true(pol_rule_port_ok(&rs->rules[3], 65535));
	assert_true(pol_rule_port_ok(&rs->rules[4], 1));
	assert_false(pol_rule_port_ok(&rs->rules[4], 2));
	pol_config_free(cfg);
}

static void test_sandbox_lookup(void **state)
{
	struct sg_config *cfg;
	struct sg_addr a, mapped;

	SG_UNUSED(state);
	cfg = load_ok("version: 1\nsandboxes:\n"
		      "  \"agent-1\": {sources: [10.200.1.0/24]}\n"
		      "  \"agent-*\": {sources: [10.200.0.0/16, \"fd00:200::/32\"]}\n"
		      "  \"ci-[0-9]\": {}\n"
		      "  \"*\": {sources: [0.0.0.0/0]}\n");
	assert_ptr_equal(pol_sandbox_by_name(cfg, "agent-1"), &cfg->sandboxes[0]);
	assert_ptr_equal(pol_sandbox_by_name(cfg, "agent-2"), &cfg->sandboxes[1]);
	/* no FNM_PATHNAME: '*' spans '/' */
	assert_ptr_equal(pol_sandbox_by_name(cfg, "agent-x/y"), &cfg->sandboxes[1]);
	assert_ptr_equal(pol_sandbox_by_name(cfg, "ci-7"), &cfg->sandboxes[2]);
	assert_ptr_equal(pol_sandbox_by_name(cfg, "ci-77"), &cfg->sandboxes[3]);
	a = addr("10.200.1.9");
	assert_ptr_equal(pol_sandbox_by_addr(cfg, &a), &cfg->sandboxes[0]);
	a = addr("10.200.2.9");
	assert_ptr_equal(pol_sandbox_by_addr(cfg, &a), &cfg->sandboxes[1]);
	a = addr("fd00:200::5");
	assert_ptr_equal(pol_sandbox_by_addr(cfg, &a), &cfg->sandboxes[1]);
	a = addr("192.0.2.1");
	assert_ptr_equal(pol_sandbox_by_addr(cfg, &a), &cfg->sandboxes[3]);
	a = addr("2001:db8::1");
	assert_null(pol_sandbox_by_addr(cfg, &a));
	memset(&mapped, 0, sizeof(mapped));
	mapped.family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "::ffff:10.200.3.3", &mapped.u.v6), 1);
	assert_ptr_equal(pol_sandbox_by_addr(cfg, &mapped), &cfg->sandboxes[1]);
	pol_config_free(cfg);

	cfg = load_ok("version: 1\nsandboxes: {a: {}}\n");
	assert_null(pol_sandbox_by_name(cfg, "b"));
	a = addr("10.0.0.1");
	assert_null(pol_sandbox_by_addr(cfg, &a));
	pol_config_free(cfg);
}

/* ---- evaluation --------------------------------------------------------- */

struct want {
	enum pol_decision decision;
	const char *reason;
	const char *rule;       /* rule id or NULL */
	int would_deny, by_domain;
};

/*
 * Evaluate (sandbox name, host name, address, static, port) and compare
 * with want; line is the caller's, for the failure message.
 */
static void check(int line, const struct sg_config *cfg, const char *sbx,
		  const char *name, const char *ip, int is_static, uint16_t port,
		  struct want w)
{
	struct pol_query q;
	struct pol_verdict v;
	struct sg_addr a;

	memset(&q, 0, sizeof(q));
	if (sbx) {
		q.sbx = pol_sandbox_by_name(cfg, sbx);
		if (!q.sbx)
			fail_msg("line %d: no sandbox %s", line, sbx);
	}
	q.name = name;
	if (ip) {
		a = addr(ip);
		q.addr = &a;
	}
	q.addr_static = is_static;
	q.port = port;
	pol_eval(cfg, &q, &v);
	if (v.decision != w.decision || strcmp(v.reason, w.reason) ||
	    (v.rule_id == NULL) != (w.rule == NULL) ||
	    (w.rule && strcmp(v.rule_id, w.rule)) ||
	    v.would_deny != w.would_deny || v.by_domain != w.by_domain ||
	    (v.rule ? v.rule->id : NULL) != v.rule_id)
		fail_msg("line %d: %s %s %s:%u: got decision %d reason %s rule %s "
			 "would_deny %d by_domain %d; want %d %s %s %d %d", line,
			 sbx ? sbx : "(unknown)", name ? name : "-", ip ? ip : "-",
			 port, v.decision, v.reason, v.rule_id ? v.rule_id : "NULL",
			 v.would_deny, v.by_domain, w.decision, w.reason,
			 w.rule ? w.rule : "NULL", w.would_deny, w.by_domain);
}

/* CHECK: want would_deny = by_domain = 0; CHECK_F: give both flags */
#define CHECK(cfg, sbx, name, ip, st, port, dec, reason, rule) \
	check(__LINE__, cfg, sbx, name, ip, st, port, \
	      (struct want){ dec, reason, rule, 0, 0 })
#define CHECK_F(cfg, sbx, name, ip, st, port, dec, reason, rule, wd, bd) \
	check(__LINE__, cfg, sbx, name, ip, st, port, \
	      (struct want){ dec, reason, rule, wd, bd })

#define PUB "93.184.216.34"

static const char precedence_yaml[] =
	"version: 1\n"
	"floor:\n"
	"  deny:\n"
	"    - { domains: [evil.com] }\n"
	"profiles:\n"
	"  p:\n"
	"    allow: [ { domains: [prof.com, ok.com] } ]\n"
	"    deny: [ { domains: [profdeny.com] } ]\n"
	"sandboxes:\n"
	"  s:\n"
	"    profiles: [p]\n"
	"    allow:\n"
	"      - { domains: [evil.com, ok.com, \"*.both.com\", profdeny.com] }\n"
	"      - { name: db, cidrs: [10.0.0.0/8], ports: [5432] }\n"
	"    deny:\n"
	"      - { domains: [\"*.both.com\"] }\n"
	"  aud:\n"
	"    mode: audit\n"
	"    profiles: [p]\n"
	"    allow: [ { domains: [good.com] } ]\n"
	"    deny: [ { domains: [bad.com] } ]\n"
	"default: deny\n";

static void test_eval_precedence(void **state)
{
	struct sg_config *cfg;

	SG_UNUSED(state);
	cfg = load_ok(precedence_yaml);
	/* floor first: no sandbox allow widens it */
	CHECK(cfg, "s", "evil.com", PUB, 0, 443, POL_DENY, "floor_deny", "floor/deny/0");
	CHECK(cfg, "s", "evil.com", NULL, 0, 443, POL_DENY, "floor_deny", "floor/deny/0");
	/* sandbox deny before allow; a profile's deny before the own allow */
	CHECK(cfg, "s", "x.both.com", PUB, 0, 443, POL_DENY, "rule_deny",
	      "sandboxes/s/deny/0");
	CHECK(cfg, "s", "profdeny.com", PUB, 0, 443, POL_DENY, "rule_deny",
	      "profiles/p/deny/0");
	/* allow: own rules before the profiles' */
	CHECK_F(cfg, "s", "ok.com", PUB, 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/s/allow/0", 0, 1);
	CHECK_F(cfg, "s", "prof.com", PUB, 0, 443, POL_ALLOW, "rule_allow",
	      "profiles/p/allow/0", 0, 1);
	/* name-only question: the name is allowed, addresses checked later */
	CHECK_F(cfg, "s", "ok.com", NULL, 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/s/allow/0", 0, 1);
	/* default */
	CHECK(cfg, "s", "other.com", PUB, 0, 443, POL_DENY, "default_deny", NULL);
	CHECK(cfg, "s", "ok.com", PUB, 0, 80, POL_DENY, "default_deny", NULL);
	CHECK(cfg, "s", "a.x.both.com", PUB, 0, 443, POL_DENY, "default_deny", NULL);
	/* cidr rules: by address, on their port */
	CHECK(cfg, "s", NULL, "10.1.2.3", 0, 5432, POL_ALLOW, "rule_allow", "db");
	CHECK(cfg, "s", NULL, "10.1.2.3", 0, 5433, POL_DENY, "default_deny", NULL);
	CHECK(cfg, "s", NULL, "11.1.2.3", 0, 5432, POL_DENY, "default_deny", NULL);
	CHECK(cfg, "s", NULL, NULL, 0, 443, POL_DENY, "default_deny", NULL);

	/* audit mode: sandbox and default denies become would_deny */
	CHECK_F(cfg, "aud", "bad.com", PUB, 0, 443, POL_ALLOW, "rule_deny",
	      "sandboxes/aud/deny/0", 1, 0);
	CHECK_F(cfg, "aud", "profdeny.com", PUB, 0, 443, POL_ALLOW, "rule_deny",
	      "profiles/p/deny/0", 1, 0);
	CHECK_F(cfg, "aud", "other.com", PUB, 0, 443, POL_ALLOW, "default_deny", NULL, 1, 0);
	CHECK_F(cfg, "aud", "good.com", PUB, 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/aud/allow/0", 0, 1);
	CHECK_F(cfg, "aud", "prof.com", PUB, 0, 443, POL_ALLOW, "rule_allow",
	      "profiles/p/allow/0", 0, 1);
	/* ... but the floor holds in every mode */
	CHECK(cfg, "aud", "evil.com", PUB, 0, 443, POL_DENY, "floor_deny", "floor/deny/0");

	/* unknown source: the floor, then the default */
	CHECK(cfg, NULL, "evil.com", PUB, 0, 443, POL_DENY, "floor_deny", "floor/deny/0");
	CHECK(cfg, NULL, "ok.com", PUB, 0, 443, POL_DENY, "unknown_source", NULL);
	CHECK(cfg, NULL, NULL, "10.1.2.3", 0, 5432, POL_DENY, "unknown_source", NULL);
	pol_config_free(cfg);

	cfg = load_ok("version: 1\nfloor: {deny: [{domains: [evil.com]}]}\n"
		      "sandboxes: {s: {deny: [{domains: [bad.com]}]}}\n"
		      "default: allow\n");
	CHECK(cfg, "s", "other.com", PUB, 0, 443, POL_ALLOW, "default_allow", NULL);
	CHECK(cfg, "s", "other.com", PUB, 0, 22, POL_ALLOW, "default_allow", NULL);
	CHECK(cfg, "s", "bad.com", PUB, 0, 443, POL_DENY, "rule_deny", "sandboxes/s/deny/0");
	CHECK(cfg, NULL, "other.com", PUB, 0, 443, POL_ALLOW, "unknown_source", NULL);
	CHECK(cfg, NULL, "evil.com", PUB, 0, 443, POL_DENY, "floor_deny", "floor/deny/0");
	pol_config_free(cfg);
}

static const char guard_yaml[] =
	"version: 1\n"
	"gateway:\n"
	"  resolver:\n"
	"    hosts: { internal.test: [10.9.9.9] }\n"
	"sandboxes:\n"
	"  s:\n"
	"    allow:\n"
	"      - { domains: [app.com, internal.test] }\n"
	"      - { name: lan, cidrs: [192.168.0.0/16], ports: [443] }\n"
	"      - { name: both, domains: [db.corp.com], cidrs: [10.0.0.0/8] }\n"
	"  aud:\n"
	"    mode: audit\n"
	"    allow: [ { domains: [app.com] } ]\n"
	"    deny: [ { domains: [bad.com] } ]\n";

static void test_eval_internal_guard(void **state)
{
	struct sg_config *cfg;

	SG_UNUSED(state);
	cfg = load_ok(guard_yaml);
	CHECK_F(cfg, "s", "app.com", PUB, 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/s/allow/0", 0, 1);
	/* a domain rule never unlocks an internal address (DNS rebinding) */
	CHECK(cfg, "s", "app.com", "127.0.0.1", 0, 443, POL_DENY, "internal_address",
	      "sandboxes/s/allow/0");
	CHECK(cfg, "s", "app.com", "169.254.169.254", 0, 443, POL_DENY,
	      "internal_address", "sandboxes/s/allow/0");
	CHECK(cfg, "s", "app.com", "fd00::1", 0, 443, POL_DENY, "internal_address",
	      "sandboxes/s/allow/0");
	CHECK(cfg, "s", "app.com", "::ffff:127.0.0.1", 0, 443, POL_DENY,
	      "internal_address", "sandboxes/s/allow/0");
	CHECK(cfg, "s", "app.com", "::1", 0, 443, POL_DENY, "internal_address",
	      "sandboxes/s/allow/0");
	/* ... a cidrs rule does, even one later in the list */
	CHECK(cfg, "s", "app.com", "192.168.1.1", 0, 443, POL_ALLOW, "rule_allow", "lan");
	CHECK(cfg, "s", "db.corp.com", "10.1.1.1", 0, 443, POL_ALLOW, "rule_allow", "both");
	/* both conditions of a rule must hold */
	CHECK(cfg, "s", "db.corp.com", PUB, 0, 443, POL_DENY, "default_deny", NULL);
	CHECK(cfg, "s", NULL, "10.1.1.1", 0, 443, POL_DENY, "default_deny", NULL);
	/* resolver.hosts answers are the operator's own */
	CHECK_F(cfg, "s", "internal.test", "10.9.9.9", 1, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/s/allow/0", 0, 1);
	CHECK(cfg, "s", "internal.test", "10.9.9.9", 0, 443, POL_DENY,
	      "internal_address", "sandboxes/s/allow/0");
	/* enforced in audit mode too, for allows and would_denies alike */
	CHECK(cfg, "aud", "app.com", "10.0.0.1", 0, 443, POL_DENY, "internal_address",
	      "sandboxes/aud/allow/0");
	CHECK(cfg, "aud", "other.com", "10.0.0.1", 0, 443, POL_DENY, "internal_address",
	      NULL);
	CHECK(cfg, "aud", "bad.com", "10.0.0.1", 0, 443, POL_DENY, "internal_address",
	      "sandboxes/aud/deny/0");
	CHECK_F(cfg, "aud", "other.com", PUB, 0, 443, POL_ALLOW, "default_deny", NULL, 1, 0);
	/* an IP the sandbox chose (no name) is for cidr rules and the default */
	CHECK_F(cfg, "aud", NULL, "10.0.0.1", 0, 443, POL_ALLOW, "default_deny", NULL, 1, 0);
	pol_config_free(cfg);

	/* default allow does not unlock an internal address for a name either */
	cfg = load_ok("version: 1\nsandboxes: {s: {}}\ndefault: allow\n");
	CHECK(cfg, "s", "x.com", "10.0.0.1", 0, 443, POL_DENY, "internal_address", NULL);
	CHECK(cfg, "s", "x.com", "10.0.0.1", 1, 443, POL_ALLOW, "default_allow", NULL);
	CHECK(cfg, "s", NULL, "10.0.0.1", 0, 443, POL_ALLOW, "default_allow", NULL);
	CHECK(cfg, NULL, "x.com", "10.0.0.1", 0, 443, POL_DENY, "internal_address", NULL);
	CHECK(cfg, NULL, "x.com", PUB, 0, 443, POL_ALLOW, "unknown_source", NULL);
	pol_config_free(cfg);
}

static const char need_floor_yaml[] =
	"version: 1\n"
	"floor:\n"
	"  deny:\n"
	"    - cidrs: [169.254.0.0/16]\n"
	"sandboxes:\n"
	"  s:\n"
	"    allow: [ { domains: [api.com] } ]\n"
	"    deny: [ { domains: [bad.com] } ]\n"
	"  aud:\n"
	"    mode: audit\n"
	"    deny: [ { domains: [bad.com] } ]\n";

static const char need_yaml[] =
	"version: 1\n"
	"sandboxes:\n"
	"  s:\n"
	"    allow:\n"
	"      - { domains: [api.com] }\n"
	"      - { cidrs: [10.0.0.0/8], ports: [5432] }\n"
	"    deny:\n"
	"      - { cidrs: [10.66.0.0/16], ports: [5432] }\n"
	"  e:\n"
	"    deny:\n"
	"      - { cidrs: [192.0.2.0/24] }\n"
	"      - { domains: [x.com] }\n"
	"  o:\n"
	"    allow:\n"
	"      - { cidrs: [192.0.2.0/24] }\n"
	"      - { domains: [api.com] }\n";

static void test_eval_need_addr(void **state)
{
	struct sg_config *cfg;

	SG_UNUSED(state);
	cfg = load_ok(need_floor_yaml);
	/* a floor cidr could still deny the allowed name: resolve first */
	CHECK(cfg, "s", "api.com", NULL, 0, 443, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, "s", "api.com", "169.254.169.254", 0, 443, POL_DENY, "floor_deny",
	      "floor/deny/0");
	CHECK_F(cfg, "s", "api.com", PUB, 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/s/allow/0", 0, 1);
	/* a deny no address can undo needs no address */
	CHECK(cfg, "s", "bad.com", NULL, 0, 443, POL_DENY, "rule_deny",
	      "sandboxes/s/deny/0");
	CHECK(cfg, "s", "other.com", NULL, 0, 443, POL_DENY, "default_deny", NULL);
	/* audit mode: the floor decides between deny and would_deny */
	CHECK(cfg, "aud", "bad.com", NULL, 0, 443, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, "aud", "other.com", NULL, 0, 443, POL_NEED_ADDR, "need_addr", NULL);
	CHECK_F(cfg, "aud", "bad.com", PUB, 0, 443, POL_ALLOW, "rule_deny",
	      "sandboxes/aud/deny/0", 1, 0);
	/* unknown source */
	CHECK(cfg, NULL, "api.com", NULL, 0, 443, POL_DENY, "unknown_source", NULL);
	pol_config_free(cfg);

	cfg = load_ok("version: 1\nfloor: {deny: [{cidrs: [169.254.0.0/16]}]}\n"
		      "default: allow\n");
	CHECK(cfg, NULL, "api.com", NULL, 0, 443, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, NULL, "api.com", PUB, 0, 443, POL_ALLOW, "unknown_source", NULL);
	pol_config_free(cfg);

	cfg = load_ok(need_yaml);
	/* no cidr rule applies on 443: the name alone decides */
	CHECK_F(cfg, "s", "api.com", NULL, 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/s/allow/0", 0, 1);
	CHECK(cfg, "s", "other.com", NULL, 0, 443, POL_DENY, "default_deny", NULL);
	/* on 5432 both a deny and an allow cidr rule could apply */
	CHECK(cfg, "s", "db.com", NULL, 0, 5432, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, "s", NULL, NULL, 0, 5432, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, "s", "db.com", "10.66.1.1", 0, 5432, POL_DENY, "rule_deny",
	      "sandboxes/s/deny/0");
	CHECK(cfg, "s", "db.com", "10.1.1.1", 0, 5432, POL_ALLOW, "rule_allow",
	      "sandboxes/s/allow/1");
	CHECK(cfg, "s", "db.com", PUB, 0, 5432, POL_DENY, "default_deny", NULL);
	/* enforce: a definite deny after an undecided one is final */
	CHECK(cfg, "e", "x.com", NULL, 0, 443, POL_DENY, "rule_deny", "sandboxes/e/deny/1");
	/* pending denies alone cannot turn the default deny into an allow */
	CHECK(cfg, "e", "y.com", NULL, 0, 443, POL_DENY, "default_deny", NULL);
	CHECK(cfg, "e", "y.com", "192.0.2.1", 0, 443, POL_DENY, "rule_deny",
	      "sandboxes/e/deny/0");
	/* an undecided allow before the definite one: resolve first */
	CHECK(cfg, "o", "api.com", NULL, 0, 443, POL_NEED_ADDR, "need_addr", NULL);
	CHECK(cfg, "o", "api.com", "192.0.2.1", 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/o/allow/0");
	CHECK_F(cfg, "o", "api.com", PUB, 0, 443, POL_ALLOW, "rule_allow",
	      "sandboxes/o/allow/1", 0, 1);
	CHECK(cfg, "o", "other.com", NULL, 0, 443, POL_NEED_ADDR, "need_addr", NULL);
	pol_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_config),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_bad_domain_patterns),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_domain_match),
		cmocka_unit_test(test_domain_match_random),
		cmocka_unit_test(test_cidr_match),
		cmocka_unit_test(test_ports),
		cmocka_unit_test(test_sandbox_lookup),
		cmocka_unit_test(test_eval_precedence),
		cmocka_unit_test(test_eval_internal_guard),
		cmocka_unit_test(test_eval_need_addr),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
