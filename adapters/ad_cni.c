/*
 * ad_cni.c - `sandgate-cni`, a chained CNI plugin (CNI spec 1.0:
 * https://github.com/containernetworking/cni/blob/main/SPEC.md).
 *
 * Runs after bridge/ptp (which made the interface and the addresses) and
 * adds what `sandgate run` adds for its own sandboxes: one nft table that
 * redirects every TCP connection of the container to the gateway's
 * transparent listener and DNS to its DNS listener, drops the rest, and a
 * registration of the container's addresses under a sandbox name so the
 * gateway judges it by the right policy.
 *
 * Network configuration (stdin), beside the usual cniVersion/name/type:
 *   "gateway": "unix:/run/sandgate/admin.sock"  control API (optional: no
 *                                                registration without it)
 *   "transparent_port": 15001                    required
 *   "dns_port": 15053                            0 or absent: DNS dropped
 *   "sandbox": "cni-{id}"                        name template: {id} is the
 *              first 12 characters of CNI_CONTAINERID, {ifname} CNI_IFNAME
 *   "prevResult": {...}                          from the plugin before us
 *
 * The packets are selected by the container's source addresses (from
 * prevResult.ips), not by interface: behind a bridge they arrive on the
 * bridge, whose other ports belong to other containers. Anti-spoofing of
 * those addresses is the chained plugin's (or the runtime's) job.
 *
 * State: none on disk. The table name and the sandbox name are functions
 * of (container id, ifname), so DEL and CHECK find what ADD made even
 * without a prevResult. DEL of something unknown succeeds (the spec: DEL
 * must tolerate missing resources). Errors: CNI error JSON on stdout, 1.
 *
 * Table name "sandgate_cni_<12 hex>": not the "sandgate_<8 hex>" shape
 * that `sandgate run`'s sweep removes when its owner is gone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sg.h"
#include "sg_jsonp.h"
#include "sg_sbuf.h"
#include "adapters/ad.h"
#include "sg_poison.h"

#define CNI_VERSION "1.0.0"
#define CNI_MAX_TOKS 4096
#define CNI_MAX_IPS 16

/* CNI error codes (SPEC.md "Error"). */
#define CNI_E_VERSION 1
#define CNI_E_ENV 4
#define CNI_E_IO 5
#define CNI_E_DECODE 6
#define CNI_E_CONFIG 7

struct cni {
	const char *cmd, *cid, *ifname, *netns;
	char *text;                     /* stdin, owned */
	size_t len;
	struct sg_jsonp_tok *toks;      /* owned */
	int ntoks;
	char version[32];
	char admin[108];                /* "" when no gateway is configured */
	int tp_port, dns_port;
	char name[64], table[40];
	char ips[CNI_MAX_IPS][64];
	int nips;
	long prev;                      /* token index of prevResult, or -1 */
};

static int cni_error(const struct cni *c, int code, const char *msg, const char *details)
{
	struct sg_sbuf b;

	sg_sbuf_init(&b);
	sg_sbuf_puts(&b, "{\"cniVersion\":");
	sg_sbuf_json_str(&b, c && c->version[0] ? c->version : CNI_VERSION);
	sg_sbuf_printf(&b, ",\"code\":%d,\"msg\":", code);
	sg_sbuf_json_str(&b, msg);
	if (details) {
		sg_sbuf_puts(&b, ",\"details\":");
		sg_sbuf_json_str(&b, details);
	}
	sg_sbuf_puts(&b, "}\n");
	if (!b.oom)
		fwrite(b.p, 1, b.len, stdout);
	sg_sbuf_free(&b);
	return 1;
}

/* ------------------------------------------------------------ JSON */

/* Value token of key in the object at index obj, or -1. */
static long obj_get(const struct cni *c, long obj, const char *key)
{
	size_t i, j;

	if (obj < 0 || c->toks[obj].type != SG_JSON_OBJECT)
		return -1;
	for (i = 0, j = (size_t)obj + 1; i < c->toks[obj].size; i++) {
		if (sg_jsonp_eq(c->text, &c->toks[j], key))
			return (long)j + 1;
		j = c->toks[j + 1].next;
	}
	return -1;
}

static int tok_str(const struct cni *c, long t, char *out, size_t outsz)
{
	if (t < 0 || c->toks[t].type != SG_JSON_STRING)
		return SG_EINVAL;
	return sg_jsonp_str(c->text, &c->toks[t], out, outsz) < 0 ? SG_EINVAL : 0;
}

static long tok_int(const struct cni *c, long t, long dflt)
{
	if (t < 0)
		return dflt;
	if (c->toks[t].type != SG_JSON_NUMBER)
		return -1;
	return strtol(c->text + c->toks[t].start, NULL, 10);
}

