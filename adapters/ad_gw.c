/*
 * ad_gw.c - the gateway a run talks to: one it starts (`sandgate serve`
 * on a private copy of the user's configuration) or one already running
 * (`--gateway unix:PATH`), and the control API client that registers the
 * sandbox there (docs/api.md).
 *
 * The private copy is the user's YAML document with gateway.listen
 * replaced: transparent and dns on free ports of "[::]" (REDIRECT lands
 * on the veth's host address, so the listener cannot be loopback-only),
 * admin on a unix socket in the run's state dir, no proxy listener (the
 * sandbox's TCP never reaches it, and a fixed port would collide with the
 * user's own serve). Relative paths in the document stay valid: the
 * gateway keeps the caller's working directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#include "sg.h"
#include "sg_json.h"
#include "sg_jsonp.h"
#include "sg_sbuf.h"
#include "adapters/ad.h"
#include "sg_poison.h"

/* ------------------------------------------------------------- YAML */

static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map, const char *key,
			    yaml_node_pair_t **pair_out)
{
	yaml_node_pair_t *p;

	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);

		if (k && k->type == YAML_SCALAR_NODE &&
		    k->data.scalar.length == strlen(key) &&
		    !memcmp(k->data.scalar.value, key, k->data.scalar.length)) {
			if (pair_out)
				*pair_out = p;
			return yaml_document_get_node(doc, p->value);
		}
	}
	return NULL;
}

/* A scalar at a dotted path ("gateway.tls.ca.cert") into out, or "". */
static void yaml_path(yaml_document_t *doc, const char *path, char *out, size_t outsz)
{
	yaml_node_t *n = yaml_document_get_root_node(doc);
	char key[64];
	const char *p = path;

	out[0] = '\0';
	while (n && *p) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);

		if (len >= sizeof(key))
			return;
		memcpy(key, p, len);
		key[len] = '\0';
		n = map_get(doc, n, key, NULL);
		p = dot ? dot + 1 : p + len;
	}
	if (n && n->type == YAML_SCALAR_NODE && n->data.scalar.length < outsz) {
		memcpy(out, n->data.scalar.value, n->data.scalar.length);
		out[n->data.scalar.length] = '\0';
	}
}

/* The mapping at key in map (node id), created empty when missing. Ids,
 * not pointers: adding a node may move the document's node array. */
static int map_child(yaml_document_t *doc, int map_id, const char *key)
{
	yaml_node_pair_t *pair = NULL;
	yaml_node_t *v = map_get(doc, yaml_document_get_node(doc, map_id), key, &pair);
	int k, m;

	if (v && v->type == YAML_MAPPING_NODE)
		return pair->value;
	m = yaml_document_add_mapping(doc, NULL, YAML_BLOCK_MAPPING_STYLE);
	if (!m)
		return 0;
	if (pair) {             /* a scalar or list where a mapping belongs: replace */
		pair->value = m;
		return m;
	}
	k = yaml_document_add_scalar(doc, NULL, (yaml_char_t *)key, (int)strlen(key),
				     YAML_PLAIN_SCALAR_STYLE);
	if (!k || !yaml_document_append_mapping_pair(doc, map_id, k, m))
		return 0;
	return m;
}

/* Set (or, value NULL, remove) a scalar key in the mapping map_id. */
static int map_set(yaml_document_t *doc, int map_id, const char *key, const char *value)
{
	yaml_node_pair_t *pair = NULL;
	yaml_node_t *map;
	int k, v;

	map_get(doc, yaml_document_get_node(doc, map_id), key, &pair);
	if (!value) {
		if (pair) {
			map = yaml_document_get_node(doc, map_id);
			memmove(pair, pair + 1,
				(size_t)(map->data.mapping.pairs.top - pair - 1) * sizeof(*pair));
			map->data.mapping.pairs.top--;
		}
		return 0;
	}
	v = yaml_document_add_scalar(doc, NULL, (yaml_char_t *)value, (int)strlen(value),
				     YAML_DOUBLE_QUOTED_SCALAR_STYLE);
	if (!v)
		return SG_ENOMEM;
	if (pair) {
		pair->value = v;
		return 0;
	}
	k = yaml_document_add_scalar(doc, NULL, (yaml_char_t *)key, (int)strlen(key),
				     YAML_PLAIN_SCALAR_STYLE);
	return k && yaml_document_append_mapping_pair(doc, map_id, k, v) ? 0 : SG_ENOMEM;
}

