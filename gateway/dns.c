/*
 * dns.c - the DNS responder's decisions (see dns.h, docs/dns.md): what a
 * query gets, its audit record, its metrics. dns_io.c moves the bytes.
 *
 *   parse (dns_msg.c) -> sandbox by source address -> limits (dns_limit.c)
 *   -> type and name checks -> policy on the name, any port (pol_dns.c)
 *   -> [A/AAAA] addresses: resolver.hosts, the answer cache, or the
 *      resolver (the query waits, the loop goes on) -> each address judged
 *      again (rebinding guard, floor CIDRs) -> answer, learn, audit
 *
 * The answer cache is per worker and per policy snapshot: for a (sandbox
 * rule set, name) it keeps the name's verdict and the judged addresses
 * until their TTL, so a repeated query costs a hash probe and no policy
 * evaluation. It is direct-mapped (a collision just evaluates again) and
 * allocation-free except for static answers with more addresses than an
 * entry holds inline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_log.h"
#include "audit/aud.h"
#include "gateway/dns_int.h"
#include "sg_poison.h"

/* ------------------------------------------------------------------ audit */

static void fmt_src(const struct sg_addr *a, uint16_t port, char *out, size_t outsz)
{
	char ip[INET6_ADDRSTRLEN];

	sg_addr_str(a, ip, sizeof(ip));
	snprintf(out, outsz, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, port);
}

/* The emit callback of dns_limit.c, and the writer of every dns record. */
void dns_audit(void *arg, const struct dns_rec *r)
{
	struct gw_dns *g = arg;
	struct aud_rec ar;
	char tb[16];

	aud_rec_begin(&ar, "dns");
	aud_rec_decision(&ar, r->sandbox, r->decision, r->reason, r->rule);
	sg_json_str(&ar.j, "src", r->src);
	sg_json_str(&ar.j, "proto", r->proto);
	/* dst_host, as in connection records, is the name the policy judged
	 * (so `audit query --host` and reports find DNS records too); qname
	 * is what was asked, in presentation form when it is not a host name. */
	sg_json_str(&ar.j, "dst_host", r->host_ok ? r->qname : NULL);
	sg_json_str(&ar.j, "qname", r->qname);
	if (r->qname)
		sg_json_str(&ar.j, "qtype", dns_type_str(r->qtype, tb, sizeof(tb)));
	else
		sg_json_null(&ar.j, "qtype");
	sg_json_str(&ar.j, "rcode", dns_rcode_str(r->rcode));
	sg_json_int(&ar.j, "answers", r->answers);
	sg_json_int(&ar.j, "count", (int64_t)r->count);
	if (r->kind != DNS_REC_QUERY) {
		sg_json_str(&ar.j, "aggregate", r->kind == DNS_REC_AGGREGATE ? "window" : "burst");
		sg_json_int(&ar.j, "span_ms", r->span_ms);
	}
	aud_rec_submit(g->d->audit, &ar);
}

static const char *decision_of(const struct pol_verdict *v)
{
	if (v->decision == POL_DENY)
		return "deny";
	return v->would_deny ? "would_deny" : "allow";
}

/* An allow whose name matched but whose address is still to be judged
 * (POL_NEED_ADDR) has no address in a DNS answer to judge: name_allowed. */
static const char *reason_of(const struct pol_verdict *v)
{
	return v->decision == POL_NEED_ADDR ? "name_allowed" : v->reason;
}

/*
 * Count and record one answered query. Denials are always written;
 * allowed answers only as the first of their kind in the window (the
 * rest go into the window's aggregate record).
 */
static void dns_note(struct gw_dns_worker *dw, const struct dns_ctx *c,
		     const struct pol_sandbox *sbx, int rcode, const char *decision,
		     const char *reason, const char *rule, unsigned answers)
{
	char src[INET6_ADDRSTRLEN + 8];
	struct dns_rec r = {
		.kind = DNS_REC_QUERY,
		.sandbox = c->sandbox[0] ? c->sandbox : NULL,
		.src = src,
		.proto = c->tcp ? "tcp" : "udp",
		.qname = c->name_ok ? c->name : c->q.has_question ? c->q.qtext : NULL,
		.host_ok = c->name_ok,
		.qtype = c->q.qtype,
		.rcode = rcode,
		.decision = decision,
		.reason = reason,
		.rule = rule,
		.answers = answers,
		.count = 1,
	};

	gw_metrics_count(&dw->metrics, sbx ? sbx->name : "", decision, reason);
	fmt_src(&c->src, c->src_port, src, sizeof(src));
	if (strcmp(decision, "deny") && c->name_ok &&
	    !dns_limits_count(dw->g->limits, &c->id, &r, gw_loop_now(dw->w->loop)))
		return;
	dns_audit(dw->g, &r);
}

