/*
 * pol_explain.c - `sandgate policy explain`: what the gateway would decide
 * for one destination and one sandbox, and why, without connecting.
 *
 * The steps are the gateway's (gateway/conn.c decide/addresses_ready): the
 * name alone first; if that might allow, its addresses (resolver.hosts,
 * else DNS through the configured servers, c-ares run to completion right
 * here: a CLI may block), each judged again; the first allowed address
 * decides, else the last verdict. Only DNS queries leave the process, and
 * only for a name the policy might allow, as in the gateway.
 *
 * Borrows the config; output goes to the caller's FILE. Returns 0 allowed
 * (or would_deny in audit mode: traffic flows), 1 denied or undecided,
 * 2 a target that does not parse, SG_ENOMEM/SG_EIO (message in err).
 */
#include <ares.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_json.h"
#include "sg_str.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

/* As many addresses as the gateway tries (GW_RESOLVE_MAX_ADDRS). */
#define EX_MAX_ADDRS 8
#define EX_JSON_MAX  65536

struct ex_target {
	char host[SG_HOST_MAX + 1];     /* normalised name, or the IP as given */
	int is_ip;
	struct sg_addr ip;
	int port;
};

struct ex_res {
	int done, status;
	size_t n;
	struct sg_addr addrs[EX_MAX_ADDRS];
};

struct ex_addr {
	struct sg_addr a;
	struct pol_verdict v;
	struct pol_geo_info gi;
};

struct ex {
	const struct sg_config *cfg;
	const struct pol_explain_opts *o;
	struct ex_target t;
	const struct pol_sandbox *sbx;
	struct pol_verdict name_v;      /* name targets: the first judgement */
	const char *resolution;         /* none|static|dns|skipped|nxdomain|timeout|failed */
	struct ex_addr addrs[EX_MAX_ADDRS];
	size_t n_addrs;
	struct pol_verdict final;
	const char *note;               /* what else the reader should know, or NULL */
};

/* ---- the target ------------------------------------------------------- */

static int ex_scheme_port(const char *s, size_t n)
{
	static const struct {
		const char *name;
		int port;
	} schemes[] = { { "https", 443 }, { "http", 80 }, { "wss", 443 }, { "ws", 80 } };
	size_t i;

	for (i = 0; i < SG_ARRAY_LEN(schemes); i++)
		if (strlen(schemes[i].name) == n && sg_strncaseeq(s, schemes[i].name, n))
			return schemes[i].port;
	return -1;
}

/*
 * "https://host[:port]/path", "HOST[:PORT]", "[v6]:PORT", or an address
 * (IPv6 without brackets too). Port by scheme, else 443.
 */
static int ex_parse_target(const char *s, struct ex_target *t, char *err, size_t errsz)
{
	char host[SG_HOST_MAX + 64];
	const char *auth = s, *sep, *at, *end;
	size_t alen;
	int defport = 443;

	memset(t, 0, sizeof(*t));
	/* Only schemes whose default port is certain: guessing one for
	 * ftp:// or a typo would explain a connection nobody makes. */
	sep = strstr(s, "://");
	if (sep) {
		defport = ex_scheme_port(s, (size_t)(sep - s));
		if (defport < 0) {
			snprintf(err, errsz, "%s: unknown scheme (http, https, ws, wss)", s);
			return 2;
		}
		auth = sep + 3;
	}
	end = auth + strcspn(auth, "/?#");
	/* userinfo is not part of the destination */
	for (at = end; at > auth && at[-1] != '@'; at--)
		;
	if (at > auth)
		auth = at;
	alen = (size_t)(end - auth);
	/* A bare IPv6 address has colons sg_hostport_split would read as a
	 * port: try the whole authority as an address first. */
	if (alen && alen < sizeof(host)) {
		memcpy(host, auth, alen);
		host[alen] = '\0';
		if (sg_addr_parse(host, alen, &t->ip) == 0) {
			t->is_ip = 1;
			t->port = defport;
			sg_addr_str(&t->ip, t->host, sizeof(t->host));
			return 0;
		}
	}
	if (!alen || sg_hostport_split(auth, alen, host, sizeof(host), defport, &t->port))
		goto bad;
	if (sg_addr_parse(host, strlen(host), &t->ip) == 0) {
		t->is_ip = 1;
		sg_addr_str(&t->ip, t->host, sizeof(t->host));
		return 0;
	}
	/* the gateway judges names lower-case without the trailing dot */
	if (sg_host_normalize(host, strlen(host), t->host) < 0)
		goto bad;
	return 0;
bad:
	snprintf(err, errsz, "%s: expected a URL, HOST[:PORT] or an IP address", s);
	return 2;
}

