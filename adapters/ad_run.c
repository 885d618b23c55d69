/*
 * ad_run.c - `sandgate run`: one sandbox whose only way out is sandgate.
 *
 * Order (each step is undone in reverse by teardown(), which every exit
 * path goes through, signals included):
 *   sweep stale runs -> id + subnet + state dir -> gateway (start or
 *   attach) -> namespace + veth/tap -> nft table -> CA bundle, resolv.conf,
 *   hosts, environment -> register name + addresses -> start CMD -> wait.
 * The sandbox is registered before CMD starts, so its first connection is
 * already judged under its name.
 *
 * Signals: SIGINT, SIGTERM, SIGHUP are forwarded to the sandbox once; if
 * it is still there 3 s later it is killed. This process asks for SIGTERM
 * when its own parent dies (PR_SET_PDEATHSIG), so a killed supervisor
 * still leads to a teardown. SIGKILL cannot be caught: what it leaves
 * (runtime container, table, link, namespace, cgroups, state) is swept
 * by the next run, and the gateway and the sandbox die with us (their
 * PDEATHSIG).
 *
 * Exit status: CMD's (128+N when a signal ended it); 125 when sandgate
 * failed before CMD ran; 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_sbuf.h"
#include "adapters/ad.h"
#include "sg_poison.h"

#define RUN_FAILED 125
#define MAX_ENV 128

struct run {
	struct ad_spec spec;
	struct ad_net net;
	struct ad_gw gw;
	struct ad_sbx sbx;
	const struct ad_backend *be;
	const char *config, *gateway;
	int registered, started, verbose;
	char *env[MAX_ENV];
	int nenv;
	char ca[128], resolv[128], hosts[128];
	char name_buf[64];
};

static int usage(void)
{
	fprintf(stderr,
		"usage: sandgate run [-c FILE] [--backend container|gvisor|microvm] [--runtime runc|crun]\n"
		"                    [--sandbox NAME] [--workspace DIR] [--rootfs DIR] [--gateway unix:PATH]\n"
		"                    [--env K=V]... [--memory SIZE] [--pids N] [-v] -- CMD [ARG...]\n");
	return 2;
}

/*
 * The paths sandgate creates and mounts on inside a --rootfs, as the
 * host's root: none of them may pass through a symlink, or a rootfs
 * prepared by someone else would have us create files (and mount) outside
 * it. Each component is opened with O_NOFOLLOW from the rootfs down; a
 * path that does not exist yet is fine (it is made later, inside).
 */
static int rootfs_links(const char *rootfs, char *bad, size_t badsz)
{
	static const char *const paths[] = {
		"proc", "dev", "tmp", "var/tmp", "home/sandbox", "run/sandgate/ca.pem",
		"etc/resolv.conf", "etc/hosts", "etc/ssl/certs/ca-certificates.crt", "workspace",
		NULL
	};
	char rel[128], *p, *next;
	int i, dfd, nfd, bad_link = 0;

	for (i = 0; paths[i] && !bad_link; i++) {
		ad_fmt(rel, sizeof(rel), "%s", paths[i]);
		dfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		for (p = rel; dfd >= 0 && *p; p = next) {
			struct stat st;

			next = strchr(p, '/');
			if (next)
				*next++ = '\0';
			else
				next = p + strlen(p);
			if (fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) < 0)
				break;                  /* not there: made later, inside */
			if (S_ISLNK(st.st_mode)) {
				ad_fmt(bad, badsz, "%s/%.*s", rootfs, (int)(p - rel + strlen(p)),
				       paths[i]);
				bad_link = 1;
				break;
			}
			nfd = *next ? openat(dfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
				    : -1;
			close(dfd);
			dfd = nfd;
		}
		if (dfd >= 0)
			close(dfd);
	}
	return bad_link;
}

