/*
 * serve.c - `sandgate serve`: workers, listeners, signals, reload, drain.
 *
 * The main thread loads the config, opens the audit writer, binds one
 * SO_REUSEPORT listener per worker and kind, starts the workers and then
 * only waits for signals (sigwaitinfo: no async-signal-safety puzzles):
 *   SIGHUP   re-read the config; a valid one becomes the new snapshot,
 *            an invalid one is logged and audited and the old one stays;
 *   SIGUSR1  reopen the audit file;
 *   SIGTERM/SIGINT  drain: stop accepting, let connections finish for
 *            drain_timeout, then close what is left.
 * Workers learn of changes through their eventfd.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_jsonp.h"
#include "sg_log.h"
#include "audit/aud.h"
#include "audit/aud_verify.h"
#include "gateway/admin.h"
#include "gateway/dns.h"
#include "gateway/gw.h"
#include "gateway/resolver.h"
#include "gateway/serve.h"
#include "sg_poison.h"

/* ------------------------------------------------------------ snapshots */

struct gw_snap *gw_snap_new(struct sg_config *cfg, uint64_t generation)
{
	struct gw_snap *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	atomic_init(&s->refs, 1);
	s->cfg = cfg;
	s->generation = generation;
	return s;
}

struct gw_snap *gw_snap_ref(struct gw_snap *s)
{
	atomic_fetch_add(&s->refs, 1);
	return s;
}

void gw_snap_put(struct gw_snap *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
		pol_config_free(s->cfg);
		free(s);
	}
}

/* ------------------------------------------------------------ listeners */

int gw_listen_socket(const char *spec, int reuse_port, int transparent_ok,
		     char *err, size_t errsz, int *bound_port)
{
	char host[INET6_ADDRSTRLEN + 2];
	struct sockaddr_storage ss;
	struct sg_addr a;
	socklen_t sl;
	int port, fd, one = 1, zero = 0;
	const char *colon = strrchr(spec, ':');

	SG_UNUSED(transparent_ok);
	/* "HOST:PORT"; port 0 asks the kernel for one (tests). */
	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host)) {
		snprintf(err, errsz, "listen \"%s\": expected HOST:PORT", spec);
		return -1;
	}
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	port = atoi(colon + 1);
	if (sg_addr_parse(host, strlen(host), &a) < 0 || port < 0 || port > 65535) {
		snprintf(err, errsz, "listen \"%s\": expected an IP address and a port", spec);
		return -1;
	}
	/* "[::]" must stay a dual-stack v6 socket even though sg_addr folds
	 * nothing there; a v4-mapped spec is treated as v4. */
	sl = sg_addr_to_sa(&a, (uint16_t)port, &ss);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errsz, "listen \"%s\": socket: %s", spec, strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (reuse_port)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	/* Accepted sockets inherit it: no setsockopt per connection. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 4096) < 0) {
		snprintf(err, errsz, "listen \"%s\": %s", spec, strerror(errno));
		close(fd);
		return -1;
	}
	sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*bound_port = sg_addr_from_sa((struct sockaddr *)&ss, &a);
	return fd;
}

static void listener_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct gw_listener *ls = sg_container_of(io, struct gw_listener, io);
	int n;

	SG_UNUSED(l);
	SG_UNUSED(ev);
	/* Level-triggered, bounded per wakeup so one busy listener cannot
	 * starve the connections already on this loop. */
	for (n = 0; n < 64; n++) {
		int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				sg_warn("accept: %s", strerror(errno));
			break;
		}
		gw_conn_accept(ls->w, ls, fd);
	}
}

/* --------------------------------------------------------------- workers */