/* ------------------------------------------------------------ responses */

static long reply_tc(struct gw_dns_worker *dw, const struct dns_ctx *c, int rcode,
		     uint16_t rrtype, const struct sg_addr *a, size_t n, uint32_t ttl,
		     uint8_t *out, size_t cap, int *truncated)
{
	size_t len, limit = c->tcp ? DNS_TCP_MAX : dns_udp_limit(&c->q);
	int tc = 0;

	if (c->q.has_question)
		len = dns_build_response(&c->q, rcode, rrtype, a, n, ttl, limit, out, cap, &tc);
	else
		len = c->raw ? dns_build_bare(c->raw, c->raw_len, rcode, out, cap) : 0;
	if (truncated)
		*truncated = tc;
	if (tc)
		atomic_fetch_add_explicit(&dw->truncated, 1, memory_order_relaxed);
	if (rcode == DNS_R_BADVERS)
		atomic_fetch_add_explicit(&dw->badvers, 1, memory_order_relaxed);
	else if (rcode >= 0 && rcode < 6)
		atomic_fetch_add_explicit(&dw->rcodes[rcode], 1, memory_order_relaxed);
	return (long)len;
}

static long reply(struct gw_dns_worker *dw, const struct dns_ctx *c, int rcode, uint16_t rrtype,
		  const struct sg_addr *a, size_t n, uint32_t ttl, uint8_t *out, size_t cap)
{
	return reply_tc(dw, c, rcode, rrtype, a, n, ttl, out, cap, NULL);
}

/* A refusal or error answer with its record. */
static long refuse(struct gw_dns_worker *dw, const struct dns_ctx *c,
		   const struct pol_sandbox *sbx, int rcode, const char *reason, const char *rule,
		   uint8_t *out, size_t cap)
{
	dns_note(dw, c, sbx, rcode, "deny", reason, rule, 0);
	return reply(dw, c, rcode, 0, NULL, 0, 0, out, cap);
}

/* ------------------------------------------------------- policy and cache */

/* Follow the worker's snapshot: a new one empties the cache (the entries
 * borrow rule pointers from the old one) and the per-sandbox port sets. */
static void view_sync(struct gw_dns_worker *dw)
{
	const struct gw_snap *s = dw->w->snap;
	size_t i;

	if (dw->gen == s->generation)
		return;
	for (i = 0; i < dw->n_ports; i++)
		pol_ports_free(dw->ports[i]);
	free(dw->ports);
	dw->n_ports = s->cfg->n_sandboxes + 1;
	dw->ports = calloc(dw->n_ports, sizeof(*dw->ports));
	if (!dw->ports)
		dw->n_ports = 0;
	dw->gen = s->generation;
}

/* NULL (on allocation failure) makes pol_dns.c build one per call. */
static const struct pol_ports *view_ports(struct gw_dns_worker *dw, const struct pol_sandbox *sbx)
{
	const struct sg_config *cfg = cfg_of(dw);
	size_t i = sbx ? (size_t)(sbx - cfg->sandboxes) : cfg->n_sandboxes;

	if (i >= dw->n_ports)
		return NULL;
	if (!dw->ports[i])
		dw->ports[i] = pol_ports_new(cfg, sbx);
	return dw->ports[i];
}

static const struct pol_static_host *static_lookup(const struct sg_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < cfg->n_hosts; i++)
		if (!strcmp(cfg->hosts[i].name, name))
			return &cfg->hosts[i];
	return NULL;
}

static uint64_t cent_hash(const struct pol_sandbox *sbx, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)(uintptr_t)sbx;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 0x100000001b3ULL;
	h ^= h >> 29;
	return h;
}

static void cent_addrs_release(struct dns_cent *e)
{
	if (e->a && e->a != e->inl)
		free(e->a);
	e->a = e->inl;
	e->n4 = e->n6 = e->rm4 = e->rm6 = 0;
	e->res = RES_NONE;
	e->learned_until[0] = e->learned_until[1] = 0;
}

/*
 * Judge each address, keep the allowed ones (IPv4 first, then IPv6).
 * An address is kept when the name could connect to it on some port:
 * floor and deny CIDRs, and the internal-address guard (only a cidrs rule
 * unlocks an internal address; resolver.hosts answers are exempt).
 */