static int valid_name(const char *s)
{
	size_t i, n = strlen(s);

	/* The control API's rule, and short enough for a hostname. */
	if (n == 0 || n > 63)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static int parse_size(const char *s, int64_t *out)
{
	char *end;
	double v = strtod(s, &end);
	int64_t mul = 1;

	if (end == s || v < 0)
		return SG_EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1024; end++; break;
	case 'm': case 'M': mul = 1024 * 1024; end++; break;
	case 'g': case 'G': mul = 1024LL * 1024 * 1024; end++; break;
	case '\0': break;
	default: return SG_EINVAL;
	}
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return SG_EINVAL;
	*out = (int64_t)(v * (double)mul);
	return 0;
}

/* The sandbox's environment is built, never inherited: the host's can
 * hold real credentials. */
static int env_set(struct run *r, const char *k, const char *v)
{
	size_t kl = strlen(k);
	char *e;
	int i;

	if (asprintf(&e, "%s=%s", k, v) < 0)
		return SG_ENOMEM;
	for (i = 0; i < r->nenv; i++)
		if (!strncmp(r->env[i], k, kl) && r->env[i][kl] == '=') {
			free(r->env[i]);
			r->env[i] = e;
			return 0;
		}
	if (r->nenv >= MAX_ENV - 1) {
		free(e);
		fprintf(stderr, "sandgate run: too many --env\n");
		return SG_EINVAL;
	}
	r->env[r->nenv++] = e;
	r->env[r->nenv] = NULL;
	return 0;
}