static void worker_sync(struct gw_worker *w)
{
	struct gw_daemon *d = w->d;
	int i, reg_changed = 0;

	pthread_mutex_lock(&d->mu);
	if (d->snap != w->snap) {
		gw_snap_put(w->snap);
		w->snap = gw_snap_ref(d->snap);
	}
	if (d->registry != w->registry) {
		gw_registry_put(w->registry);
		w->registry = gw_registry_ref(d->registry);
		reg_changed = 1;
	}
	pthread_mutex_unlock(&d->mu);
	/* A sandbox the gateway stopped keeps nothing open. */
	if (reg_changed)
		gw_conn_close_stopped(w);
	if (atomic_load(&d->drain) && !w->draining) {
		w->draining = 1;
		for (i = 0; i < w->n_listeners; i++) {
			gw_io_del(w->loop, &w->listeners[i].io);
			close(w->listeners[i].io.fd);
		}
		w->n_listeners = 0;
		gw_dns_worker_drain(w);         /* DNS responder hook */
	}
	if (atomic_load(&d->stop_now))
		gw_conn_close_all(w);
}

static void wake_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct gw_worker *w = sg_container_of(io, struct gw_worker, wake);
	uint64_t v;

	SG_UNUSED(l);
	SG_UNUSED(ev);
	if (read(io->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		sg_warn("worker %d: eventfd: %s", w->id, strerror(errno));
	worker_sync(w);
}

static void worker_before_sleep(struct gw_loop *l, void *arg)
{
	struct gw_worker *w = arg;

	gw_resolver_before_sleep(w->resolver);
	gw_dns_before_sleep(w);                 /* DNS responder hook */
	gw_worker_free_closed(w);
	if (w->draining && w->n_conns == 0)
		gw_loop_stop(l);
}

static void *worker_main(void *arg)
{
	struct gw_worker *w = arg;

	gw_loop_run(w->loop);
	gw_dns_worker_stop(w);                  /* DNS responder hook: before the resolver goes */
	gw_conn_close_all(w);
	gw_worker_free_closed(w);
	return NULL;
}

static void wake_all(struct gw_daemon *d)
{
	uint64_t one = 1;
	int i;

	for (i = 0; i < d->n_workers; i++)
		if (write(d->workers[i].wake.fd, &one, sizeof(one)) < 0)
			sg_warn("wake worker %d: %s", i, strerror(errno));
}

/* ---------------------------------------------------------------- audit */

static void audit_lifecycle(struct gw_daemon *d, const char *event, const char *decision,
			    const char *reason, const char *error)
{
	struct aud_rec r;

	aud_rec_begin(&r, event);
	aud_rec_decision(&r, NULL, decision, reason, NULL);
	sg_json_str(&r.j, "version", SG_VERSION);
	if (d->snap)
		sg_json_int(&r.j, "generation", (int64_t)d->snap->generation);
	sg_json_str(&r.j, "config", d->config_path);
	if (error)
		sg_json_str(&r.j, "error", error);
	aud_rec_submit(d->audit, &r);
}

/* ---------------------------------------------------------------- reload */

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Called on the main thread only (SIGHUP and the control API). */
int gw_reload(struct gw_daemon *d, char *err, size_t errsz)
{
	struct sg_config *cfg = NULL;
	struct gw_snap *s, *old;
	const struct sg_config *cur = d->snap->cfg;

	if (pol_config_load(d->config_path, &cfg, err, errsz) < 0) {
		sg_err("reload rejected, the running policy stays: %s", err);
		audit_lifecycle(d, "policy_reload", "deny", "invalid_config", err);
		atomic_fetch_add(&d->reloads_failed, 1);
		return SG_EINVAL;
	}
	/* What is bound or started once cannot change under a running
	 * process: say so rather than pretend. */
	if (!same_str(cfg->listen_transparent, cur->listen_transparent) ||
	    !same_str(cfg->listen_proxy, cur->listen_proxy) ||
	    !same_str(cfg->listen_dns, cur->listen_dns) ||
	    !same_str(cfg->listen_admin, cur->listen_admin) ||
	    !same_str(cfg->admin_token, cur->admin_token) ||
	    !same_str(cfg->audit_path, cur->audit_path) ||
	    !same_str(cfg->audit_key, cur->audit_key) ||
	    !same_str(cfg->audit_syslog, cur->audit_syslog) ||
	    cfg->audit_rotate_size != cur->audit_rotate_size ||
	    cfg->audit_rotate_keep != cur->audit_rotate_keep ||
	    !same_str(cfg->resolver_servers, cur->resolver_servers) ||
	    cfg->workers != cur->workers)
		sg_warn("reload: listen addresses, the admin token, workers, resolver servers "
			"and the audit settings (path, key, rotate, syslog) keep their running "
			"values until a restart");
	s = gw_snap_new(cfg, d->generation + 1);
	if (!s) {
		pol_config_free(cfg);
		snprintf(err, errsz, "out of memory");
		audit_lifecycle(d, "policy_reload", "deny", "out_of_memory", err);
		atomic_fetch_add(&d->reloads_failed, 1);
		return SG_ENOMEM;
	}
	pthread_mutex_lock(&d->mu);
	d->generation++;
	old = d->snap;
	d->snap = s;
	pthread_mutex_unlock(&d->mu);
	gw_snap_put(old);       /* in-flight connections keep their own refs */
	if (cfg->log_level)
		sg_log_level_parse(cfg->log_level, &sg_log_threshold);
	wake_all(d);
	sg_info("reloaded %s (generation %llu)", d->config_path,
		(unsigned long long)d->generation);
	audit_lifecycle(d, "policy_reload", "allow", "reloaded", NULL);
	atomic_fetch_add(&d->reloads_ok, 1);
	return 0;
}

/* ------------------------------------------------------- control plane */

struct gw_snap *gw_snap_current(struct gw_daemon *d)
{
	struct gw_snap *s;

	pthread_mutex_lock(&d->mu);
	s = gw_snap_ref(d->snap);
	pthread_mutex_unlock(&d->mu);
	return s;
}

struct gw_registry *gw_registry_current(struct gw_daemon *d)
{
	struct gw_registry *r;

	pthread_mutex_lock(&d->mu);
	r = gw_registry_ref(d->registry);
	pthread_mutex_unlock(&d->mu);
	return r;
}

uint64_t gw_generation(struct gw_daemon *d)
{
	uint64_t g;

	pthread_mutex_lock(&d->mu);
	g = d->generation;
	pthread_mutex_unlock(&d->mu);
	return g;
}

int gw_healthy(struct gw_daemon *d)
{
	return d->audit_on_failure_allow || !aud_failing(d->audit);
}

/* Registry writers (register, unregister, stop) each read the current
 * registry, build the next and swap it in: one at a time, or two writers
 * from different threads (the control API, a worker's block_and_kill)
 * would each build on the same one and lose an update. One daemon per
 * process, hence static. */
static pthread_mutex_t reg_write_mu = PTHREAD_MUTEX_INITIALIZER;

static void registry_swap(struct gw_daemon *d, struct gw_registry *nr)
{
	struct gw_registry *old;

	pthread_mutex_lock(&d->mu);
	old = d->registry;
	d->registry = nr;
	pthread_mutex_unlock(&d->mu);
	gw_registry_put(old);
	wake_all(d);
}

/*
 * Labels as ["key=value", ...]: audit records stay flat (values are
 * scalars or arrays of strings), which is what audit query reads.
 */
static void audit_labels(struct aud_rec *r, const char *labels)
{
	struct sg_jsonp_tok t[64];
	char out[GW_REG_LABELS_MAX * 2], k[GW_REG_LABELS_MAX], v[GW_REG_LABELS_MAX], kv[2 * GW_REG_LABELS_MAX + 2];
	int n = sg_jsonp_parse(labels, strlen(labels), t, SG_ARRAY_LEN(t), NULL);
	size_t i, o = 0;

	if (n <= 0 || t[0].type != SG_JSON_OBJECT)
		return;
	out[o++] = '[';
	for (i = 1; i < t[0].next; i = t[i + 1].next) {
		int w;

		if (sg_jsonp_str(labels, &t[i], k, sizeof(k)) < 0 ||
		    sg_jsonp_str(labels, &t[i + 1], v, sizeof(v)) < 0)
			continue;
		snprintf(kv, sizeof(kv), "%s=%s", k, v);
		if (o > 1)
			out[o++] = ',';
		w = sg_json_quote(out + o, sizeof(out) - o - 1, kv, strlen(kv));
		if (w < 0)
			return;
		o += (size_t)w;
	}
	out[o++] = ']';
	sg_json_raw(&r->j, "labels", out, o);
}

static void audit_sandbox(struct gw_daemon *d, const char *event, const char *decision,
			  const char *reason, const struct gw_reg_entry *e)
{
	struct aud_rec r;
	char ip[INET6_ADDRSTRLEN], list[GW_REG_ADDRS_MAX * (INET6_ADDRSTRLEN + 3) + 3];
	size_t i, o = 0;

	aud_rec_begin(&r, event);
	aud_rec_decision(&r, e->name, decision, reason, NULL);
	list[o++] = '[';
	for (i = 0; i < e->n_addrs; i++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s\"%s\"", i ? "," : "",
				      sg_addr_str(&e->addrs[i], ip, sizeof(ip)));
	list[o++] = ']';
	sg_json_raw(&r.j, "addresses", list, o);
	if (e->labels[0])
		audit_labels(&r, e->labels);
	aud_rec_submit(d->audit, &r);
}

int gw_register(struct gw_daemon *d, const struct gw_reg_entry *e, char *err, size_t errsz)
{
	struct gw_registry *cur, *nr;
	const struct gw_reg_entry *old;
	const char *conflict = NULL;

	pthread_mutex_lock(&reg_write_mu);
	cur = gw_registry_current(d);
	/* Registering a stopped name again would undo the stop: it goes
	 * only when its adapter (or an operator) deletes it. */
	old = gw_registry_find(cur, e->name);
	if (old && old->stopped[0]) {
		snprintf(err, errsz, "sandbox \"%s\" was stopped by the gateway (%s): "
			 "DELETE it first", e->name, old->stopped);
		gw_registry_put(cur);
		pthread_mutex_unlock(&reg_write_mu);
		return SG_EINVAL;
	}
	nr = gw_registry_with(cur, e, &conflict);
	if (!nr) {
		if (conflict)
			snprintf(err, errsz, "an address is already registered to \"%s\"", conflict);
		else
			snprintf(err, errsz, "out of memory");
		gw_registry_put(cur);
		pthread_mutex_unlock(&reg_write_mu);
		return conflict ? SG_EINVAL : SG_ENOMEM;
	}
	gw_registry_put(cur);
	registry_swap(d, nr);
	pthread_mutex_unlock(&reg_write_mu);
	sg_info("sandbox %s registered", e->name);
	audit_sandbox(d, "sandbox_start", "allow", "registered", e);
	return 0;
}

int gw_unregister(struct gw_daemon *d, const char *name)
{
	struct gw_registry *cur, *nr;
	const struct gw_reg_entry *e;
	struct gw_reg_entry copy;
	int found;

	pthread_mutex_lock(&reg_write_mu);
	cur = gw_registry_current(d);
	e = gw_registry_find(cur, name);
	if (!e) {
		gw_registry_put(cur);
		pthread_mutex_unlock(&reg_write_mu);
		return SG_EINVAL;
	}
	copy = *e;
	nr = gw_registry_without(cur, name, &found);
	gw_registry_put(cur);
	if (nr)
		registry_swap(d, nr);
	pthread_mutex_unlock(&reg_write_mu);
	if (!nr)
		return SG_ENOMEM;
	sg_info("sandbox %s unregistered", name);
	audit_sandbox(d, "sandbox_stop", "allow", "unregistered", &copy);
	return 0;
}

int gw_stop_sandbox(struct gw_daemon *d, const char *name, const char *reason)
{
	struct gw_registry *cur, *nr;
	const struct gw_reg_entry *e;
	struct gw_reg_entry copy;
	const char *conflict = NULL;

	pthread_mutex_lock(&reg_write_mu);
	cur = gw_registry_current(d);
	e = gw_registry_find(cur, name);
	if (!e || e->stopped[0]) {
		gw_registry_put(cur);
		pthread_mutex_unlock(&reg_write_mu);
		return e ? 0 : SG_EINVAL;
	}
	copy = *e;
	snprintf(copy.stopped, sizeof(copy.stopped), "%s", reason);
	copy.stopped_at = (int64_t)time(NULL);
	/* Same name, same addresses: replaces the entry, no conflict. */
	nr = gw_registry_with(cur, &copy, &conflict);
	gw_registry_put(cur);
	if (nr)
		registry_swap(d, nr);
	pthread_mutex_unlock(&reg_write_mu);
	if (!nr)
		return SG_ENOMEM;
	sg_warn("sandbox %s stopped: %s", name, reason);
	/* A deny: from now on its traffic is refused. */
	audit_sandbox(d, "sandbox_stop", "deny", reason, &copy);
	return 0;
}

/* A counter with one label taking two values. */
static void metric_pair(struct sg_sbuf *out, const char *name, const char *help,
			const char *label, const char *a, uint64_t va, const char *b, uint64_t vb)
{
	sg_sbuf_printf(out, "# HELP sandgate_%s %s\n# TYPE sandgate_%s counter\n"
		       "sandgate_%s{%s=\"%s\"} %llu\nsandgate_%s{%s=\"%s\"} %llu\n",
		       name, help, name, name, label, a, (unsigned long long)va,
		       name, label, b, (unsigned long long)vb);
}

void gw_metrics_text(struct gw_daemon *d, struct sg_sbuf *out)
{
	struct gw_metrics *ms[256];
	struct aud_stats as;
	uint64_t hits = 0, misses = 0, entries = 0;
	int i;

	for (i = 0; i < d->n_workers && i < 256; i++) {
		uint64_t h, m, e;

		ms[i] = &d->workers[i].metrics;
		gw_resolver_stats(d->workers[i].resolver, &h, &m, &e);
		hits += h;
		misses += m;
		entries += e;
	}
	gw_metrics_write(ms, (size_t)i, out);
	memset(&as, 0, sizeof(as));
	if (d->audit)
		aud_stats_get(d->audit, &as);
#define M(name, type, help, fmt, ...) sg_sbuf_printf(out, "# HELP sandgate_" name " " help "\n" \
	"# TYPE sandgate_" name " " type "\n" "sandgate_" name fmt "\n", __VA_ARGS__)
	M("open_connections", "gauge", "Client connections open now.", " %ld",
	  (long)atomic_load(&d->n_conns));
	M("accepted_total", "counter", "Client connections accepted.", " %llu",
	  (unsigned long long)atomic_load(&d->stats.accepted));
	metric_pair(out, "refused_total", "Connections closed at accept.", "why",
		    "max_connections", atomic_load(&d->stats.refused_limit),
		    "audit_failing", atomic_load(&d->stats.refused_audit));
	metric_pair(out, "bytes_total", "Bytes relayed, by direction.", "direction",
		    "up", atomic_load(&d->stats.bytes_up),
		    "down", atomic_load(&d->stats.bytes_down));
	metric_pair(out, "reloads_total", "Configuration reloads, by result.", "result",
		    "ok", atomic_load(&d->reloads_ok), "error", atomic_load(&d->reloads_failed));
	M("policy_generation", "gauge", "The running policy snapshot's number.", " %llu",
	  (unsigned long long)gw_generation(d));
	M("resolver_cache_hits_total", "counter", "Names answered from the cache.", " %llu",
	  (unsigned long long)hits);
	M("resolver_cache_misses_total", "counter", "Names sent to the resolver.", " %llu",
	  (unsigned long long)misses);
	M("resolver_cache_entries", "gauge", "Names in the cache.", " %llu",
	  (unsigned long long)entries);
	M("audit_records_written_total", "counter", "Audit records written.", " %llu",
	  (unsigned long long)as.written);
	M("audit_records_lost_total", "counter", "Audit records lost (queue full while failing).",
	  " %llu", (unsigned long long)as.lost);
	M("audit_failing", "gauge", "1 while audit records cannot be written.", " %d",
	  as.failing);
	M("audit_rotations_total", "counter", "Audit files started.", " %llu",
	  (unsigned long long)as.rotations);
	M("audit_syslog_dropped_total", "counter", "Records the syslog copy dropped.", " %llu",
	  (unsigned long long)as.syslog_dropped);
	{
		struct gw_registry *r = gw_registry_current(d);

		M("registered_sandboxes", "gauge", "Sandboxes registered through the API.",
		  " %zu", r->n);
		gw_registry_put(r);
	}
#undef M
	gw_dns_metrics(d, out);                 /* DNS responder hook */
}