static int yaml_load(const char *path, yaml_document_t *doc)
{
	yaml_parser_t parser;
	FILE *f = fopen(path, "r");
	int ok;

	if (!f) {
		fprintf(stderr, "sandgate run: %s: %s\n", path, strerror(errno));
		return SG_EIO;
	}
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	ok = yaml_parser_load(&parser, doc);
	if (!ok)
		fprintf(stderr, "sandgate run: %s:%zu:%zu: %s\n", path,
			parser.problem_mark.line + 1, parser.problem_mark.column + 1,
			parser.problem ? parser.problem : "invalid YAML");
	yaml_parser_delete(&parser);
	fclose(f);
	if (ok && !yaml_document_get_root_node(doc)) {
		yaml_document_delete(doc);
		fprintf(stderr, "sandgate run: %s: empty document\n", path);
		return SG_EINVAL;
	}
	return ok ? 0 : SG_EINVAL;
}

/* Write the private config: the user's document (or the deny-all default)
 * with our listeners. dns_port 0 leaves no DNS listener. */
static int write_private_config(struct ad_gw *g, const char *user_config, int dns_port,
				const char *default_audit)
{
	yaml_document_t doc;
	yaml_emitter_t em;
	char tp[32], dns[32], admin[160];
	FILE *f = NULL;
	int rc = SG_EIO, gw, listen, root = 1;

	ad_fmt(tp, sizeof(tp), "[::]:%d", g->tp_port);
	ad_fmt(dns, sizeof(dns), "[::]:%d", dns_port);
	ad_fmt(admin, sizeof(admin), "unix:%s", g->admin);
	if (user_config) {
		if (yaml_load(user_config, &doc) < 0)
			return SG_EINVAL;
		if (yaml_document_get_root_node(&doc)->type != YAML_MAPPING_NODE) {
			fprintf(stderr, "sandgate run: %s: not a mapping\n", user_config);
			yaml_document_delete(&doc);
			return SG_EINVAL;
		}
		yaml_path(&doc, "gateway.tls.ca.cert", g->ca_cert, sizeof(g->ca_cert));
	} else {
		/* No configuration: every destination is denied, every attempt
		 * is audited. */
		yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1);
		root = yaml_document_add_mapping(&doc, NULL, YAML_BLOCK_MAPPING_STYLE);
		if (map_set(&doc, root, "version", "1") < 0 ||
		    map_set(&doc, map_child(&doc, root, "audit"), "path", default_audit) < 0 ||
		    map_set(&doc, root, "default", "deny") < 0)
			goto out;
	}
	gw = map_child(&doc, root, "gateway");
	listen = gw ? map_child(&doc, gw, "listen") : 0;
	if (!listen || map_set(&doc, listen, "transparent", tp) < 0 ||
	    map_set(&doc, listen, "proxy", NULL) < 0 ||
	    map_set(&doc, listen, "dns", dns_port ? dns : NULL) < 0 ||
	    map_set(&doc, listen, "admin", admin) < 0)
		goto out;
	f = fopen(g->config, "w");
	if (!f)
		goto out;
	yaml_emitter_initialize(&em);
	yaml_emitter_set_output_file(&em, f);
	yaml_emitter_set_unicode(&em, 1);
	/* yaml_emitter_dump takes the document (deleted even on failure). */
	rc = yaml_emitter_open(&em) && yaml_emitter_dump(&em, &doc) &&
	     yaml_emitter_close(&em) ? 0 : SG_EIO;
	yaml_emitter_delete(&em);
	if (fclose(f) != 0)
		rc = SG_EIO;
	if (rc < 0)
		fprintf(stderr, "sandgate run: cannot write %s\n", g->config);
	return rc;