/* ---- resolving --------------------------------------------------------- */

static void ex_ares_cb(void *arg, int status, int timeouts, struct ares_addrinfo *ai)
{
	struct ex_res *r = arg;
	struct ares_addrinfo_node *n;

	SG_UNUSED(timeouts);
	r->done = 1;
	r->status = status;
	for (n = ai ? ai->nodes : NULL; n && r->n < EX_MAX_ADDRS; n = n->ai_next)
		if (sg_addr_from_sa(n->ai_addr, &r->addrs[r->n]) >= 0)
			r->n++;
	if (ai)
		ares_freeaddrinfo(ai);
}

/* The gateway's resolver settings (gateway/resolver.c), synchronously. */
static int ex_resolve(const struct sg_config *cfg, const char *name, struct ex_res *r,
		      char *err, size_t errsz)
{
	struct ares_addrinfo_hints hints;
	struct ares_options opts;
	char lookups[] = "b";   /* DNS only, never the host's /etc/hosts */
	ares_channel ch;
	int rc;

	memset(&opts, 0, sizeof(opts));
	opts.timeout = (int)SG_MAX(cfg->resolver_timeout_ms / 3, 100);
	opts.tries = 2;
	opts.lookups = lookups;
	rc = ares_init_options(&ch, &opts, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
			       ARES_OPT_LOOKUPS);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errsz, "resolver: %s", ares_strerror(rc));
		return SG_EIO;
	}
	if (cfg->resolver_servers &&
	    (rc = ares_set_servers_ports_csv(ch, cfg->resolver_servers)) != ARES_SUCCESS) {
		snprintf(err, errsz, "resolver servers \"%s\": %s", cfg->resolver_servers,
			 ares_strerror(rc));
		ares_destroy(ch);
		return SG_EIO;
	}
	/* A and AAAA in the server's order, like the gateway: sorting would
	 * change which address decides. */
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_flags = ARES_AI_NOSORT;
	ares_getaddrinfo(ch, name, NULL, &hints, ex_ares_cb, r);
	while (!r->done) {
		ares_socket_t socks[ARES_GETSOCK_MAXNUM];
		struct pollfd pfd[ARES_GETSOCK_MAXNUM];
		struct timeval tv, *tvp;
		/* the bits by hand: c-ares' ARES_GETSOCK_WRITABLE shifts a
		 * signed 1 into the sign bit for the last socket */
		unsigned bits = (unsigned)ares_getsock(ch, socks, ARES_GETSOCK_MAXNUM);
		int i, n = 0, ms;

		for (i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
			unsigned rd = bits & 1u << i, wr = bits & 1u << (i + ARES_GETSOCK_MAXNUM);

			if (!rd && !wr)
				continue;
			pfd[n].fd = socks[i];
			pfd[n].events = (short)((rd ? POLLIN : 0) | (wr ? POLLOUT : 0));
			pfd[n++].revents = 0;
		}
		tvp = ares_timeout(ch, NULL, &tv);
		ms = tvp ? (int)(tvp->tv_sec * 1000 + tvp->tv_usec / 1000) + 1 : 1000;
		if (poll(pfd, (nfds_t)n, ms) <= 0) {
			ares_process_fd(ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
			continue;
		}
		for (i = 0; i < n; i++)
			ares_process_fd(ch, pfd[i].revents & (POLLIN | POLLERR | POLLHUP) ?
					pfd[i].fd : ARES_SOCKET_BAD,
					pfd[i].revents & POLLOUT ? pfd[i].fd : ARES_SOCKET_BAD);
	}
	ares_destroy(ch);
	return 0;
}