static void cent_set_addrs(struct gw_dns_worker *dw, struct dns_cent *e,
			   const struct sg_addr *addrs, size_t n, int is_static, int64_t expires)
{
	const struct sg_config *cfg = cfg_of(dw);
	const struct pol_ports *ps = view_ports(dw, e->sbx);
	size_t i, k = 0, pass;

	cent_addrs_release(e);
	if (n > DNS_MAX_ANSWERS * 2)
		n = DNS_MAX_ANSWERS * 2;
	if (n > DNS_INLINE_ADDRS) {
		e->a = malloc(n * sizeof(*e->a));
		if (!e->a) {
			e->a = e->inl;
			n = DNS_INLINE_ADDRS;
		}
	}
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++) {
			struct pol_verdict v;
			int fam = pass ? AF_INET6 : AF_INET;

			if (addrs[i].family != fam)
				continue;
			if (pol_eval_name_addr(cfg, e->sbx, ps, e->name, &addrs[i], is_static,
					       e->port, &v)) {
				if (!k)
					e->av = v;
				e->a[k++] = addrs[i];
				if (pass)
					e->n6++;
				else
					e->n4++;
			} else {
				e->rv = v;
				if (pass)
					e->rm6++;
				else
					e->rm4++;
			}
		}
	e->res = RES_OK;
	e->expires = expires;
}

/* The cache entry for (sbx, name) under the current snapshot, with the
 * name's verdict; filled (evicting whatever held the slot) when absent. */
static struct dns_cent *cent_get(struct gw_dns_worker *dw, const struct pol_sandbox *sbx,
				 const char *name)
{
	const struct sg_config *cfg = cfg_of(dw);
	uint64_t h = cent_hash(sbx, name);
	struct dns_cent *e = &dw->cache[h & (DNS_CACHE_SLOTS - 1)];
	const struct pol_ports *ps;
	size_t i;

	if (e->gen == dw->gen && e->sbx == sbx && e->h == h && !strcmp(e->name, name))
		return e;
	cent_addrs_release(e);
	e->gen = dw->gen;
	e->sbx = sbx;
	e->h = h;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->port = 443;
	ps = view_ports(dw, sbx);
	e->allowed = pol_eval_name(cfg, sbx, ps, name, &e->nv, &e->port);
	e->sh = static_lookup(cfg, name);
	if (!e->allowed && e->sh) {
		/* The operator's own answer, for a name only an address rule
		 * allows: nothing leaves the host by answering it, so answer
		 * what the address rules allow (as a connection would get). */
		for (i = 0; i < e->sh->n_addrs && !e->allowed; i++) {
			struct pol_verdict v;

			if (pol_eval_name_addr(cfg, sbx, ps, name, &e->sh->addrs[i], 1, 443, &v)) {
				e->allowed = 1;
				e->nv = v;
			}
		}
	}
	if (e->allowed && e->sh)
		cent_set_addrs(dw, e, e->sh->addrs, e->sh->n_addrs, 1, INT64_MAX);
	return e;
}

/* Tell the learned store what was answered (once per TTL, per family). */
static void learn(struct gw_dns_worker *dw, const struct dns_ctx *c, struct dns_cent *e,
		  int v6, const struct sg_addr *a, size_t n, uint32_t ttl)
{
	int64_t now = gw_loop_now(dw->w->loop);
	int64_t until = now + (int64_t)ttl * 1000 + DNS_LEARN_GRACE_MS;
	size_t i;

	/* Told already, for this sandbox, for at least half of this TTL. */
	if (e->learned_id[v6] == c->id.hash &&
	    e->learned_until[v6] - now >= (until - now) / 2)
		return;
	for (i = 0; i < n; i++)
		dns_learn_put(dw->g->learn, &c->id, &a[i], e->name, until);
	e->learned_id[v6] = c->id.hash;
	e->learned_until[v6] = until;
}

/* Answer A/AAAA from an entry whose addresses are known. */
static long answer_addrs(struct gw_dns_worker *dw, const struct dns_ctx *c,
			 struct dns_cent *e, uint8_t *out, size_t cap)
{
	const struct sg_config *cfg = cfg_of(dw);
	int v6 = c->q.qtype == DNS_T_AAAA;
	const struct sg_addr *a = v6 ? e->a + e->n4 : e->a;
	size_t n = v6 ? e->n6 : e->n4, removed = v6 ? e->rm6 : e->rm4;
	int64_t left = e->expires - gw_loop_now(dw->w->loop);
	uint32_t ttl;
	long len;
	int tc = 0;