out:
	yaml_document_delete(&doc);
	if (rc < 0)
		fprintf(stderr, "sandgate run: cannot build the gateway configuration\n");
	return rc;
}

/* A TCP port free on [::] (and, for DNS, free for UDP too). The gateway
 * binds it a moment later; a lost race shows as a failed start, retried. */
static int free_port(int udp_too)
{
	int tries;

	for (tries = 0; tries < 20; tries++) {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6 };
		socklen_t sl = sizeof(a);
		int t = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), u = -1, port = -1, zero = 0;

		if (t < 0)
			return -1;
		setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(t, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		    getsockname(t, (struct sockaddr *)&a, &sl) == 0)
			port = ntohs(a.sin6_port);
		if (port > 0 && udp_too) {
			u = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			setsockopt(u, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			if (u < 0 || bind(u, (struct sockaddr *)&a, sizeof(a)) < 0)
				port = -1;
		}
		close(t);
		if (u >= 0)
			close(u);
		if (port > 0)
			return port;
	}
	return -1;
}

/* ------------------------------------------------------ control API */

#define HTTP_RESP_MAX (4 << 20)

/* One request; the whole answer (up to HTTP_RESP_MAX) into ans. */
static int http_unix(const char *path, const char *method, const char *uri, const char *body,
		     int *status, struct sg_sbuf *ans)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 5, 0 };
	struct sg_sbuf req;
	char buf[8192];
	int fd = -1, rc = SG_EIO;

	*status = 0;
	sg_sbuf_init(&req);
	if (strlen(path) >= sizeof(sa.sun_path))
		return SG_EINVAL;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	sg_sbuf_printf(&req, "%s %s HTTP/1.1\r\nHost: sandgate\r\nConnection: close\r\n",
		       method, uri);
	if (body)
		sg_sbuf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
			       strlen(body));
	sg_sbuf_puts(&req, "\r\n");
	if (body)
		sg_sbuf_puts(&req, body);
	if (req.oom)
		goto out;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto out;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (write(fd, req.p, req.len) != (ssize_t)req.len)
		goto out;
	/* One request per connection: the answer ends at EOF. (A list of
	 * sandboxes can be long: the whole of it, or an error.) */
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (ans->len + (size_t)r > HTTP_RESP_MAX)
			goto out;
		sg_sbuf_add(ans, buf, (size_t)r);
	}
	if (ans->oom || ans->len < 12 || strncmp(ans->p, "HTTP/1.", 7))
		goto out;
	*status = atoi(ans->p + 9);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	sg_sbuf_free(&req);
	return rc;
}

int ad_http_unix(const char *path, const char *method, const char *uri, const char *body,
		 int *status, char *resp, size_t respsz)
{
	struct sg_sbuf ans;
	const char *p;
	int rc;

	sg_sbuf_init(&ans);
	rc = http_unix(path, method, uri, body, status, &ans);
	if (rc == 0 && resp && respsz) {
		p = strstr(ans.p, "\r\n\r\n");
		ad_fmt(resp, respsz, "%s", p ? p + 4 : "");
	}
	sg_sbuf_free(&ans);
	return rc;
}

/* A string member of the object at toks[obj] into out ("" if absent). */
static void obj_str(const char *text, const struct sg_jsonp_tok *t, size_t obj, const char *key,
		    char *out, size_t outsz)
{
	size_t j;

	out[0] = '\0';
	if (t[obj].type != SG_JSON_OBJECT)
		return;
	for (j = obj + 1; j < t[obj].next; j = t[j + 1].next)
		if (sg_jsonp_eq(text, &t[j], key) && t[j + 1].type == SG_JSON_STRING) {
			if (sg_jsonp_str(text, &t[j + 1], out, outsz) < 0)
				out[0] = '\0';
			return;
		}
}