/* ---- judging ------------------------------------------------------------ */

static const struct pol_static_host *ex_static(const struct sg_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < cfg->n_hosts; i++)
		if (!strcmp(cfg->hosts[i].name, name))
			return &cfg->hosts[i];
	return NULL;
}

/* One address as the gateway would judge it: with the name (domain rules
 * and the internal-address guard apply), static answers exempt. */
static void ex_judge_addr(struct ex *x, const struct sg_addr *a, int is_static)
{
	struct ex_addr *e = &x->addrs[x->n_addrs++];
	struct pol_query q = { .sbx = x->sbx, .name = x->t.is_ip ? NULL : x->t.host,
			       .addr = a, .addr_static = is_static,
			       .port = (uint16_t)x->t.port };

	e->a = *a;
	pol_eval(x->cfg, &q, &e->v);
	pol_geo_lookup(x->cfg, a, &e->gi);
}

static void ex_set(struct pol_verdict *v, enum pol_decision d, const char *reason)
{
	memset(v, 0, sizeof(*v));
	v->decision = d;
	v->reason = reason;
}

static int ex_run(struct ex *x, char *err, size_t errsz)
{
	const struct pol_static_host *sh;
	struct pol_query q = { .sbx = x->sbx, .port = (uint16_t)x->t.port };
	struct ex_res res;
	size_t i;
	int rc;

	if (x->t.is_ip) {
		/* an address the sandbox dialled: address rules and the default */
		x->resolution = "none";
		ex_judge_addr(x, &x->t.ip, 0);
		x->final = x->addrs[0].v;
		return 0;
	}
	q.name = x->t.host;
	pol_eval(x->cfg, &q, &x->name_v);
	if (x->name_v.decision == POL_DENY) {
		x->resolution = "skipped";
		x->note = "denied by name: the gateway would not resolve it";
		x->final = x->name_v;
		return 0;
	}
	/* resolver.hosts answers are the operator's own: never sent to DNS,
	 * and exempt from the internal-address guard */
	sh = ex_static(x->cfg, x->t.host);
	if (sh) {
		x->resolution = "static";
		for (i = 0; i < sh->n_addrs && i < EX_MAX_ADDRS; i++)
			ex_judge_addr(x, &sh->addrs[i], 1);
	} else if (x->o->no_resolve) {
		x->resolution = "skipped";
		x->final = x->name_v;
		x->note = x->name_v.decision == POL_ALLOW ?
			  "not resolved (--no-resolve): each address would still be "
			  "checked against the floor, address rules and the "
			  "internal-address guard" :
			  "not resolved (--no-resolve): the decision depends on the address";
		return 0;
	} else {
		memset(&res, 0, sizeof(res));
		rc = ex_resolve(x->cfg, x->t.host, &res, err, errsz);
		if (rc)
			return rc;
		x->resolution = res.n ? "dns" :
				res.status == ARES_ETIMEOUT ? "timeout" :
				res.status == ARES_SUCCESS || res.status == ARES_ENOTFOUND ||
				res.status == ARES_ENODATA ? "nxdomain" : "failed";
		for (i = 0; i < res.n; i++)
			ex_judge_addr(x, &res.addrs[i], 0);
	}
	/* the first allowed address is the one the gateway connects to */
	for (i = 0; i < x->n_addrs; i++)
		if (x->addrs[i].v.decision == POL_ALLOW) {
			x->final = x->addrs[i].v;
			return 0;
		}
	if (x->n_addrs) {
		x->final = x->addrs[x->n_addrs - 1].v;
		return 0;
	}
	/* nothing to judge: the name alone was allowed, the resolver failed;
	 * or only an address could have allowed it */
	if (x->name_v.decision == POL_ALLOW || x->name_v.name_allowed)
		ex_set(&x->final, POL_DENY, !strcmp(x->resolution, "timeout") ?
		       "resolve_timeout" : !strcmp(x->resolution, "nxdomain") ?
		       "resolve_nxdomain" : "resolve_failed");
	else
		ex_set(&x->final, POL_DENY, x->sbx ? "default_deny" : "unknown_source");
	return 0;
}