/* ----------------------------------------------------------------- serve */

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			sg_warn("cannot raise the open-file limit: %s", strerror(errno));
	}
}

static int nproc(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)SG_MIN(n, 256) : 1;
}

/* Bind kind's listeners for all workers; port 0 binds the first one's port. */
static int bind_kind(struct gw_daemon *d, const char *spec, enum gw_listener_kind kind,
		     const char *name)
{
	char err[256], buf[128];
	int i, port = -1;

	for (i = 0; i < d->n_workers; i++) {
		struct gw_worker *w = &d->workers[i];
		struct gw_listener *ls = &w->listeners[w->n_listeners];
		const char *s = spec;
		int fd;

		if (i > 0 && port >= 0) {
			/* The same port for every worker: the kernel spreads
			 * connections over the SO_REUSEPORT group. */
			const char *colon = strrchr(spec, ':');

			snprintf(buf, sizeof(buf), "%.*s:%d", (int)(colon - spec), spec, port);
			s = buf;
		}
		fd = gw_listen_socket(s, 1, 1, err, sizeof(err), &port);
		if (fd < 0) {
			sg_err("%s", err);
			return -1;
		}
		ls->kind = kind;
		ls->w = w;
		ls->io.fd = fd;
		ls->port = port;
		w->n_listeners++;
	}
	{
		const char *colon = strrchr(spec, ':');

		sg_info("listening %s on %.*s:%d", name, (int)(colon - spec), spec, port);
	}
	return 0;
}