int ad_gw_claim(struct ad_gw *g, const char *name)
{
	struct sg_sbuf ans;
	struct sg_jsonp_tok *t = NULL;
	const char *body;
	char s[128], runner[64], pid[32], who[64];
	size_t i, j, ntok, err;
	int status, n, rc = SG_EIO;

	sg_sbuf_init(&ans);
	if (http_unix(g->admin, "GET", "/v1/sandboxes", NULL, &status, &ans) < 0 || status != 200 ||
	    !(body = strstr(ans.p, "\r\n\r\n"))) {
		fprintf(stderr, "sandgate run: cannot list the sandboxes of the gateway at %s\n",
			g->admin);
		goto out;
	}
	body += 4;
	ntok = strlen(body) / 2 + 2;
	t = calloc(ntok, sizeof(*t));
	if (!t || (n = sg_jsonp_parse(body, strlen(body), t, ntok, &err)) < 1 ||
	    t[0].type != SG_JSON_OBJECT) {
		fprintf(stderr, "sandgate run: the gateway at %s: unreadable sandbox list\n", g->admin);
		goto out;
	}
	rc = 0;
	for (i = 1; i < t[0].next; i = t[i + 1].next) {
		if (!sg_jsonp_eq(body, &t[i], "sandboxes") || t[i + 1].type != SG_JSON_ARRAY)
			continue;
		for (j = i + 2; j < t[i + 1].next; j = t[j].next) {
			size_t k, lab = 0;

			obj_str(body, t, j, "name", s, sizeof(s));
			if (strcmp(s, name))
				continue;
			for (k = j + 1; k < t[j].next; k = t[k + 1].next)
				if (sg_jsonp_eq(body, &t[k], "labels"))
					lab = k + 1;
			runner[0] = pid[0] = '\0';
			if (lab) {
				obj_str(body, t, lab, "runner", runner, sizeof(runner));
				obj_str(body, t, lab, "pid", pid, sizeof(pid));
			}
			/* A sandgate run of this host that died without its
			 * teardown: registering again replaces the entry. */
			if (!strcmp(runner, "sandgate-run") && atoi(pid) > 0 &&
			    kill((pid_t)atoi(pid), 0) < 0 && errno == ESRCH) {
				fprintf(stderr, "sandgate run: notice: replacing the registration of %s "
					"left by run %s (gone)\n", name, pid);
				/* Deleted first: the gateway will not register a
				 * name it stopped again over it. */
				if (ad_gw_unregister(g, name) < 0) {
					fprintf(stderr, "sandgate run: cannot remove the stale "
						"registration of %s\n", name);
					rc = SG_EIO;
				}
				continue;
			}
			/* Anyone else's: registering would replace it, and our
			 * teardown would then delete it. */
			if (!strcmp(runner, "sandgate-run"))
				ad_fmt(who, sizeof(who), " (by sandgate run %s)", pid);
			else
				who[0] = '\0';
			fprintf(stderr, "sandgate run: sandbox %s is already registered with the gateway "
				"at %s%s; choose another --sandbox\n", name, g->admin, who);
			rc = SG_EINVAL;
		}
	}
out:
	free(t);
	sg_sbuf_free(&ans);
	return rc;
}

int ad_gw_register(struct ad_gw *g, const char *name, const char *const addrs[], int naddrs,
		   const char *backend)
{
	struct sg_sbuf b;
	char resp[512];
	int i, status, rc;

	sg_sbuf_init(&b);
	sg_sbuf_puts(&b, "{\"name\":");
	sg_sbuf_json_str(&b, name);
	sg_sbuf_puts(&b, ",\"addresses\":[");
	for (i = 0; i < naddrs; i++) {
		if (i)
			sg_sbuf_puts(&b, ",");
		sg_sbuf_json_str(&b, addrs[i]);
	}
	sg_sbuf_puts(&b, "],\"labels\":{\"backend\":");
	sg_sbuf_json_str(&b, backend);
	sg_sbuf_printf(&b, ",\"runner\":\"sandgate-run\",\"pid\":\"%d\"}}", (int)getpid());
	if (b.oom) {
		sg_sbuf_free(&b);
		return SG_ENOMEM;
	}
	rc = ad_http_unix(g->admin, "POST", "/v1/sandboxes", b.p, &status, resp, sizeof(resp));
	sg_sbuf_free(&b);
	if (rc < 0 || status != 201) {
		fprintf(stderr, "sandgate run: registering sandbox %s with the gateway (%s): %s%s\n",
			name, g->admin, rc < 0 ? strerror(errno) : "refused: ", rc < 0 ? "" : resp);
		return SG_EIO;
	}
	return 0;
}