/* ---- printing ------------------------------------------------------------ */

const char *pol_verdict_step(const struct sg_config *cfg, const struct pol_verdict *v,
			     char *list, size_t listsz)
{
	const struct pol_rule *r = v->rule;
	size_t i;

#define IN(rs) (r && (rs).n && r >= (rs).rules && r < (rs).rules + (rs).n)
	if (list && listsz)
		list[0] = '\0';
	if (list && IN(cfg->floor_deny))
		snprintf(list, listsz, "floor/deny");
	for (i = 0; list && i < cfg->n_profiles; i++) {
		if (IN(cfg->profiles[i].allow))
			snprintf(list, listsz, "profiles/%s/allow", cfg->profiles[i].name);
		if (IN(cfg->profiles[i].deny))
			snprintf(list, listsz, "profiles/%s/deny", cfg->profiles[i].name);
	}
	for (i = 0; list && i < cfg->n_sandboxes; i++) {
		if (IN(cfg->sandboxes[i].allow))
			snprintf(list, listsz, "sandboxes/%s/allow", cfg->sandboxes[i].name);
		if (IN(cfg->sandboxes[i].deny))
			snprintf(list, listsz, "sandboxes/%s/deny", cfg->sandboxes[i].name);
	}
#undef IN
	if (v->decision == POL_NEED_ADDR)
		return "undecided";
	if (!strcmp(v->reason, "floor_deny"))
		return "floor";
	if (!strcmp(v->reason, "rule_deny"))
		return "deny";
	if (!strcmp(v->reason, "rule_allow"))
		return "allow";
	if (!strcmp(v->reason, "internal_address"))
		return "internal_address_guard";
	if (!strncmp(v->reason, "resolve_", 8))
		return "resolver";
	return "default";
}

static const char *ex_decision(const struct pol_verdict *v)
{
	if (v->decision == POL_NEED_ADDR)
		return "undecided";
	if (v->decision == POL_DENY)
		return "deny";
	return v->would_deny ? "would_deny" : "allow";
}

/* Human words for the step, with the list it came from. */
static void ex_step_text(const struct sg_config *cfg, const struct pol_verdict *v,
			 char *out, size_t outsz)
{
	static const struct {
		const char *step, *text;
	} words[] = {
		{ "floor", "the floor (organisation baseline)" },
		{ "deny", "a deny rule" },
		{ "allow", "an allow rule" },
		{ "default", "the default" },
		{ "internal_address_guard", "the internal-address guard (a name may "
					    "not resolve to a private address)" },
		{ "resolver", "the resolver (the name was allowed but did not resolve)" },
		{ "undecided", "nothing yet: it depends on the address" },
	};
	char list[CFG_WHERE_MAX + 16];
	const char *step = pol_verdict_step(cfg, v, list, sizeof(list));
	size_t i;

	for (i = 0; i < SG_ARRAY_LEN(words); i++)
		if (!strcmp(words[i].step, step))
			break;
	snprintf(out, outsz, "%s%s%s%s", i < SG_ARRAY_LEN(words) ? words[i].text : step,
		 *list ? " in " : "", list,
		 !strcmp(v->reason, "unknown_source") ? " for an unknown source" : "");
}

static void ex_geo_text(const struct ex *x, const struct pol_geo_info *gi, char *out,
			size_t outsz)
{
	size_t off = 0;

	out[0] = '\0';
	if (x->cfg->geoip_country)
		off += (size_t)snprintf(out + off, outsz - off, "  country %s",
					gi->country[0] ? gi->country : "-");
	if (x->cfg->geoip_asn && off < outsz) {
		if (gi->asn)
			snprintf(out + off, outsz - off, "  AS%u", (unsigned)gi->asn);
		else
			snprintf(out + off, outsz - off, "  AS-");
	}
}