static int env_base(struct run *r)
{
	static const char *const ca_vars[] = { "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
					       "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
					       "GIT_SSL_CAINFO", NULL };
	const char *lang = getenv("LANG"), *term = getenv("TERM");
	int i, rc = 0;

	rc |= env_set(r, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	rc |= env_set(r, "HOME", "/home/sandbox");
	rc |= env_set(r, "LANG", lang ? lang : "C.UTF-8");
	if (term)
		rc |= env_set(r, "TERM", term);
	for (i = 0; ca_vars[i]; i++)
		rc |= env_set(r, ca_vars[i], "/run/sandgate/ca.pem");
	rc |= env_set(r, "SANDGATE_SANDBOX", r->spec.name);
	return rc ? SG_ENOMEM : 0;
}

static int env_user(struct run *r, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char k[256];

	if (eq) {
		if (eq == kv || (size_t)(eq - kv) >= sizeof(k))
			return SG_EINVAL;
		memcpy(k, kv, (size_t)(eq - kv));
		k[eq - kv] = '\0';
		return env_set(r, k, eq + 1);
	}
	/* --env NAME: the caller explicitly passes the host's value. */
	if (!getenv(kv)) {
		fprintf(stderr, "sandgate run: --env %s: not set here\n", kv);
		return SG_EINVAL;
	}
	return env_set(r, kv, getenv(kv));
}

static const struct ad_backend *backend_by_name(const char *s)
{
	if (!strcmp(s, "container"))
		return &ad_backend_container;
	if (!strcmp(s, "gvisor"))
		return &ad_backend_gvisor;
	if (!strcmp(s, "microvm"))
		return &ad_backend_microvm;
	return NULL;
}

static int write_sandbox_files(struct run *r)
{
	char buf[1024];
	struct ad_net *n = &r->net;

	if (ad_fmt(r->ca, sizeof(r->ca), "%s/ca.pem", n->state_dir) < 0 ||
	    ad_fmt(r->resolv, sizeof(r->resolv), "%s/resolv.conf", n->state_dir) < 0 ||
	    ad_fmt(r->hosts, sizeof(r->hosts), "%s/hosts", n->state_dir) < 0)
		return SG_EINVAL;
	if (ad_ca_bundle(r->ca, r->gw.ca_cert) < 0)
		return SG_EIO;
	/* The host side of the veth: port 53 there (any address, in fact) is
	 * redirected to the gateway's DNS listener. */
	if (ad_fmt(buf, sizeof(buf), "nameserver %s\nnameserver %s\noptions timeout:2 attempts:2\n",
		   n->host4, n->host6) < 0 ||
	    ad_file_write(r->resolv, buf, strlen(buf), 0644) < 0)
		return SG_EIO;
	if (ad_fmt(buf, sizeof(buf), "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
		   "%s\t%s\n%s\t%s\n", n->sbx4, r->spec.name, n->sbx6, r->spec.name) < 0 ||
	    ad_file_write(r->hosts, buf, strlen(buf), 0644) < 0)
		return SG_EIO;
	r->spec.ca_bundle = r->ca;
	r->spec.resolv_conf = r->resolv;
	r->spec.hosts = r->hosts;
	return 0;
}

static void teardown(struct run *r)
{
	int st;

	if (r->sbx.pid > 0) {
		kill(r->sbx.pid, SIGKILL);
		while (waitpid(r->sbx.pid, &st, 0) < 0 && errno == EINTR)
			;
		r->sbx.pid = 0;
	}
	if (r->started && r->be->cleanup)
		r->be->cleanup(&r->sbx);
	r->started = 0;
	if (r->registered && ad_gw_unregister(&r->gw, r->spec.name) < 0 && ad_gw_alive(&r->gw))
		fprintf(stderr, "sandgate run: warning: could not unregister %s\n", r->spec.name);
	r->registered = 0;
	ad_gw_stop(&r->gw);
	ad_net_teardown(&r->net);
}

/* Wait for the sandbox; forward the first INT/TERM/HUP, kill 3 s later.
 * Returns CMD's status. */
static int supervise(struct run *r, int sfd)
{
	int64_t kill_at = 0;
	int st, rc = RUN_FAILED, got_sig = 0, gw_warned = 0, stopped = 0, watch_warned = 0;
	/* The gateway may stop the sandbox (a secret violation with
	 * block_and_kill, or an operator): it answers this watch, and the
	 * sandbox is killed at once. Its traffic is refused from that moment
	 * on by the gateway itself, whatever happens here. */
	int watch = ad_gw_watch(&r->gw, r->spec.name);
	struct sg_sbuf acc;

	sg_sbuf_init(&acc);
	if (watch < 0)
		fprintf(stderr, "sandgate run: warning: cannot watch the gateway for a stop of "
			"%s: a stop would refuse its traffic but not end it\n", r->spec.name);
	for (;;) {
		struct pollfd p[2] = { { sfd, POLLIN, 0 }, { watch, POLLIN, 0 } };
		struct signalfd_siginfo si;
		struct timespec now;
		char reason[64];
		pid_t w;

		w = waitpid(r->sbx.pid, &st, WNOHANG);
		if (w == r->sbx.pid) {
			r->sbx.pid = 0;
			rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			break;
		}
		if (r->gw.pid && !ad_gw_alive(&r->gw) && !gw_warned) {
			/* Fail closed: the redirect now points at a closed port. */
			fprintf(stderr, "sandgate run: the gateway exited; the sandbox has no "
				"network now\n");
			gw_warned = 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (kill_at && now.tv_sec * 1000 + now.tv_nsec / 1000000 >= kill_at) {
			kill(r->sbx.pid, SIGKILL);
			kill_at = 0;
		}
		if (poll(p, watch >= 0 ? 2 : 1, 200) <= 0)
			continue;
		if (watch >= 0 && p[1].revents) {
			int wr = ad_gw_watch_read(watch, &acc, reason, sizeof(reason));

			if (wr != 0)
				watch = -1;
			if (wr < 0) {
				/* The gateway went away (a restart of an attached
				 * one): watch again, or say that it cannot. */
				sg_sbuf_free(&acc);
				sg_sbuf_init(&acc);
				watch = ad_gw_watch(&r->gw, r->spec.name);
				/* (our own gateway's death is reported below) */
				if (watch < 0 && !watch_warned && !(r->gw.pid && !ad_gw_alive(&r->gw)))
					fprintf(stderr, "sandgate run: warning: lost the gateway's "
						"watch on %s: a stop would refuse its traffic but not "
						"end it\n", r->spec.name);
				watch_warned |= watch < 0;
			}
			if (wr == 1 && !stopped) {
				fprintf(stderr, "sandgate run: the gateway stopped sandbox %s (%s): "
					"killing it\n", r->spec.name, reason);
				stopped = 1;
				kill(r->sbx.pid, SIGKILL);
			}
		}
		if (!(p[0].revents & POLLIN) || read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo == SIGCHLD)
			continue;
		if (!got_sig) {
			got_sig = (int)si.ssi_signo;
			kill(r->sbx.pid, (int)si.ssi_signo);
			kill_at = now.tv_sec * 1000 + now.tv_nsec / 1000000 + 3000;
		} else {
			kill(r->sbx.pid, SIGKILL);
		}
	}
	if (watch >= 0)
		close(watch);
	sg_sbuf_free(&acc);
	/* CMD that exited on its own after our signal still tells its own
	 * story; one the gateway stopped was killed (137). */
	return rc;
}

int ad_run_main(int argc, char **argv)
{
	static struct run r;
	const char *backend = "container";
	sigset_t set;
	int i, sfd = -1, rc = RUN_FAILED, no_sweep = 0;
	char why[256];

	memset(&r, 0, sizeof(r));
	r.spec.mem_bytes = 1LL << 30;
	r.spec.pids_max = 1024;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if ((!strcmp(a, "-c") || !strcmp(a, "--config")) && v)
			r.config = argv[++i];
		else if (!strcmp(a, "--backend") && v)
			backend = argv[++i];
		else if (!strcmp(a, "--runtime") && v)
			r.spec.runtime = argv[++i];
		else if (!strcmp(a, "--sandbox") && v)
			r.spec.name = argv[++i];
		else if (!strcmp(a, "--workspace") && v)
			r.spec.workspace = argv[++i];
		else if (!strcmp(a, "--rootfs") && v)
			r.spec.rootfs = argv[++i];
		else if (!strcmp(a, "--gateway") && v)
			r.gateway = argv[++i];
		else if (!strcmp(a, "--env") && v)
			i++;    /* applied below, once the base environment exists */
		else if (!strcmp(a, "--memory") && v) {
			if (parse_size(argv[++i], &r.spec.mem_bytes) < 0)
				return usage();
		} else if (!strcmp(a, "--pids") && v)
			r.spec.pids_max = atoi(argv[++i]);
		else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
			r.verbose = r.spec.verbose = 1;
		else if (!strcmp(a, "--no-sweep"))
			no_sweep = 1;
		else if (a[0] != '-')
			break;  /* CMD without "--" */
		else
			return usage();
	}
	if (i >= argc)
		return usage();
	r.spec.argv = argv + i;
	r.be = backend_by_name(backend);
	if (!r.be) {
		fprintf(stderr, "sandgate run: --backend: container, gvisor or microvm\n");
		return 2;
	}
	if (r.spec.runtime && strcmp(r.spec.runtime, "runc") && strcmp(r.spec.runtime, "crun")) {
		fprintf(stderr, "sandgate run: --runtime: runc or crun\n");
		return 2;
	}
	if (r.spec.runtime && r.be != &ad_backend_container) {
		fprintf(stderr, "sandgate run: --runtime goes with --backend container\n");
		return 2;
	}
	if (r.spec.name && !valid_name(r.spec.name)) {
		fprintf(stderr, "sandgate run: --sandbox: 1-63 of [A-Za-z0-9._-]\n");
		return 2;
	}
	for (i = 0; i < 2; i++) {
		const char **dir = i ? &r.spec.rootfs : &r.spec.workspace;
		static char real[2][4096];
		struct stat st;

		if (!*dir)
			continue;
		/* Absolute and symlink-free: runc insists, mounts follow links. */
		if (!realpath(*dir, real[i]) || stat(real[i], &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "sandgate run: %s %s: not a directory\n",
				i ? "--rootfs" : "--workspace", *dir);
			return 2;
		}
		*dir = real[i];
	}
	if (r.spec.rootfs) {
		char bad[4200];

		if (rootfs_links(r.spec.rootfs, bad, sizeof(bad))) {
			fprintf(stderr, "sandgate run: --rootfs: %s is a symlink, where sandgate mounts "
				"its own files (proc, dev, tmp, home, run, etc/resolv.conf, etc/hosts, "
				"the CA bundle, workspace); it does not follow links out of a rootfs\n",
				bad);
			return 2;
		}
	}
	if (geteuid() != 0) {
		fprintf(stderr, "sandgate run: needs root (network namespaces, nftables)\n");
		return RUN_FAILED;
	}

	/* Signals arrive through a signalfd; children restore the defaults. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return RUN_FAILED;
	prctl(PR_SET_PDEATHSIG, SIGTERM);

	if (!no_sweep)
		ad_net_sweep(r.verbose);
	if (ad_net_alloc(&r.net, r.be->link) < 0)
		goto out;
	if (!r.spec.name) {
		ad_fmt(r.name_buf, sizeof(r.name_buf), "run-%s", r.net.id);
		r.spec.name = r.name_buf;
	}
	r.spec.state_dir = r.net.state_dir;
	r.spec.net = &r.net;
	r.sbx.spec = &r.spec;
	r.sbx.be = r.be;
	if (r.be->available(&r.spec, why, sizeof(why)) < 0) {
		fprintf(stderr, "sandgate run: backend %s%s%s is not available here: %s\n",
			backend, r.spec.runtime ? " --runtime " : "",
			r.spec.runtime ? r.spec.runtime : "", why);
		goto out;
	}
	if (env_base(&r) < 0)
		goto out;
	for (i = 0; i < argc && argv[i] != r.spec.argv[0]; i++)
		if (!strcmp(argv[i], "--env") && i + 1 < argc && env_user(&r, argv[++i]) < 0)
			goto out;
	r.spec.env = r.env;

	if ((r.gateway ? ad_gw_attach(&r.gw, r.gateway, r.config) :
			 ad_gw_start(&r.gw, r.config, r.net.state_dir, r.verbose)) < 0)
		goto out;
	r.net.tp_port = r.gw.tp_port;
	r.net.dns_port = r.gw.dns_port;
	if (ad_net_create(&r.net) < 0 || ad_net_redirect(&r.net) < 0 ||
	    write_sandbox_files(&r) < 0)
		goto out;
	{
		const char *addrs[2] = { r.net.sbx4, r.net.sbx6 };

		if ((r.gateway && ad_gw_claim(&r.gw, r.spec.name) < 0) ||
		    ad_gw_register(&r.gw, r.spec.name, addrs, 2, r.be->name) < 0)
			goto out;
		r.registered = 1;
	}
	if (r.verbose)
		fprintf(stderr, "sandgate run: sandbox %s (%s backend): %s %s / %s, host %s / %s, "
			"tcp -> :%d, dns -> %s%d\n", r.spec.name, r.be->name,
			r.net.ns[0] ? r.net.ns : r.net.ifname, r.net.sbx4, r.net.sbx6, r.net.host4,
			r.net.host6, r.net.tp_port, r.net.dns_port ? ":" : "dropped ",
			r.net.dns_port);
	r.started = 1;
	if (r.be->start(&r.sbx) < 0) {
		if (r.sbx.pid > 0)
			kill(r.sbx.pid, SIGKILL);
		goto out;
	}
	rc = supervise(&r, sfd);
out:
	teardown(&r);
	for (i = 0; i < r.nenv; i++)
		free(r.env[i]);
	if (sfd >= 0)
		close(sfd);
	return rc;
}