int ad_gw_unregister(struct ad_gw *g, const char *name)
{
	char uri[256];
	int status;

	if (ad_fmt(uri, sizeof(uri), "/v1/sandboxes/%s", name) < 0 ||
	    ad_http_unix(g->admin, "DELETE", uri, NULL, &status, NULL, 0) < 0)
		return SG_EIO;
	return status == 204 ? 0 : SG_EIO;
}

int ad_gw_watch(struct ad_gw *g, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 2, 0 };
	char req[512];
	int fd, n;

	n = snprintf(req, sizeof(req), "GET /v1/sandboxes/%s/wait HTTP/1.1\r\nHost: sandgate\r\n"
		     "Connection: close\r\n\r\n", name);
	if (n <= 0 || (size_t)n >= sizeof(req) || strlen(g->admin) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, g->admin, strlen(g->admin) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* Blocking (bounded: a hung gateway must not stall the supervisor)
	 * for the connect and the small request, then not. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(fd, req, (size_t)n) != n ||
	    fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int ad_gw_watch_read(int fd, struct sg_sbuf *acc, char *reason, size_t reasonsz)
{
	static struct sg_jsonp_tok t[1024];
	const char *body;
	char buf[4096];
	size_t off = 0;

	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r > 0 && acc->len + (size_t)r <= 65536) {
			sg_sbuf_add(acc, buf, (size_t)r);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		break;          /* EOF (the answer is whole), an error, or too long */
	}
	close(fd);
	reason[0] = '\0';
	/* 410: unregistered under us. Only our own teardown unregisters, and
	 * it comes after the watch: someone else removed the sandbox's
	 * identity, so it stops too. */
	if (!acc->oom && acc->len >= 12 && !strncmp(acc->p, "HTTP/1.1 410", 12)) {
		ad_fmt(reason, reasonsz, "unregistered");
		return 1;
	}
	/* 200 is the one answer that means "stopped"; the reason is a
	 * detail (a body we cannot parse still stops the sandbox). */
	if (acc->oom || acc->len < 12 || strncmp(acc->p, "HTTP/1.1 200", 12))
		return -1;
	body = strstr(acc->p, "\r\n\r\n");
	if (body && sg_jsonp_parse(body + 4, acc->len - (size_t)(body + 4 - acc->p), t,
				   SG_ARRAY_LEN(t), &off) > 0)
		obj_str(body + 4, t, 0, "stopped", reason, reasonsz);
	if (!reason[0])
		ad_fmt(reason, reasonsz, "stopped");
	return 1;
}

/* ---------------------------------------------------- start / attach */

int ad_gw_alive(struct ad_gw *g)
{
	int status;

	if (g->pid > 0 && waitpid(g->pid, &status, WNOHANG) == g->pid) {
		g->pid = -1;    /* reaped: never signal that PID again */
		return 0;
	}
	return g->pid != -1;
}