static void ex_print_text(const struct ex *x, FILE *out)
{
	char ip[INET6_ADDRSTRLEN], geo[64], step[CFG_WHERE_MAX + 160];
	const struct pol_verdict *f = &x->final;
	size_t i;
	int w;

	fprintf(out, "target    %s -> %s port %d\n", x->o->target, x->t.host, x->t.port);
	if (x->sbx)
		fprintf(out, "sandbox   %s (matches \"%s\", mode %s)\n", x->o->sandbox,
			x->sbx->name, x->sbx->mode == POL_MODE_AUDIT ? "audit" : "enforce");
	else
		fprintf(out, "sandbox   %s: no sandbox matches this name; judged as an "
			"unknown source\n", x->o->sandbox);
	if (!x->t.is_ip && x->name_v.decision == POL_NEED_ADDR)
		fprintf(out, "name      undecided: %s\n", x->name_v.name_allowed ?
			"allowed by name unless a rule on the address denies it" :
			"only a rule on the address could allow it");
	else if (!x->t.is_ip)
		fprintf(out, "name      %s (%s%s%s)\n", ex_decision(&x->name_v),
			x->name_v.reason, x->name_v.rule_id ? ", " : "",
			x->name_v.rule_id ? x->name_v.rule_id : "");
	if (!strcmp(x->resolution, "static"))
		fprintf(out, "resolved  %zu address%s from resolver.hosts\n", x->n_addrs,
			x->n_addrs == 1 ? "" : "es");
	else if (!strcmp(x->resolution, "dns"))
		fprintf(out, "resolved  %zu address%s from DNS\n", x->n_addrs,
			x->n_addrs == 1 ? "" : "es");
	else if (strcmp(x->resolution, "none") && strcmp(x->resolution, "skipped"))
		fprintf(out, "resolved  no addresses (%s)\n", x->resolution);
	for (i = 0, w = 15; i < x->n_addrs; i++)
		w = SG_MAX(w, (int)strlen(sg_addr_str(&x->addrs[i].a, ip, sizeof(ip))));
	for (i = 0; i < x->n_addrs; i++) {
		const struct ex_addr *e = &x->addrs[i];

		ex_geo_text(x, &e->gi, geo, sizeof(geo));
		fprintf(out, "  %-*s  %-10s %-16s %s%s\n", w, sg_addr_str(&e->a, ip, sizeof(ip)),
			ex_decision(&e->v), e->v.reason, e->v.rule_id ? e->v.rule_id : "-", geo);
	}
	if (x->note)
		fprintf(out, "note      %s\n", x->note);
	ex_step_text(x->cfg, f, step, sizeof(step));
	fprintf(out, "decision  %s\n", ex_decision(f));
	fprintf(out, "rule      %s\n", f->rule_id ? f->rule_id : "-");
	fprintf(out, "reason    %s\n", f->reason);
	fprintf(out, "step      %s\n", step);
}

static void ex_json_verdict(struct sg_json *j, const struct sg_config *cfg,
			    const struct pol_verdict *v)
{
	char list[CFG_WHERE_MAX + 16];
	const char *step = pol_verdict_step(cfg, v, list, sizeof(list));

	sg_json_str(j, "decision", ex_decision(v));
	sg_json_str(j, "reason", v->reason);
	sg_json_str(j, "rule", v->rule_id);
	sg_json_str(j, "step", step);
	sg_json_str(j, "list", *list ? list : NULL);
}

/*
 * One object. sg_json writes flat objects into fixed buffers; the nested
 * parts (name_phase, each address) are written on their own and spliced
 * in as raw fragments. Sizes: a target is bounded by the command line,
 * eight addresses by EX_MAX_ADDRS.
 */