static int workers_start(struct gw_daemon *d, char *err, size_t errsz)
{
	int i, j;

	for (i = 0; i < d->n_workers; i++) {
		struct gw_worker *w = &d->workers[i];
		int efd;

		w->id = i;
		w->d = d;
		w->snap = gw_snap_ref(d->snap);
		w->registry = gw_registry_ref(d->registry);
		gw_metrics_init(&w->metrics);
		w->loop = gw_loop_new();
		if (!w->loop) {
			snprintf(err, errsz, "event loop: %s", strerror(errno));
			return -1;
		}
		w->resolver = gw_resolver_new(w->loop, d->snap->cfg, err, errsz);
		if (!w->resolver)
			return -1;
		efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (efd < 0 || gw_io_add(w->loop, &w->wake, efd, EPOLLIN, wake_io) < 0) {
			snprintf(err, errsz, "eventfd: %s", strerror(errno));
			return -1;
		}
		for (j = 0; j < w->n_listeners; j++)
			if (gw_io_add(w->loop, &w->listeners[j].io, w->listeners[j].io.fd,
				      EPOLLIN, listener_io) < 0) {
				snprintf(err, errsz, "epoll: %s", strerror(errno));
				return -1;
			}
		if (w->dns && gw_dns_worker_init(w, err, errsz) < 0)     /* DNS responder hook */
			return -1;
		gw_loop_set_hook(w->loop, worker_before_sleep, w);
	}
	for (i = 0; i < d->n_workers; i++)
		if (pthread_create(&d->workers[i].thread, NULL, worker_main, &d->workers[i])) {
			snprintf(err, errsz, "cannot start worker threads");
			return -1;
		}
	return 0;
}