static int spawn_serve(struct ad_gw *g, const char *exe)
{
	pid_t parent = getpid();
	int logfd = open(g->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

	if (logfd < 0)
		return SG_EIO;
	g->pid = fork();
	if (g->pid < 0) {
		close(logfd);
		return SG_EIO;
	}
	if (g->pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		/* The gateway goes with the run, even one killed with SIGKILL. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		ad_child_signals_reset();
		/* Its own process group: a terminal's ^C goes to the run, which
		 * tears down in order, not to the gateway first. */
		setpgid(0, 0);
		dup2(devnull, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		execl(exe, exe, "serve", "-c", g->config, (char *)NULL);
		_exit(127);
	}
	close(logfd);
	return 0;
}

static int wait_ready(struct ad_gw *g)
{
	int i, status;

	for (i = 0; i < 1000; i++) {      /* 10 s */
		if (!ad_gw_alive(g))
			return SG_EIO;
		if (ad_http_unix(g->admin, "GET", "/healthz", NULL, &status, NULL, 0) == 0 &&
		    status == 200)
			return 0;
		usleep(10000);
	}
	return SG_EIO;
}

static void show_log(const char *path)
{
	char buf[4096];

	if (ad_file_read(path, buf, sizeof(buf)) > 0)
		fprintf(stderr, "--- gateway log (%s)\n%s", path, buf);
}

int ad_gw_start(struct ad_gw *g, const char *user_config, const char *state_dir, int verbose)
{
	char exe[512], out[2048], audit[256];
	int tries, rc, dns;

	memset(g, 0, sizeof(*g));
	if (ad_self_exe(exe, sizeof(exe)) < 0 ||
	    ad_fmt(g->admin, sizeof(g->admin), "%s/admin.sock", state_dir) < 0 ||
	    ad_fmt(g->config, sizeof(g->config), "%s/gateway.yaml", state_dir) < 0 ||
	    ad_fmt(g->log, sizeof(g->log), "%s/gateway.log", state_dir) < 0)
		return SG_EINVAL;
	ad_fmt(audit, sizeof(audit), "/var/log/sandgate/run-audit.jsonl");
	if (!user_config)
		ad_mkdir_p("/var/log/sandgate", 0750);
	for (tries = 0; tries < 3; tries++) {
		const char *check[] = { exe, "serve", "-c", g->config, "--check", NULL };

		g->tp_port = free_port(0);
		dns = free_port(1);
		if (g->tp_port < 0 || dns < 0)
			return SG_EIO;
		g->dns_port = dns;
		rc = write_private_config(g, user_config, dns, audit);
		if (rc < 0)
			return rc;
		/* A build without the DNS responder refuses listen.dns: then
		 * the sandbox gets no DNS at all (dropped), and we say so. */
		if (ad_cmd(check, NULL, 0, out, sizeof(out)) != 0) {
			if (!strstr(out, "listen.dns")) {
				fprintf(stderr, "sandgate run: the gateway configuration is invalid:\n%s",
					out);
				return SG_EINVAL;
			}
			g->dns_port = 0;
			if (tries == 0)
				fprintf(stderr, "sandgate run: notice: this gateway has no DNS listener "
					"yet; DNS from the sandbox is dropped (use IP addresses or "
					"/etc/hosts entries)\n");
			if ((rc = write_private_config(g, user_config, 0, audit)) < 0)
				return rc;
		}
		if (spawn_serve(g, exe) < 0)
			return SG_EIO;
		if (wait_ready(g) == 0) {
			if (verbose)
				fprintf(stderr, "sandgate run: gateway pid %d: transparent :%d, "
					"dns :%d, admin %s, log %s\n", (int)g->pid, g->tp_port,
					g->dns_port, g->admin, g->log);
			return 0;
		}
		/* A port taken between our probe and its bind: try new ones. */
		ad_file_read(g->log, out, sizeof(out));
		ad_gw_stop(g);
		if (!strstr(out, "in use"))
			break;
		unlink(g->log);
	}
	fprintf(stderr, "sandgate run: the gateway did not start\n");
	show_log(g->log);
	return SG_EIO;
}

static int port_of(const char *spec, const char *what, const char *config)
{
	const char *colon = strrchr(spec, ':');
	int port = colon ? atoi(colon + 1) : 0;

	if (port <= 0 || port > 65535) {
		fprintf(stderr, "sandgate run: %s: gateway.listen.%s \"%s\": need a fixed port to "
			"redirect to\n", config, what, spec);
		return SG_EINVAL;
	}
	if (strncmp(spec, "[::]:", 5) && strncmp(spec, "0.0.0.0:", 8))
		fprintf(stderr, "sandgate run: warning: gateway.listen.%s \"%s\" is not a wildcard "
			"address; redirected connections arrive on the sandbox interface's address\n",
			what, spec);
	return port;
}

int ad_gw_attach(struct ad_gw *g, const char *admin, const char *user_config)
{
	yaml_document_t doc;
	char tp[128], dns[128];
	int status;

	memset(g, 0, sizeof(*g));
	if (strncmp(admin, "unix:", 5) || ad_fmt(g->admin, sizeof(g->admin), "%s", admin + 5) < 0) {
		fprintf(stderr, "sandgate run: --gateway: expected unix:PATH\n");
		return SG_EINVAL;
	}
	/* The control API does not tell its listen ports: the config does. */
	if (!user_config) {
		fprintf(stderr, "sandgate run: --gateway needs -c FILE (the gateway's configuration: "
			"its transparent and dns ports)\n");
		return SG_EINVAL;
	}
	if (yaml_load(user_config, &doc) < 0)
		return SG_EINVAL;
	yaml_path(&doc, "gateway.listen.transparent", tp, sizeof(tp));
	yaml_path(&doc, "gateway.listen.dns", dns, sizeof(dns));
	yaml_path(&doc, "gateway.tls.ca.cert", g->ca_cert, sizeof(g->ca_cert));
	yaml_document_delete(&doc);
	if (!tp[0]) {
		fprintf(stderr, "sandgate run: %s: the gateway has no gateway.listen.transparent\n",
			user_config);
		return SG_EINVAL;
	}
	g->tp_port = port_of(tp, "transparent", user_config);
	g->dns_port = dns[0] ? port_of(dns, "dns", user_config) : 0;
	if (g->tp_port < 0 || g->dns_port < 0)
		return SG_EINVAL;
	if (!dns[0])
		fprintf(stderr, "sandgate run: notice: the gateway has no DNS listener; DNS from the "
			"sandbox is dropped\n");
	if (ad_http_unix(g->admin, "GET", "/healthz", NULL, &status, NULL, 0) < 0 || status != 200) {
		fprintf(stderr, "sandgate run: the gateway at %s is not answering /healthz\n",
			g->admin);
		return SG_EIO;
	}
	g->pid = 0;
	return 0;
}

void ad_gw_stop(struct ad_gw *g)
{
	int i, status;

	if (g->pid <= 0)
		return;
	kill(g->pid, SIGTERM);
	for (i = 0; i < 300; i++) {
		if (waitpid(g->pid, &status, WNOHANG) == g->pid) {
			g->pid = -1;
			return;
		}
		usleep(10000);
	}
	kill(g->pid, SIGKILL);
	waitpid(g->pid, &status, 0);
	g->pid = -1;
}

/* ------------------------------------------------------------ CA */

int ad_ca_bundle(const char *out_path, const char *ca_cert)
{
	static const char *const system_bundles[] = {
		"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", NULL
	};
	struct sg_sbuf b;
	char *buf = malloc(4 << 20);
	ssize_t n;
	int i, rc;

	if (!buf)
		return SG_ENOMEM;
	sg_sbuf_init(&b);
	/* The interception CA first: it is the one the sandbox needs. */
	if (ca_cert && ca_cert[0]) {
		n = ad_file_read(ca_cert, buf, 4 << 20);
		if (n <= 0) {
			fprintf(stderr, "sandgate run: gateway.tls.ca.cert %s: cannot read it\n",
				ca_cert);
			free(buf);
			return SG_EIO;
		}
		sg_sbuf_puts(&b, "# sandgate interception CA\n");
		sg_sbuf_add(&b, buf, (size_t)n);
		if (buf[n - 1] != '\n')
			sg_sbuf_puts(&b, "\n");
	}
	for (i = 0; system_bundles[i]; i++) {
		n = ad_file_read(system_bundles[i], buf, 4 << 20);
		if (n > 0) {
			sg_sbuf_add(&b, buf, (size_t)n);
			break;
		}
	}
	free(buf);
	rc = b.oom ? SG_ENOMEM : ad_file_write(out_path, b.p ? b.p : "", b.len, 0644);
	sg_sbuf_free(&b);
	return rc;
}