	if (e->res == RES_NX) {
		/* The name was allowed; upstream says it does not exist. */
		dns_note(dw, c, e->sbx, DNS_R_NXDOMAIN, decision_of(&e->nv), "resolve_nxdomain",
			 e->nv.rule_id, 0);
		return reply(dw, c, DNS_R_NXDOMAIN, 0, NULL, 0, 0, out, cap);
	}
	if (e->n4 + e->n6 == 0 && e->rm4 + e->rm6 > 0) {
		/* Every address refused: the name does not exist for this
		 * sandbox (RFC 8020: no type has data). A name pointing inside
		 * (DNS rebinding) has its own reason. */
		const char *why = !strcmp(e->rv.reason, "internal_address") ? "dns_rebinding" :
				  e->rv.reason;

		return refuse(dw, c, e->sbx, DNS_R_NXDOMAIN, why, e->rv.rule_id, out, cap);
	}
	if (n == 0 && removed > 0) {
		/* This family's addresses refused, the other's kept: NODATA. */
		const char *why = !strcmp(e->rv.reason, "internal_address") ? "dns_rebinding" :
				  e->rv.reason;

		return refuse(dw, c, e->sbx, DNS_R_NOERROR, why, e->rv.rule_id, out, cap);
	}
	if (n > DNS_MAX_ANSWERS)
		n = DNS_MAX_ANSWERS;
	if (left < 0)
		left = 0;
	ttl = (uint32_t)(SG_MIN(left, cfg->dns_max_ttl_ms) / 1000);
	len = reply_tc(dw, c, DNS_R_NOERROR, v6 ? DNS_T_AAAA : DNS_T_A, a, n, ttl, out, cap, &tc);
	if (n) {
		/* answers: the records sent (none when truncated: the client
		 * asks again over TCP, and that answer is counted too) */
		dns_note(dw, c, e->sbx, DNS_R_NOERROR, decision_of(&e->av), reason_of(&e->av),
			 e->av.rule_id, tc ? 0 : (unsigned)n);
		learn(dw, c, e, v6, a, n, ttl);
	} else {
		/* The name exists but has no address of this family (NODATA). */
		dns_note(dw, c, e->sbx, DNS_R_NOERROR, decision_of(&e->nv), reason_of(&e->nv),
			 e->nv.rule_id, 0);
	}
	return len;
}

/*
 * The policy part of a well-formed A/AAAA/HTTPS/SVCB query for a valid
 * name. res: a resolution that just completed for it (NULL: none yet).
 * Returns the answer's length, or DNS_PEND when the name must be resolved.
 */
static long decide(struct gw_dns_worker *dw, const struct dns_ctx *c,
		   const struct pol_sandbox *sbx, const struct gw_resolve_result *res,
		   uint8_t *out, size_t cap)
{
	int64_t now = gw_loop_now(dw->w->loop);
	struct dns_cent *e = cent_get(dw, sbx, c->name);

	if (!e->allowed)
		return refuse(dw, c, sbx, DNS_R_NXDOMAIN, e->nv.reason, e->nv.rule_id, out, cap);
	if (c->q.qtype == DNS_T_HTTPS || c->q.qtype == DNS_T_SVCB) {
		/* Exists, but no SVCB/HTTPS records: the client learns no ECH
		 * config and no alternative endpoint (RFC 9460 3: it falls back
		 * to A/AAAA). Never resolved, so never sent upstream. */
		dns_note(dw, c, sbx, DNS_R_NOERROR, decision_of(&e->nv), reason_of(&e->nv),
			 e->nv.rule_id, 0);
		return reply(dw, c, DNS_R_NOERROR, 0, NULL, 0, 0, out, cap);
	}
	if (res && !e->sh) {
		if (res->status == GW_RESOLVE_OK) {
			cent_set_addrs(dw, e, res->addrs, res->n, 0, now + SG_MAX(res->ttl_ms, 0));
		} else if (res->status == GW_RESOLVE_NXDOMAIN) {
			cent_addrs_release(e);
			e->res = RES_NX;
			e->expires = now + SG_MAX(res->ttl_ms, 0);
		} else {
			/* Timeouts and failures are not cached: the next query
			 * tries again (the resolver coalesces them). */
			const char *why = res->status == GW_RESOLVE_TIMEOUT ? "resolve_timeout" :
					  "resolve_failed";

			dns_note(dw, c, sbx, DNS_R_SERVFAIL, decision_of(&e->nv), why,
				 e->nv.rule_id, 0);
			return reply(dw, c, DNS_R_SERVFAIL, 0, NULL, 0, 0, out, cap);
		}
		return answer_addrs(dw, c, e, out, cap);
	}
	if (e->res != RES_NONE && (e->sh || e->expires > now))
		return answer_addrs(dw, c, e, out, cap);
	return DNS_PEND;
}

/* The sandbox of c's source under the current snapshot (NULL: none);
 * fills c->id, c->registered and c->sandbox. */