static int ex_print_json(const struct ex *x, FILE *out, char *err, size_t errsz)
{
	char *buf = malloc(EX_JSON_MAX), *arr = malloc(EX_JSON_MAX), one[2048], ip[64];
	struct sg_json j, a;
	size_t i, off = 0;
	int rc = SG_ENOMEM, n;

	if (!buf || !arr)
		goto out;
	arr[off++] = '[';
	for (i = 0; i < x->n_addrs; i++) {
		const struct ex_addr *e = &x->addrs[i];

		sg_json_init(&a, one, sizeof(one));
		sg_json_begin(&a);
		sg_json_str(&a, "ip", sg_addr_str(&e->a, ip, sizeof(ip)));
		ex_json_verdict(&a, x->cfg, &e->v);
		if (e->gi.country[0])
			sg_json_str(&a, "country", e->gi.country);
		else
			sg_json_null(&a, "country");
		if (e->gi.asn)
			sg_json_int(&a, "asn", e->gi.asn);
		else
			sg_json_null(&a, "asn");
		n = sg_json_end(&a);
		if (n < 0 || off + (size_t)n + 2 >= EX_JSON_MAX)
			goto overflow;
		if (i)
			arr[off++] = ',';
		memcpy(arr + off, one, (size_t)n);
		off += (size_t)n;
	}
	arr[off++] = ']';
	sg_json_init(&j, buf, EX_JSON_MAX);
	sg_json_begin(&j);
	sg_json_str(&j, "target", x->o->target);
	sg_json_str(&j, "host", x->t.host);
	sg_json_bool(&j, "is_ip", x->t.is_ip);
	sg_json_int(&j, "port", x->t.port);
	sg_json_str(&j, "sandbox", x->o->sandbox);
	sg_json_str(&j, "sandbox_match", x->sbx ? x->sbx->name : NULL);
	sg_json_str(&j, "mode", !x->sbx ? NULL : x->sbx->mode == POL_MODE_AUDIT ? "audit" :
		    "enforce");
	if (x->t.is_ip) {
		sg_json_null(&j, "name_phase");
	} else {
		sg_json_init(&a, one, sizeof(one));
		sg_json_begin(&a);
		ex_json_verdict(&a, x->cfg, &x->name_v);
		sg_json_bool(&a, "name_allowed", x->name_v.decision == POL_ALLOW ||
			     x->name_v.name_allowed);
		n = sg_json_end(&a);
		if (n < 0)
			goto overflow;
		sg_json_raw(&j, "name_phase", one, (size_t)n);
	}
	sg_json_str(&j, "resolution", x->resolution);
	sg_json_raw(&j, "addresses", arr, off);
	ex_json_verdict(&j, x->cfg, &x->final);
	sg_json_bool(&j, "would_deny", x->final.would_deny);
	sg_json_str(&j, "note", x->note);
	n = sg_json_end(&j);
	if (n < 0)
		goto overflow;
	fprintf(out, "%s\n", buf);
	rc = 0;
	goto out;
overflow:
	snprintf(err, errsz, "explain: output too large");
	rc = SG_EIO;
out:
	if (rc == SG_ENOMEM)
		snprintf(err, errsz, "explain: out of memory");
	free(buf);
	free(arr);
	return rc;
}

int pol_explain(const struct sg_config *cfg, const struct pol_explain_opts *o,
		FILE *out, char *err, size_t errsz)
{
	struct ex x;
	int rc;

	memset(&x, 0, sizeof(x));
	x.cfg = cfg;
	x.o = o;
	rc = ex_parse_target(o->target, &x.t, err, errsz);
	if (rc)
		return rc;
	/* by name, the way an adapter registers one; no match: unknown source */
	x.sbx = pol_sandbox_by_name(cfg, o->sandbox);
	rc = ex_run(&x, err, errsz);
	if (rc)
		return rc;
	rc = o->json ? ex_print_json(&x, out, err, errsz) : (ex_print_text(&x, out), 0);
	if (rc)
		return rc;
	return x.final.decision == POL_ALLOW ? 0 : 1;
}