static void drain_and_join(struct gw_daemon *d, int64_t timeout_ms)
{
	int64_t deadline = gw_now_ms() + timeout_ms;
	int i;

	atomic_store(&d->drain, 1);
	wake_all(d);
	/* Workers stop on their own when their last connection closes. */
	for (;;) {
		if (atomic_load(&d->n_conns) == 0 || gw_now_ms() >= deadline)
			break;
		usleep(20000);
	}
	if (atomic_load(&d->n_conns) > 0) {
		sg_warn("drain: %ld connections still open after %lld ms; closing them",
			(long)atomic_load(&d->n_conns), (long long)timeout_ms);
		atomic_store(&d->stop_now, 1);
		wake_all(d);
	}
	for (i = 0; i < d->n_workers; i++) {
		/* A worker with no connections may still be asleep. */
		wake_all(d);
		pthread_join(d->workers[i].thread, NULL);
	}
}

static void daemon_free(struct gw_daemon *d)
{
	int i, j;

	for (i = 0; i < d->n_workers; i++) {
		struct gw_worker *w = &d->workers[i];

		for (j = 0; j < w->n_listeners; j++)
			close(w->listeners[j].io.fd);
		if (w->resolver)
			gw_resolver_free(w->resolver);
		if (w->wake.registered)
			close(w->wake.fd);
		for (j = 0; j < w->n_pipes; j++) {
			close(w->pipes[j].fds[0]);
			close(w->pipes[j].fds[1]);
		}
		gw_snap_put(w->snap);
		if (w->registry) {
			gw_registry_put(w->registry);
			gw_metrics_destroy(&w->metrics);
		}
		gw_loop_free(w->loop);
	}
	gw_dns_free(d);                         /* DNS responder hook */
	free(d->workers);
	gw_snap_put(d->snap);
	gw_registry_put(d->registry);
	pthread_mutex_destroy(&d->mu);
}