static const struct pol_sandbox *identify(struct gw_dns_worker *dw, struct dns_ctx *c)
{
	const struct sg_config *cfg = cfg_of(dw);
	const struct gw_reg_entry *re = dns_ident_of(&c->id, dw->w->registry, &c->src);
	const struct pol_sandbox *sbx;

	/* Exactly as connections are identified (conn.c): registered
	 * addresses first, then the policy's sources. */
	if (re) {
		sbx = pol_sandbox_by_name(cfg, re->name);
		snprintf(c->sandbox, sizeof(c->sandbox), "%s", re->name);
	} else {
		sbx = pol_sandbox_by_addr(cfg, &c->src);
		snprintf(c->sandbox, sizeof(c->sandbox), "%s", sbx ? sbx->name : "");
	}
	c->registered = re != NULL;
	c->stopped = re && re->stopped[0];
	return sbx;
}

static int type_answered(uint16_t t)
{
	return t == DNS_T_A || t == DNS_T_AAAA || t == DNS_T_HTTPS || t == DNS_T_SVCB;
}

/*
 * One message from a client: the answer's length in out, DNS_DROP (no
 * answer) or DNS_PEND (c is complete; the caller parks it until the
 * resolver answers).
 */
long dns_process(struct gw_dns_worker *dw, struct dns_ctx *c, const uint8_t *msg,
		    size_t len, uint8_t *out, size_t cap)
{
	struct gw_daemon *d = dw->w->d;
	const struct sg_config *cfg;
	const struct pol_sandbox *sbx;
	struct dns_limit_cfg lc;
	struct dns_ident unknown;
	char src[INET6_ADDRSTRLEN + 8];
	struct dns_rec rec = { .kind = DNS_REC_QUERY, .src = src };
	enum dns_admit adm;

	c->raw = msg;
	c->raw_len = len;
	c->name_ok = 0;
	if (len < DNS_HDR_LEN) {
		/* Not even a header to answer to. */
		atomic_fetch_add_explicit(&dw->dropped_short, 1, memory_order_relaxed);
		return DNS_DROP;
	}
	c->prc = dns_parse_query(msg, len, &c->q);
	if (c->prc == SG_DECLINED) {
		atomic_fetch_add_explicit(&dw->dropped_response, 1, memory_order_relaxed);
		return DNS_DROP;
	}
	view_sync(dw);
	cfg = cfg_of(dw);
	sbx = identify(dw, c);
	if (c->prc == SG_OK && c->q.opcode == 0 && c->q.qtext_plain &&
	    sg_host_normalize(c->q.qtext, c->q.qtext_len, c->name) > 0)
		c->name_ok = 1;
	fmt_src(&c->src, c->src_port, src, sizeof(src));
	rec.sandbox = c->sandbox[0] ? c->sandbox : NULL;
	rec.proto = c->tcp ? "tcp" : "udp";
	rec.qname = c->name_ok ? c->name : NULL;
	rec.qtype = c->q.qtype;
	lc.rate = cfg->dns_rate;
	lc.burst = cfg->dns_burst;
	lc.max_names = cfg->dns_max_names;
	if (!sbx) {
		/* Not an open resolver: sources no sandbox claims are refused,
		 * and their refusals are rate limited together so they cannot
		 * flood the audit log. */
		dns_ident_unknown(&unknown);
		rec.qname = NULL;
		if (dns_limits_admit(dw->g->limits, &unknown, &rec, &lc,
				     gw_loop_now(dw->w->loop)) != DNS_ADMIT_OK) {
			gw_metrics_count(&dw->metrics, "", "deny", "dns_rate_limited");
			return reply(dw, c, DNS_R_REFUSED, 0, NULL, 0, 0, out, cap);
		}
		return refuse(dw, c, NULL, DNS_R_REFUSED, "unknown_source", NULL, out, cap);
	}
	if (!d->audit_on_failure_allow && aud_failing(d->audit)) {
		/* Fail closed, as connections do: nothing we cannot record. */
		gw_metrics_count(&dw->metrics, sbx->name, "deny", "audit_failing");
		return reply(dw, c, DNS_R_REFUSED, 0, NULL, 0, 0, out, cap);
	}
	adm = dns_limits_admit(dw->g->limits, &c->id, &rec, &lc, gw_loop_now(dw->w->loop));
	if (adm != DNS_ADMIT_OK) {
		/* Audited once per burst by dns_limit.c, not here. */
		gw_metrics_count(&dw->metrics, sbx->name, "deny",
				 adm == DNS_ADMIT_RATE ? "dns_rate_limited" : "dns_name_burst");
		return reply(dw, c, DNS_R_REFUSED, 0, NULL, 0, 0, out, cap);
	}
	/* The gateway stopped it: nothing more (after the limiter, so a
	 * stopped sandbox cannot flood the audit log with refusals). */
	if (c->stopped)
		return refuse(dw, c, sbx, DNS_R_REFUSED, "sandbox_stopped", NULL, out, cap);
	if (c->prc != SG_OK)
		return refuse(dw, c, sbx, DNS_R_FORMERR, "dns_malformed", NULL, out, cap);
	if (c->q.opcode != 0)
		return refuse(dw, c, sbx, DNS_R_NOTIMP, "dns_not_implemented", NULL, out, cap);
	if (c->q.has_opt && c->q.edns_version != 0)
		return refuse(dw, c, sbx, DNS_R_BADVERS, "dns_bad_version", NULL, out, cap);
	if (c->q.qclass != DNS_CLASS_IN)
		return refuse(dw, c, sbx, DNS_R_REFUSED, "dns_class_refused", NULL, out, cap);
	if (!type_answered(c->q.qtype))
		return refuse(dw, c, sbx, DNS_R_REFUSED, "dns_type_refused", NULL, out, cap);
	if (!c->name_ok)
		return refuse(dw, c, sbx, DNS_R_FORMERR, "dns_bad_name", NULL, out, cap);
	return decide(dw, c, sbx, NULL, out, cap);
}