static int read_stdin(struct cni *c)
{
	size_t cap = 0;

	for (;;) {
		ssize_t r;

		if (c->len + 4096 + 1 > cap) {
			char *n = realloc(c->text, cap = cap ? cap * 2 : 16384);

			if (!n || cap > (16u << 20))
				return SG_ENOMEM;
			c->text = n;
		}
		r = read(0, c->text + c->len, cap - c->len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return SG_EIO;
		if (r == 0)
			break;
		c->len += (size_t)r;
	}
	c->text[c->len] = '\0';
	return 0;
}

/* --------------------------------------------------------- config */

/* The sandbox name from the template: {id}, {ifname}; anything outside
 * the control API's [A-Za-z0-9._-] becomes '-'. */
static int make_name(struct cni *c, const char *tmpl)
{
	size_t o = 0, i;
	const char *p;

	for (p = tmpl; *p && o < sizeof(c->name) - 1; ) {
		const char *sub = NULL;
		size_t sl = 0;

		if (!strncmp(p, "{id}", 4)) {
			sub = c->cid;
			sl = SG_MIN(strlen(c->cid), 12);
			p += 4;
		} else if (!strncmp(p, "{ifname}", 8)) {
			sub = c->ifname;
			sl = strlen(c->ifname);
			p += 8;
		} else {
			sub = p++;
			sl = 1;
		}
		for (i = 0; i < sl && o < sizeof(c->name) - 1; i++)
			c->name[o++] = sub[i];
	}
	c->name[o] = '\0';
	if (o == 0 || o > 63)
		return SG_EINVAL;
	for (i = 0; i < o; i++) {
		char ch = c->name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			c->name[i] = '-';
	}
	return 0;
}

static int parse_config(struct cni *c, char *why, size_t whysz)
{
	char gw[160], tmpl[128];
	size_t off = 0;
	uint64_t h = 0xcbf29ce484222325ULL;
	const char *p;

	c->toks = calloc(CNI_MAX_TOKS, sizeof(*c->toks));
	if (!c->toks)
		return SG_ENOMEM;
	c->ntoks = sg_jsonp_parse(c->text, c->len, c->toks, CNI_MAX_TOKS, &off);
	if (c->ntoks < 0 || c->toks[0].type != SG_JSON_OBJECT) {
		ad_fmt(why, whysz, "the network configuration on stdin is not a JSON object "
		       "(byte %zu)", off);
		return SG_EINVAL;
	}
	if (tok_str(c, obj_get(c, 0, "cniVersion"), c->version, sizeof(c->version)) < 0)
		ad_fmt(c->version, sizeof(c->version), "%s", CNI_VERSION);
	gw[0] = '\0';
	tok_str(c, obj_get(c, 0, "gateway"), gw, sizeof(gw));
	if (gw[0] && (strncmp(gw, "unix:", 5) ||
		      ad_fmt(c->admin, sizeof(c->admin), "%s", gw + 5) < 0)) {
		ad_fmt(why, whysz, "\"gateway\": expected \"unix:PATH\"");
		return SG_EINVAL;
	}
	c->tp_port = (int)tok_int(c, obj_get(c, 0, "transparent_port"), -1);
	c->dns_port = (int)tok_int(c, obj_get(c, 0, "dns_port"), 0);
	if (c->tp_port <= 0 || c->tp_port > 65535 || c->dns_port < 0 || c->dns_port > 65535) {
		ad_fmt(why, whysz, "\"transparent_port\" (required) and \"dns_port\" must be ports");
		return SG_EINVAL;
	}
	if (tok_str(c, obj_get(c, 0, "sandbox"), tmpl, sizeof(tmpl)) < 0)
		ad_fmt(tmpl, sizeof(tmpl), "cni-{id}");
	if (make_name(c, tmpl) < 0) {
		ad_fmt(why, whysz, "\"sandbox\": the name must be 1-63 characters");
		return SG_EINVAL;
	}
	/* One table per (container, interface): a pod may have several. */
	for (p = c->cid; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	h = (h ^ '/') * 0x100000001b3ULL;
	for (p = c->ifname; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	ad_fmt(c->table, sizeof(c->table), "sandgate_cni_%012llx",
	       (unsigned long long)(h & 0xffffffffffffULL));
	c->prev = obj_get(c, 0, "prevResult");
	return 0;
}

/* prevResult.ips[].address ("10.22.0.5/16") -> c->ips, prefix removed. */
static int prev_ips(struct cni *c)
{
	long ips = obj_get(c, c->prev, "ips");
	size_t i, j;

	if (ips < 0 || c->toks[ips].type != SG_JSON_ARRAY)
		return SG_EINVAL;
	for (i = 0, j = (size_t)ips + 1; i < c->toks[ips].size; i++, j = c->toks[j].next) {
		char *slash;

		if (c->nips >= CNI_MAX_IPS ||
		    tok_str(c, obj_get(c, (long)j, "address"), c->ips[c->nips], 64) < 0)
			continue;
		slash = strchr(c->ips[c->nips], '/');
		if (slash)
			*slash = '\0';
		/* Only characters an address can have go into the nft text. */
		if (c->ips[c->nips][0] &&
		    strspn(c->ips[c->nips], "0123456789abcdefABCDEF:.") == strlen(c->ips[c->nips]))
			c->nips++;
	}
	return c->nips > 0 ? 0 : SG_EINVAL;
}

/* ---------------------------------------------------------- actions */

static int table_exists(const struct cni *c)
{
	const char *argv[] = { "nft", "list", "table", "inet", c->table, NULL };

	return ad_cmd(argv, NULL, 0, NULL, 0) == 0;
}

static int nft_load(const struct cni *c, char *err, size_t errsz)
{
	static char rules[32768];
	char sel[CNI_MAX_IPS][96], head[128];
	const char *sels[CNI_MAX_IPS];
	const char *argv[] = { "nft", "-f", "-", NULL };
	size_t hl;
	int i;

	for (i = 0; i < c->nips; i++) {
		ad_fmt(sel[i], sizeof(sel[i]), "%s saddr %s", strchr(c->ips[i], ':') ? "ip6" : "ip",
		       c->ips[i]);
		sels[i] = sel[i];
	}
	/* "add table; delete table; table {...}" in one transaction: a
	 * repeated ADD replaces the rules instead of doubling them. */
	ad_fmt(head, sizeof(head), "table inet %s\ndelete table inet %s\n", c->table, c->table);
	hl = strlen(head);
	memcpy(rules, head, hl);
	if (ad_nft_ruleset(rules + hl, sizeof(rules) - hl, c->table, sels, c->nips, c->tp_port,
			   c->dns_port) < 0)
		return SG_EINVAL;
	return ad_cmd(argv, rules, strlen(rules), err, errsz) == 0 ? 0 : SG_EIO;
}

static int gw_register(const struct cni *c, char *err, size_t errsz)
{
	struct sg_sbuf b;
	char uri[128], resp[512];
	int i, status = 0, rc;

	sg_sbuf_init(&b);
	sg_sbuf_puts(&b, "{\"name\":");
	sg_sbuf_json_str(&b, c->name);
	sg_sbuf_puts(&b, ",\"addresses\":[");
	for (i = 0; i < c->nips; i++) {
		sg_sbuf_puts(&b, i ? "," : "");
		sg_sbuf_json_str(&b, c->ips[i]);
	}
	sg_sbuf_puts(&b, "],\"labels\":{\"backend\":\"cni\",\"runner\":\"sandgate-cni\","
		     "\"container_id\":");
	sg_sbuf_json_str(&b, c->cid);
	sg_sbuf_puts(&b, "}}");
	if (b.oom) {
		sg_sbuf_free(&b);
		return SG_ENOMEM;
	}
	/* A repeated ADD (or a stale entry): replace it. */
	ad_fmt(uri, sizeof(uri), "/v1/sandboxes/%s", c->name);
	ad_http_unix(c->admin, "DELETE", uri, NULL, &status, NULL, 0);
	rc = ad_http_unix(c->admin, "POST", "/v1/sandboxes", b.p, &status, resp, sizeof(resp));
	sg_sbuf_free(&b);
	if (rc < 0 || status != 201) {
		ad_fmt(err, errsz, "%s: %s%s", c->admin, rc < 0 ? "not answering: " : "refused: ",
		       rc < 0 ? strerror(errno) : resp);
		return SG_EIO;
	}
	return 0;
}

/* 0 gone (or never there), <0 the gateway answered something else. */
static int gw_unregister(const struct cni *c)
{
	char uri[128];
	int status = 0;

	ad_fmt(uri, sizeof(uri), "/v1/sandboxes/%s", c->name);
	if (ad_http_unix(c->admin, "DELETE", uri, NULL, &status, NULL, 0) < 0)
		return SG_EIO;
	return status == 204 || status == 404 ? 0 : SG_EIO;
}

static void table_delete(const struct cni *c)
{
	const char *argv[] = { "nft", "delete", "table", "inet", c->table, NULL };

	ad_cmd(argv, NULL, 0, NULL, 0);
}

static int cmd_add(struct cni *c)
{
	char err[2048];

	if (c->prev < 0 || prev_ips(c) < 0)
		return cni_error(c, CNI_E_CONFIG, "sandgate-cni is a chained plugin: it needs a "
				 "prevResult with ips (put it after bridge or ptp)", NULL);
	if (nft_load(c, err, sizeof(err)) < 0)
		return cni_error(c, CNI_E_IO, "loading the nft table failed", err);
	if (c->admin[0] && gw_register(c, err, sizeof(err)) < 0) {
		/* Fail closed and leave nothing behind: the runtime will DEL. */
		table_delete(c);
		return cni_error(c, CNI_E_IO, "registering the sandbox with the gateway failed", err);
	}
	/* Pass the previous result through unchanged (SPEC.md: a chained
	 * plugin that changes nothing outputs its prevResult). */
	fwrite(c->text + c->toks[c->prev].start, 1, c->toks[c->prev].end - c->toks[c->prev].start,
	       stdout);
	fputs("\n", stdout);
	return 0;
}

static int cmd_del(struct cni *c)
{
	table_delete(c);
	if (c->admin[0] && gw_unregister(c) < 0)
		/* A gateway that is down must not block the container's
		 * deletion for ever; its registry dies with it anyway. */
		fprintf(stderr, "sandgate-cni: warning: could not unregister %s at %s\n", c->name,
			c->admin);
	return 0;
}

static int cmd_check(struct cni *c)
{
	char resp[8192], needle[96];
	int status = 0;

	if (c->prev < 0)
		return cni_error(c, CNI_E_CONFIG, "CHECK needs a prevResult", NULL);
	if (!table_exists(c))
		return cni_error(c, CNI_E_IO, "the sandgate nft table is missing", c->table);
	if (c->admin[0]) {
		ad_fmt(needle, sizeof(needle), "\"name\":\"%s\"", c->name);
		if (ad_http_unix(c->admin, "GET", "/v1/sandboxes", NULL, &status, resp,
				 sizeof(resp)) < 0 || status != 200)
			return cni_error(c, CNI_E_IO, "the gateway is not answering", c->admin);
		if (!strstr(resp, needle)) {
			/* The listing may put a space after the colon. */
			ad_fmt(needle, sizeof(needle), "\"name\": \"%s\"", c->name);
			if (!strstr(resp, needle))
				return cni_error(c, CNI_E_IO, "the sandbox is not registered",
						 c->name);
		}
	}
	return 0;
}

int ad_cni_main(int argc, char **argv)
{
	struct cni c;
	char why[256];
	int rc;

	SG_UNUSED(argc);
	SG_UNUSED(argv);
	memset(&c, 0, sizeof(c));
	c.prev = -1;
	c.cmd = getenv("CNI_COMMAND");
	if (!c.cmd)
		return cni_error(NULL, CNI_E_ENV, "CNI_COMMAND is not set (this is a CNI plugin)",
				 NULL);
	if (!strcmp(c.cmd, "VERSION")) {
		printf("{\"cniVersion\":\"%s\",\"supportedVersions\":[\"0.4.0\",\"1.0.0\"]}\n",
		       CNI_VERSION);
		return 0;
	}
	c.cid = getenv("CNI_CONTAINERID");
	c.ifname = getenv("CNI_IFNAME");
	c.netns = getenv("CNI_NETNS");
	if (strcmp(c.cmd, "ADD") && strcmp(c.cmd, "DEL") && strcmp(c.cmd, "CHECK"))
		return cni_error(NULL, CNI_E_ENV, "CNI_COMMAND: ADD, DEL, CHECK or VERSION", c.cmd);
	if (!c.cid || !c.cid[0] || !c.ifname || !c.ifname[0])
		return cni_error(NULL, CNI_E_ENV, "CNI_CONTAINERID and CNI_IFNAME are required",
				 NULL);
	if (!strcmp(c.cmd, "ADD") && (!c.netns || !c.netns[0]))
		return cni_error(NULL, CNI_E_ENV, "CNI_NETNS is required for ADD", NULL);
	if (read_stdin(&c) < 0) {
		rc = cni_error(NULL, CNI_E_IO, "cannot read the configuration from stdin", NULL);
		goto out;
	}
	if (parse_config(&c, why, sizeof(why)) < 0) {
		rc = cni_error(&c, c.ntoks < 0 || !c.toks ? CNI_E_DECODE : CNI_E_CONFIG, why, NULL);
		goto out;
	}
	if (strcmp(c.version, "1.0.0") && strcmp(c.version, "0.4.0")) {
		rc = cni_error(&c, CNI_E_VERSION, "unsupported cniVersion (1.0.0, 0.4.0)", c.version);
		goto out;
	}
	if (!strcmp(c.cmd, "ADD"))
		rc = cmd_add(&c);
	else if (!strcmp(c.cmd, "DEL"))
		rc = cmd_del(&c);
	else
		rc = cmd_check(&c);
out:
	fflush(stdout);
	free(c.toks);
	free(c.text);
	return rc;
}