/*
 * The main thread's loop: signals (signalfd) and the control API. It
 * returns when SIGTERM or SIGINT asks for a drain.
 */
struct main_ctx {
	struct gw_daemon *d;
	struct gw_io sig;
};

static void signal_io(struct gw_loop *l, struct gw_io *io, uint32_t ev)
{
	struct main_ctx *m = sg_container_of(io, struct main_ctx, sig);
	struct signalfd_siginfo si;
	char err[512];

	SG_UNUSED(ev);
	while (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			gw_reload(m->d, err, sizeof(err));
		} else if (si.ssi_signo == SIGUSR1) {
			/* The writer thread reopens; a renamed file gets an
			 * audit_rotate record at the top of the new one. */
			aud_reopen(m->d->audit);
			sg_info("audit: reopening the file (SIGUSR1)");
		} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			sg_info("draining (%s)", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
			gw_loop_stop(l);
		}
	}
}

static int main_loop(struct gw_daemon *d, const sigset_t *set)
{
	const struct sg_config *cfg = d->snap->cfg;
	struct main_ctx m = { .d = d };
	struct gw_loop *l = gw_loop_new();
	struct gw_admin *admin = NULL;
	struct aud_key token = { 0 };
	char err[512];
	int fd, rc = -1;

	if (!l)
		return -1;
	fd = signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0 || gw_io_add(l, &m.sig, fd, EPOLLIN, signal_io) < 0) {
		sg_err("signalfd: %s", strerror(errno));
		goto out;
	}
	if (cfg->listen_admin) {
		if (cfg->admin_token &&
		    aud_key_load(cfg->admin_token, &token, err, sizeof(err)) < 0) {
			sg_err("gateway.admin_token: %s", err);
			goto out;
		}
		admin = gw_admin_start(d, l, cfg->listen_admin, (const char *)token.bytes,
				       token.len, err, sizeof(err));
		aud_key_free(&token);
		if (!admin) {
			sg_err("%s", err);
			goto out;
		}
	}
	audit_lifecycle(d, "gateway_start", "allow", "started", NULL);
	sg_info("sandgate %s serving with %d worker%s", SG_VERSION, d->n_workers,
		d->n_workers == 1 ? "" : "s");
	gw_loop_run(l);
	rc = 0;