/* ------------------------------------------------------ waiting queries */

void dns_pend_release(struct gw_dns_worker *dw, struct dns_pend *p)
{
	if (p->pprev) {
		*p->pprev = p->next;
		if (p->next)
			p->next->pprev = p->pprev;
		p->pprev = NULL;
	}
	dw->n_pending--;
	atomic_store_explicit(&dw->open_pending, (long)dw->n_pending, memory_order_relaxed);
	/* Kept for the next query: no allocation per query in steady state. */
	p->next = dw->pend_free;
	dw->pend_free = p;
}

static void pend_resolved(struct gw_resolve_waiter *rw, const struct gw_resolve_result *res)
{
	struct dns_pend *p = sg_container_of(rw, struct dns_pend, rw);
	struct gw_dns_worker *dw = p->dw;
	const struct pol_sandbox *sbx;
	long len;

	/* Judged again under the snapshot of now: a reload while the name
	 * was resolved applies to its answer. */
	view_sync(dw);
	sbx = identify(dw, &p->c);
	if (!sbx)
		len = refuse(dw, &p->c, NULL, DNS_R_REFUSED, "unknown_source", NULL,
			     dw->scratch, DNS_SCRATCH);
	else if (p->c.stopped)
		len = refuse(dw, &p->c, sbx, DNS_R_REFUSED, "sandbox_stopped", NULL,
			     dw->scratch, DNS_SCRATCH);
	else
		len = decide(dw, &p->c, sbx, res, dw->scratch, DNS_SCRATCH);
	if (len > 0) {
		if (p->tcp) {
			struct dns_tcp *t = p->tcp;

			t->pend = NULL;
			dns_pend_release(dw, p);
			if (dns_tcp_queue(t, dw->scratch, (size_t)len) < 0)
				dns_tcp_close(t);
			else
				dns_tcp_run(t);
			return;
		}
		dns_udp_send_one(dw, &p->m, dw->scratch, (size_t)len);
	} else if (p->tcp) {
		/* No answer to send: go on with the client's next query. */
		struct dns_tcp *t = p->tcp;

		t->pend = NULL;
		dns_pend_release(dw, p);
		dns_tcp_run(t);
		return;
	}
	dns_pend_release(dw, p);
}

/* Park c until the resolver answers its name. 0, or -1 when too many wait
 * (the caller answers SERVFAIL: the client tries again later). */
int dns_pend_start(struct gw_dns_worker *dw, const struct dns_ctx *c, struct dns_tcp *t,
		      const struct dns_udp_meta *m)
{
	struct dns_pend *p = dw->pend_free;

	if (dw->n_pending >= DNS_MAX_PENDING)
		return -1;
	if (p)
		dw->pend_free = p->next;
	else if (!(p = malloc(sizeof(*p))))
		return -1;
	p->dw = dw;
	p->c = *c;
	p->c.raw = NULL;
	p->tcp = t;
	if (m)
		p->m = *m;
	p->next = dw->pending;
	if (p->next)
		p->next->pprev = &p->next;
	p->pprev = &dw->pending;
	dw->pending = p;
	dw->n_pending++;
	atomic_store_explicit(&dw->open_pending, (long)dw->n_pending, memory_order_relaxed);
	if (t)
		t->pend = p;
	/* The callback comes from the loop, never from in here. */
	gw_resolve_start(dw->w->resolver, p->c.name, &p->rw, pend_resolved);
	return 0;
}

long dns_overloaded(struct gw_dns_worker *dw, const struct dns_ctx *c, uint8_t *out,
		       size_t cap)
{
	atomic_fetch_add_explicit(&dw->dropped_overload, 1, memory_order_relaxed);
	return reply(dw, c, DNS_R_SERVFAIL, 0, NULL, 0, 0, out, cap);
}