out:
	gw_admin_stop(admin);
	if (fd >= 0)
		close(fd);
	gw_loop_free(l);
	return rc;
}

int gw_serve(const char *config_path, int check_only)
{
	struct gw_daemon d;
	struct sg_config *cfg = NULL;
	char err[512];
	sigset_t set;
	int rc = 1, i;

	memset(&d, 0, sizeof(d));
	d.config_path = config_path;
	pthread_mutex_init(&d.mu, NULL);
	if (pol_config_load(config_path, &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		pthread_mutex_destroy(&d.mu);
		return 1;
	}
	if (!cfg->listen_transparent && !cfg->listen_proxy) {
		fprintf(stderr, "%s: gateway.listen: give transparent and/or proxy\n",
			config_path);
		pol_config_free(cfg);
		pthread_mutex_destroy(&d.mu);
		return 1;
	}
	if (check_only && cfg->audit_key) {
		/* Load it to prove it is there and long enough; never print it. */
		struct aud_key key;

		if (aud_key_load(cfg->audit_key, &key, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s: %s\n", config_path, err);
			pol_config_free(cfg);
			pthread_mutex_destroy(&d.mu);
			return 1;
		}
		aud_key_free(&key);
	}
	if (check_only) {
		printf("%s: ok\n", config_path);
		pol_config_free(cfg);
		pthread_mutex_destroy(&d.mu);
		return 0;
	}
	if (cfg->log_level)
		sg_log_level_parse(cfg->log_level, &sg_log_threshold);
	d.snap = gw_snap_new(cfg, ++d.generation);
	d.registry = gw_registry_new();
	if (!d.snap || !d.registry) {
		gw_registry_put(d.registry);
		pol_config_free(cfg);
		pthread_mutex_destroy(&d.mu);
		return 1;
	}
	d.audit_on_failure_allow = cfg->audit_on_failure_allow;

	/* Signals are taken by the main thread only: block them before any
	 * thread exists so every worker inherits the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	d.n_workers = cfg->workers ? cfg->workers : nproc();
	d.workers = calloc((size_t)d.n_workers, sizeof(*d.workers));
	if (!d.workers)
		goto out;
	if (cfg->audit_path) {
		struct aud_config ac = {
			.path = cfg->audit_path,
			.fsync_mode = cfg->audit_fsync,
			.key_spec = cfg->audit_key,
			.rotate_size = cfg->audit_rotate_size,
			.rotate_keep = cfg->audit_rotate_keep,
			.syslog = cfg->audit_syslog,
		};

		d.audit = aud_open(&ac, err, sizeof(err));
		if (!d.audit) {
			sg_err("%s", err);
			goto out;
		}
	} else {
		sg_warn("no audit.path: decisions are not recorded");
	}
	if ((cfg->listen_transparent &&
	     bind_kind(&d, cfg->listen_transparent, GW_LISTEN_TRANSPARENT, "transparent") < 0) ||
	    (cfg->listen_proxy && bind_kind(&d, cfg->listen_proxy, GW_LISTEN_PROXY, "proxy") < 0))
		goto out;
	if (cfg->listen_dns && gw_dns_bind(&d, cfg->listen_dns, err, sizeof(err)) < 0) {
		sg_err("%s", err);                 /* DNS responder hook */
		goto out;
	}
	if (workers_start(&d, err, sizeof(err)) < 0) {
		sg_err("%s", err);
		goto out;
	}

	if (main_loop(&d, &set) < 0)
		goto out;
	drain_and_join(&d, d.snap->cfg->drain_timeout_ms);
	gw_dns_shutdown(&d);                    /* DNS responder hook: aggregated records */
	audit_lifecycle(&d, "gateway_stop", "allow", "stopped", NULL);
	sg_info("stopped");
	rc = 0;
out:
	if (rc) {
		/* Startup failed half-way: stop whatever threads started. */
		atomic_store(&d.drain, 1);
		atomic_store(&d.stop_now, 1);
		for (i = 0; i < d.n_workers; i++)
			if (d.workers && d.workers[i].thread) {
				wake_all(&d);
				pthread_join(d.workers[i].thread, NULL);
			}
	}
	aud_close(d.audit);
	daemon_free(&d);
	return rc;
}