void dns_worker_cache_free(struct gw_dns_worker *dw)
{
	size_t j;

	for (j = 0; j < DNS_CACHE_SLOTS; j++)
		cent_addrs_release(&dw->cache[j]);
	for (j = 0; j < dw->n_ports; j++)
		pol_ports_free(dw->ports[j]);
	free(dw->ports);
	free(dw->cache);
	dw->ports = NULL;
	dw->cache = NULL;
	dw->n_ports = 0;
}

void gw_dns_shutdown(struct gw_daemon *d)
{
	if (d->dns)
		dns_limits_sweep(d->dns->limits, gw_now_ms(), 1);
}

int gw_dns_learned_host(struct gw_worker *w, const struct sg_addr *src,
			const struct sg_addr *dst, char *out)
{
	struct dns_ident id;

	if (!w->d->dns)
		return 0;
	dns_ident_of(&id, w->registry, src);
	return dns_learn_get(w->d->dns->learn, &id, dst, gw_now_ms(), out);
}

/* --------------------------------------------------------------- metrics */

void gw_dns_metrics(struct gw_daemon *d, struct sg_sbuf *out)
{
	static const char *const rc[6] = { "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN",
					   "NOTIMP", "REFUSED" };
	struct gw_metric_row *sum;
	struct dns_limit_stats ls;
	uint64_t rcodes[6] = { 0 }, badvers = 0, trunc = 0, dshort = 0, dresp = 0, dover = 0,
		 udp = 0, tcp = 0, tcpref = 0, overflow = 0;
	long open_tcp = 0, pend = 0;
	int i, k;
	size_t j;

	if (!d->dns)
		return;
	sum = calloc(GW_METRIC_ROWS, sizeof(*sum));
	if (!sum) {
		out->oom = 1;
		return;
	}
	for (i = 0; i < d->n_workers; i++) {
		struct gw_dns_worker *dw = d->workers[i].dns;

		if (!dw)
			continue;
		for (k = 0; k < 6; k++)
			rcodes[k] += atomic_load_explicit(&dw->rcodes[k], memory_order_relaxed);
		badvers += atomic_load_explicit(&dw->badvers, memory_order_relaxed);
		trunc += atomic_load_explicit(&dw->truncated, memory_order_relaxed);
		dshort += atomic_load_explicit(&dw->dropped_short, memory_order_relaxed);
		dresp += atomic_load_explicit(&dw->dropped_response, memory_order_relaxed);
		dover += atomic_load_explicit(&dw->dropped_overload, memory_order_relaxed);
		udp += atomic_load_explicit(&dw->udp_queries, memory_order_relaxed);
		tcp += atomic_load_explicit(&dw->tcp_queries, memory_order_relaxed);
		tcpref += atomic_load_explicit(&dw->tcp_refused, memory_order_relaxed);
		open_tcp += atomic_load_explicit(&dw->open_tcp, memory_order_relaxed);
		pend += atomic_load_explicit(&dw->open_pending, memory_order_relaxed);
		/* Sum the per-worker rows by (sandbox, decision, reason). */
		pthread_mutex_lock(&dw->metrics.mu);
		for (j = 0; j < GW_METRIC_ROWS; j++) {
			const struct gw_metric_row *r = &dw->metrics.rows[j];
			size_t s;

			if (!r->decision)
				continue;
			for (s = 0; s < GW_METRIC_ROWS; s++)
				if (!sum[s].decision || (!strcmp(sum[s].sandbox, r->sandbox) &&
							 !strcmp(sum[s].decision, r->decision) &&
							 !strcmp(sum[s].reason, r->reason)))
					break;
			if (s == GW_METRIC_ROWS) {
				overflow += r->count;
				continue;
			}
			if (!sum[s].decision)
				sum[s] = *r;
			else
				sum[s].count += r->count;
		}
		overflow += dw->metrics.overflow;
		pthread_mutex_unlock(&dw->metrics.mu);
	}
	sg_sbuf_puts(out, "# HELP sandgate_dns_queries_total DNS queries answered, by sandbox, "
		     "decision and reason.\n# TYPE sandgate_dns_queries_total counter\n");
	for (j = 0; j < GW_METRIC_ROWS && sum[j].decision; j++) {
		sg_sbuf_puts(out, "sandgate_dns_queries_total{sandbox=\"");
		gw_metrics_label(out, sum[j].sandbox);
		sg_sbuf_printf(out, "\",decision=\"%s\",reason=\"", sum[j].decision);
		gw_metrics_label(out, sum[j].reason);
		sg_sbuf_printf(out, "\"} %llu\n", (unsigned long long)sum[j].count);
	}
	if (overflow)
		sg_sbuf_printf(out, "sandgate_dns_queries_total{sandbox=\"\",decision=\"\","
			       "reason=\"unlabelled\"} %llu\n", (unsigned long long)overflow);
	free(sum);
	sg_sbuf_puts(out, "# HELP sandgate_dns_responses_total DNS responses sent, by rcode.\n"
		     "# TYPE sandgate_dns_responses_total counter\n");
	for (k = 0; k < 6; k++)
		sg_sbuf_printf(out, "sandgate_dns_responses_total{rcode=\"%s\"} %llu\n", rc[k],
			       (unsigned long long)rcodes[k]);
	sg_sbuf_printf(out, "sandgate_dns_responses_total{rcode=\"BADVERS\"} %llu\n",
		       (unsigned long long)badvers);
	sg_sbuf_printf(out, "# HELP sandgate_dns_received_total DNS messages received, by transport.\n"
		       "# TYPE sandgate_dns_received_total counter\n"
		       "sandgate_dns_received_total{proto=\"udp\"} %llu\n"
		       "sandgate_dns_received_total{proto=\"tcp\"} %llu\n",
		       (unsigned long long)udp, (unsigned long long)tcp);
	sg_sbuf_printf(out, "# HELP sandgate_dns_dropped_total DNS messages not answered.\n"
		       "# TYPE sandgate_dns_dropped_total counter\n"
		       "sandgate_dns_dropped_total{why=\"short\"} %llu\n"
		       "sandgate_dns_dropped_total{why=\"not_a_query\"} %llu\n"
		       "sandgate_dns_dropped_total{why=\"tcp_connections\"} %llu\n",
		       (unsigned long long)dshort, (unsigned long long)dresp,
		       (unsigned long long)tcpref);
	sg_sbuf_printf(out, "# HELP sandgate_dns_overload_total Queries answered SERVFAIL because "
		       "too many waited for the resolver.\n"
		       "# TYPE sandgate_dns_overload_total counter\n"
		       "sandgate_dns_overload_total %llu\n", (unsigned long long)dover);
	sg_sbuf_printf(out, "# HELP sandgate_dns_truncated_total UDP answers sent with TC "
		       "(too large for the client).\n"
		       "# TYPE sandgate_dns_truncated_total counter\n"
		       "sandgate_dns_truncated_total %llu\n", (unsigned long long)trunc);
	dns_limits_stats(d->dns->limits, &ls);
	sg_sbuf_printf(out, "# HELP sandgate_dns_rate_limited_total Queries refused by the "
		       "per-sandbox rate limit.\n"
		       "# TYPE sandgate_dns_rate_limited_total counter\n"
		       "sandgate_dns_rate_limited_total %llu\n"
		       "# HELP sandgate_dns_name_burst_total Queries refused by the distinct-name cap.\n"
		       "# TYPE sandgate_dns_name_burst_total counter\n"
		       "sandgate_dns_name_burst_total %llu\n"
		       "# HELP sandgate_dns_burst_records_total Burst audit records written.\n"
		       "# TYPE sandgate_dns_burst_records_total counter\n"
		       "sandgate_dns_burst_records_total %llu\n"
		       "# HELP sandgate_dns_aggregated_total Allowed queries counted into an "
		       "aggregate audit record instead of their own.\n"
		       "# TYPE sandgate_dns_aggregated_total counter\n"
		       "sandgate_dns_aggregated_total %llu\n"
		       "# HELP sandgate_dns_tracked_sandboxes Sandboxes with DNS limit state.\n"
		       "# TYPE sandgate_dns_tracked_sandboxes gauge\n"
		       "sandgate_dns_tracked_sandboxes %llu\n",
		       (unsigned long long)ls.rate_limited, (unsigned long long)ls.name_capped,
		       (unsigned long long)ls.bursts, (unsigned long long)ls.aggregated,
		       (unsigned long long)ls.tracked);
	sg_sbuf_printf(out, "# HELP sandgate_dns_learned_entries Addresses remembered for naming "
		       "IP-only connections.\n"
		       "# TYPE sandgate_dns_learned_entries gauge\n"
		       "sandgate_dns_learned_entries %llu\n"
		       "# HELP sandgate_dns_tcp_connections DNS-over-TCP clients open now.\n"
		       "# TYPE sandgate_dns_tcp_connections gauge\n"
		       "sandgate_dns_tcp_connections %ld\n"
		       "# HELP sandgate_dns_pending Queries waiting for the resolver now.\n"
		       "# TYPE sandgate_dns_pending gauge\n"
		       "sandgate_dns_pending %ld\n",
		       (unsigned long long)dns_learn_count(d->dns->learn), open_tcp, pend);
}
