/*
 * ad_container.c - the container backend with namespaces sandgate makes
 * itself (or, with --runtime, an OCI runtime: ad_oci.c).
 *
 * Process tree (host PIDs on the left):
 *   sandgate run ── shim ──────── init (PID 1 of a new PID namespace) ── CMD
 *                   setns(net)    mounts, pivot_root,                    user ns,
 *                   unshare(mnt,  hostname; reaps,                       no caps,
 *                   pid,uts,ipc)  forwards signals                       seccomp
 * The shim's exit status is CMD's (128+N for a signal). The shim and init
 * die with their parent (PDEATHSIG); when init dies the kernel kills
 * every process of the PID namespace, so nothing of the sandbox survives.
 *
 * Mounts are made by init while it is still real root in a mount
 * namespace owned by the host's user namespace; CMD enters a user
 * namespace only afterwards, so even its namespace-root could not undo
 * them (its mount namespace is not its own) and seccomp denies the calls
 * anyway. Inside: root 0 is host uid/gid AD_ID_BASE + the subnet index
 * (ad_idmap.c), owning nothing on the host; the workspace is an idmapped
 * mount made by `sandgate run` (its owner <-> that uid), which init
 * attaches, so CMD's files there land as the owner. Fallbacks as in
 * ad_idmap.c. /proc/sys is read-only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sg.h"
#include "adapters/ad.h"
#include "sg_poison.h"

#define SETUP_FAILED 125        /* shim/init exit code: the sandbox never ran CMD */

extern char **environ;

/* ------------------------------------------------------------ cgroups */

/* The controller's mount and our own cgroup path in it: a sandbox cgroup
 * nests under the caller's, so limits placed on the caller still apply. */
static int cg_dir(const char *ctrl, char *out, size_t outsz)
{
	char buf[4096], *line, *save = NULL;
	int v2 = !strcmp(ctrl, "");

	if (ad_file_read("/proc/self/cgroup", buf, sizeof(buf)) <= 0)
		return SG_EIO;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c2 = '\0';
		if (v2 ? !strcmp(line, "0") && c1[1] == '\0' : !strcmp(c1 + 1, ctrl)) {
			if (v2)
				return ad_fmt(out, outsz, "/sys/fs/cgroup%s", strcmp(c2 + 1, "/") ? c2 + 1 : "");
			return ad_fmt(out, outsz, "/sys/fs/cgroup/%s%s", ctrl,
				      strcmp(c2 + 1, "/") ? c2 + 1 : "");
		}
	}
	return SG_EIO;
}

static int cg_write(const char *dir, const char *file, const char *v)
{
	char path[512];

	return ad_fmt(path, sizeof(path), "%s/%s", dir, file) == 0 &&
	       ad_proc_write(path, v) == 0 ? 0 : SG_EIO;
}

int ad_cgroup_create(struct ad_sbx *s, char *notice, size_t noticesz)
{
	const struct ad_spec *sp = s->spec;
	char base[256], v[32];
	struct stat st;

	notice[0] = '\0';
	if (!sp->mem_bytes && !sp->pids_max)
		return 0;
	/* cgroup v1 (or hybrid, as here): one hierarchy per controller. */
	if (stat("/sys/fs/cgroup/memory", &st) == 0 && stat("/sys/fs/cgroup/pids", &st) == 0) {
		if (sp->mem_bytes && cg_dir("memory", base, sizeof(base)) == 0 &&
		    ad_fmt(s->cg[0], sizeof(s->cg[0]), "%s/sandgate-%s", base, sp->net->id) == 0) {
			ad_fmt(v, sizeof(v), "%lld", (long long)sp->mem_bytes);
			if (mkdir(s->cg[0], 0755) < 0 ||
			    cg_write(s->cg[0], "memory.limit_in_bytes", v) < 0) {
				ad_fmt(notice, noticesz, "memory limit not applied (%s: %s)", s->cg[0],
				       strerror(errno));
				rmdir(s->cg[0]);
				s->cg[0][0] = '\0';
			}
		}
		if (sp->pids_max && cg_dir("pids", base, sizeof(base)) == 0 &&
		    ad_fmt(s->cg[1], sizeof(s->cg[1]), "%s/sandgate-%s", base, sp->net->id) == 0) {
			ad_fmt(v, sizeof(v), "%d", sp->pids_max);
			if (mkdir(s->cg[1], 0755) < 0 || cg_write(s->cg[1], "pids.max", v) < 0) {
				ad_fmt(notice, noticesz, "pids limit not applied (%s: %s)", s->cg[1],
				       strerror(errno));
				rmdir(s->cg[1]);
				s->cg[1][0] = '\0';
			}
		}
		return 0;
	}
	/* cgroup v2 only: a child of our own cgroup with both controllers. It
	 * works only where our cgroup may delegate (no processes of its own
	 * would block "+memory +pids"); otherwise say so and run unlimited. */
	if (cg_dir("", base, sizeof(base)) == 0 &&
	    ad_fmt(s->cg[0], sizeof(s->cg[0]), "%s/sandgate-%s", base, sp->net->id) == 0 &&
	    mkdir(s->cg[0], 0755) == 0) {
		ad_fmt(v, sizeof(v), "%lld", (long long)sp->mem_bytes);
		if ((sp->mem_bytes && cg_write(s->cg[0], "memory.max", v) < 0) ||
		    (sp->pids_max && (ad_fmt(v, sizeof(v), "%d", sp->pids_max),
				      cg_write(s->cg[0], "pids.max", v) < 0))) {
			ad_fmt(notice, noticesz, "cgroup v2 controllers not delegated to %s: "
			       "no memory/pids limits", base);
			rmdir(s->cg[0]);
			s->cg[0][0] = '\0';
		}
		return 0;
	}
	s->cg[0][0] = '\0';
	ad_fmt(notice, noticesz, "no usable cgroup hierarchy: no memory/pids limits");
	return 0;
}

int ad_cgroup_attach(struct ad_sbx *s, pid_t pid)
{
	char v[32];
	int i;

	ad_fmt(v, sizeof(v), "%d", (int)pid);
	for (i = 0; i < 2; i++)
		if (s->cg[i][0] && cg_write(s->cg[i], "cgroup.procs", v) < 0) {
			fprintf(stderr, "sandgate run: cannot join %s: %s\n", s->cg[i],
				strerror(errno));
			return SG_EIO;
		}
	return 0;
}

void ad_cgroup_remove(struct ad_sbx *s)
{
	int i, tries;

	for (i = 0; i < 2; i++) {
		if (!s->cg[i][0])
			continue;
		/* Every process of the sandbox is gone before we get here, but
		 * the kernel may take a moment to empty the group. */
		for (tries = 0; tries < 100 && rmdir(s->cg[i]) < 0 && errno == EBUSY; tries++)
			usleep(10000);
		s->cg[i][0] = '\0';
	}
}

/* --------------------------------------------------------------- mounts */

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "sandgate run: sandbox setup: %s %s: %s\n", what, path ? path : "",
		strerror(errno));
	return SG_EIO;
}

static int bind_ro(const char *src, const char *dst, unsigned long extra)
{
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail("bind", dst);
	/* A bind ignores the flags: they need a remount of the new mount. */
	if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | extra,
		  NULL) < 0)
		return fail("remount read-only", dst);
	return 0;
}

/* A mount point of the same kind as src (file or directory) at dst. */
static int mkpoint(const char *src_kind_of, const char *dst)
{
	struct stat st;
	int fd;

	if (lstat(dst, &st) == 0)
		return 0;               /* already there (maybe in a read-only mount) */
	if (stat(src_kind_of, &st) == 0 && !S_ISDIR(st.st_mode)) {
		char parent[512], *slash;

		if (ad_fmt(parent, sizeof(parent), "%s", dst) < 0)
			return SG_EINVAL;
		slash = strrchr(parent, '/');
		if (slash && slash != parent) {
			*slash = '\0';
			if (ad_mkdir_p(parent, 0755) < 0)
				return fail("mkdir", parent);
		}
		fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			return fail("create", dst);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (ad_mkdir_p(dst, 0755) < 0)
		return fail("mkdir", dst);
	return 0;
}

/* Copy a host entry into the new root: a symlink as a symlink (merged
 * /usr: /bin -> usr/bin), a file or directory as a read-only bind. */
static int mirror(const char *root, const char *rel)
{
	char src[512], dst[512], link[512];
	struct stat st;
	ssize_t n;

	if (ad_fmt(src, sizeof(src), "/%s", rel) < 0 ||
	    ad_fmt(dst, sizeof(dst), "%s/%s", root, rel) < 0)
		return SG_EINVAL;
	if (lstat(src, &st) < 0)
		return 0;                       /* not on this host: nothing to mirror */
	if (S_ISLNK(st.st_mode)) {
		n = readlink(src, link, sizeof(link) - 1);
		if (n <= 0)
			return 0;
		link[n] = '\0';
		if (symlink(link, dst) < 0 && errno != EEXIST)
			return fail("symlink", dst);
		return 0;
	}
	if (mkpoint(src, dst) < 0)
		return SG_EIO;
	return bind_ro(src, dst, 0);
}

/* /etc: only what programs need to run, never the host's secrets (shadow,
 * ssh host keys, /etc/ssl/private, sandgate's own keys). */
static const char *const etc_keep[] = {
	"etc/passwd", "etc/group", "etc/nsswitch.conf", "etc/host.conf", "etc/gai.conf",
	"etc/ld.so.cache", "etc/ld.so.conf", "etc/ld.so.conf.d", "etc/alternatives",
	"etc/ssl/certs", "etc/ssl/openssl.cnf", "etc/ca-certificates", "etc/ca-certificates.conf",
	"etc/localtime", "etc/timezone", "etc/mime.types", "etc/protocols", "etc/services",
	"etc/networks", "etc/os-release", "etc/debian_version", "etc/bash.bashrc", "etc/profile",
	"etc/profile.d", "etc/inputrc", "etc/shells", "etc/login.defs", "etc/terminfo",
	"etc/magic", "etc/magic.mime", "etc/python3", "etc/python3.11", "etc/perl",
	"etc/gitconfig", "etc/wgetrc", "etc/mailcap", "etc/environment.d", "etc/xdg",
	"etc/pip.conf", "etc/npmrc", "etc/nodejs", "etc/java-17-openjdk", "etc/vim",
	NULL
};

static const char *const host_top[] = {
	"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt", NULL
};

static int mount_tmpfs(const char *dst, const char *opts)
{
	if (ad_mkdir_p(dst, 0755) < 0)
		return fail("mkdir", dst);
	if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return fail("tmpfs", dst);
	return 0;
}

static int bind_file(const char *src, const char *root, const char *rel, int quiet)
{
	char dst[512];

	if (ad_fmt(dst, sizeof(dst), "%s/%s", root, rel) < 0)
		return SG_EINVAL;
	if (mkpoint(src, dst) < 0 || bind_ro(src, dst, MS_NOEXEC) < 0) {
		if (quiet)
			return 0;
		return SG_EIO;
	}
	return 0;
}

static int setup_dev(const char *root)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty",
					     NULL };
	static const char *const links[][2] = {
		{ "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
		{ "pts/ptmx", "ptmx" },
	};
	char dev[512], p[512], src[64];
	size_t i;

	if (ad_fmt(dev, sizeof(dev), "%s/dev", root) < 0 || mount_tmpfs(dev, "mode=0755,size=64k") < 0)
		return SG_EIO;
	for (i = 0; nodes[i]; i++) {
		ad_fmt(src, sizeof(src), "/dev/%s", nodes[i]);
		ad_fmt(p, sizeof(p), "%s/%s", dev, nodes[i]);
		/* Device nodes are bound, not made: no mknod (CAP_MKNOD) needed,
		 * and the sandbox cannot reach other devices. */
		if (mkpoint(src, p) < 0 || mount(src, p, NULL, MS_BIND, NULL) < 0)
			return fail("bind", p);
	}
	for (i = 0; i < SG_ARRAY_LEN(links); i++) {
		ad_fmt(p, sizeof(p), "%s/%s", dev, links[i][1]);
		if (symlink(links[i][0], p) < 0)
			return fail("symlink", p);
	}
	ad_fmt(p, sizeof(p), "%s/pts", dev);
	if (ad_mkdir_p(p, 0755) < 0 ||
	    mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
		return fail("devpts", p);
	ad_fmt(p, sizeof(p), "%s/shm", dev);
	if (mount_tmpfs(p, "mode=1777,size=64m") < 0)
		return SG_EIO;
	return mount(NULL, dev, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID, "mode=0755,size=64k") < 0 ?
	       fail("remount read-only", dev) : 0;
}

static int setup_proc(const char *root)
{
	static const char *const mask[] = { "kcore", "sysrq-trigger", "keys", "timer_list", NULL };
	char p[512];
	int i;

	ad_fmt(p, sizeof(p), "%s/proc", root);
	if (ad_mkdir_p(p, 0555) < 0 ||
	    mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return fail("proc", p);
	/* Root inside may be root outside (no user namespace: the fallbacks
	 * of ad_idmap.c): /proc/sys files would then pass their owner check.
	 * Read-only settles it. */
	ad_fmt(p, sizeof(p), "%s/proc/sys", root);
	if (bind_ro(p, p, MS_NOEXEC) < 0)
		return SG_EIO;
	for (i = 0; mask[i]; i++) {
		ad_fmt(p, sizeof(p), "%s/proc/%s", root, mask[i]);
		if (access(p, F_OK) == 0 && mount("/dev/null", p, NULL, MS_BIND, NULL) < 0)
			return fail("mask", p);
	}
	return 0;
}

static int setup_root(const struct ad_spec *sp, const char *root, struct ad_userns *u)
{
	char p[512], opts[64];
	int i;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail("make private", "/");
	if (sp->rootfs) {
		if (mount(sp->rootfs, root, NULL, MS_BIND | MS_REC, NULL) < 0)
			return fail("bind rootfs", sp->rootfs);
	} else {
		if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") < 0)
			return fail("tmpfs", root);
		for (i = 0; host_top[i]; i++)
			if (mirror(root, host_top[i]) < 0)
				return SG_EIO;
		ad_fmt(p, sizeof(p), "%s/etc/ssl", root);
		if (ad_mkdir_p(p, 0755) < 0)
			return fail("mkdir", p);
		for (i = 0; etc_keep[i]; i++)
			if (mirror(root, etc_keep[i]) < 0)
				return SG_EIO;
	}
	if (setup_proc(root) < 0 || setup_dev(root) < 0)
		return SG_EIO;
	ad_fmt(p, sizeof(p), "%s/tmp", root);
	if (mount_tmpfs(p, "mode=1777") < 0)
		return SG_EIO;
	ad_fmt(p, sizeof(p), "%s/var/tmp", root);
	if (mount_tmpfs(p, "mode=1777") < 0)
		return SG_EIO;
	ad_fmt(p, sizeof(p), "%s/home/sandbox", root);
	/* Owned by root inside (the host's root without a user namespace). */
	ad_fmt(opts, sizeof(opts), "mode=0700,uid=%u,gid=%u", u->on ? u->uid : 0, u->on ? u->gid : 0);
	if (mount_tmpfs(p, opts) < 0)
		return SG_EIO;
	ad_fmt(p, sizeof(p), "%s/run", root);
	if (mount_tmpfs(p, "mode=0755,size=16m") < 0)
		return SG_EIO;
	/* Files the run generated: the CA bundle (also over the system
	 * bundle, for programs that ignore SSL_CERT_FILE), resolv.conf
	 * naming the host side of the veth, hosts, hostname. */
	if (bind_file(sp->ca_bundle, root, "run/sandgate/ca.pem", 0) < 0 ||
	    bind_file(sp->resolv_conf, root, "etc/resolv.conf", 0) < 0 ||
	    bind_file(sp->hosts, root, "etc/hosts", 0) < 0)
		return SG_EIO;
	ad_fmt(p, sizeof(p), "%s/etc/ssl/certs/ca-certificates.crt", root);
	if (access(p, F_OK) == 0 &&
	    bind_file(sp->ca_bundle, root, "etc/ssl/certs/ca-certificates.crt", 1) < 0)
		return SG_EIO;
	if (sp->workspace) {
		ad_fmt(p, sizeof(p), "%s/workspace", root);
		if (ad_mkdir_p(p, 0755) < 0)
			return fail("mkdir", p);
		/* The idmapped one is already nosuid, nodev. */
		if (u->ws_fd >= 0) {
			if (ad_userns_ws_attach(u, p) < 0)
				return fail("attach the idmapped workspace", sp->workspace);
		} else if (mount(sp->workspace, p, NULL, MS_BIND | MS_REC, NULL) < 0 ||
			   mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) < 0) {
			return fail("bind workspace", sp->workspace);
		}
	}
	/* The root itself last, read-only: /tmp, home, /run, /workspace are
	 * separate mounts and stay writable. */
	if (mount(NULL, root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0 &&
	    mount(NULL, root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		return fail("remount read-only", root);
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		return fail("pivot_root", root);
	/* The old root is stacked under the new one: detach it. */
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return fail("detach old root", NULL);
	return 0;
}

/* ------------------------------------------------------------- CMD side */

static int caps_drop(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	int c;

	for (c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return fail("drop capability bounding set", NULL);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d) < 0)
		return fail("capset", NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail("no_new_privs", NULL);
	return 0;
}

/* The sandbox's filter (ad_seccomp.c): the container set and no setuid
 * or setgid modes, which the workspace would carry to the host. */
static int seccomp_apply(void)
{
	if (ad_seccomp_load(AD_SCMP_SANDBOX | AD_SCMP_NOSETID) < 0) {
		fprintf(stderr, "sandgate run: sandbox setup: seccomp filter failed\n");
		return SG_EIO;
	}
	return 0;
}

static int read_byte(int fd)
{
	char c;
	ssize_t r;

	while ((r = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return r == 1 ? c : -1;
}

static void write_byte(int fd, char c)
{
	while (write(fd, &c, 1) < 0 && errno == EINTR)
		;
}

/* CMD's process: user namespace (unless the plan said none), no
 * capabilities, seccomp, exec. Never returns. */
static void cmd_exec(const struct ad_spec *sp, int userns, int to_init, int from_init)
{
	/* No supplementary group of the caller's comes along (an unmapped
	 * one would still grant its access to host files). */
	if (setgroups(0, NULL) < 0) {
		fail("setgroups", NULL);
		_exit(SETUP_FAILED);
	}
	if (userns) {
		/* The plan found user namespaces usable: failing now is an
		 * error, not a reason to run CMD as the host's root. */
		if (unshare(CLONE_NEWUSER) < 0) {
			fail("user namespace", NULL);
			_exit(SETUP_FAILED);
		}
		/* init writes our uid/gid maps (it holds the capabilities). */
		write_byte(to_init, 'u');
		if (read_byte(from_init) != 'g')
			_exit(SETUP_FAILED);
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
			_exit(SETUP_FAILED);
	}
	close(to_init);
	close(from_init);
	if (caps_drop() < 0 || seccomp_apply() < 0)
		_exit(SETUP_FAILED);
	if (chdir(sp->workspace ? "/workspace" : "/home/sandbox") < 0)
		(void)!chdir("/");
	ad_child_signals_reset();
	/* execvp looks PATH up in environ: give it the sandbox's. */
	environ = (char **)sp->env;
	execvp(sp->argv[0], sp->argv);
	fprintf(stderr, "sandgate run: %s: %s\n", sp->argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

static volatile pid_t fwd_pid;

static void fwd_signal(int sig)
{
	if (fwd_pid > 0)
		kill(fwd_pid, sig);
}

static void fwd_install(pid_t pid)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
	struct sigaction sa;
	sigset_t none;
	size_t i;

	fwd_pid = pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fwd_signal;
	for (i = 0; i < SG_ARRAY_LEN(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Wait for pid (others are reaped as they come: PID 1 inherits orphans);
 * the result is an exit code, 128+N for a signal. */
static int reap_until(pid_t pid)
{
	int st;

	for (;;) {
		pid_t r = waitpid(-1, &st, __WALL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return SETUP_FAILED;
		}
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

/* PID 1 of the sandbox. Never returns. */
static void init_main(const struct ad_spec *sp, pid_t shim, struct ad_userns *u)
{
	char root[256], path[64];
	int up[2], down[2];
	pid_t cmd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != shim)
		_exit(SETUP_FAILED);
	/* Host variables never reach the sandbox, not even through
	 * /proc/1/environ; and not dumpable: /proc/1 is not CMD's to read. */
	clearenv();
	prctl(PR_SET_DUMPABLE, 0);
	if (ad_fmt(root, sizeof(root), "%s/root", sp->state_dir) < 0 ||
	    setup_root(sp, root, u) < 0)
		_exit(SETUP_FAILED);
	if (sethostname(sp->name, strlen(sp->name)) < 0)
		_exit(SETUP_FAILED);
	if (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0)
		_exit(SETUP_FAILED);
	cmd = fork();
	if (cmd < 0)
		_exit(SETUP_FAILED);
	if (cmd == 0) {
		close(up[0]);
		close(down[1]);
		cmd_exec(sp, u->on, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	fwd_install(cmd);
	if (u->on) {
		/* CMD has unshared (or died): its maps make root inside the
		 * plan's uid/gid. */
		if (read_byte(up[0]) != 'u')
			_exit(reap_until(cmd));
		if (ad_userns_map(cmd, u->uid, u->gid) < 0) {
			ad_fmt(path, sizeof(path), "/proc/%d/uid_map", (int)cmd);
			fail("uid/gid map", path);
			kill(cmd, SIGKILL);
			_exit(SETUP_FAILED);
		}
		write_byte(down[1], 'g');
	}
	close(up[0]);
	close(down[1]);
	_exit(reap_until(cmd));
}

/* The shim: joins the prepared network namespace, makes the others, and
 * waits for init. Never returns. */
static void shim_main(const struct ad_spec *sp, pid_t parent, int go, struct ad_userns *u)
{
	char path[128];
	pid_t init;
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(SETUP_FAILED);
	/* The parent puts us into the cgroups before we go on. */
	if (read_byte(go) != 'g')
		_exit(SETUP_FAILED);
	close(go);
	ad_fmt(path, sizeof(path), "/run/netns/%s", sp->net->ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fail("join network namespace", path);
		_exit(SETUP_FAILED);
	}
	close(fd);
	if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC) < 0) {
		fail("unshare", NULL);
		_exit(SETUP_FAILED);
	}
	init = fork();
	if (init < 0)
		_exit(SETUP_FAILED);
	if (init == 0)
		init_main(sp, getppid(), u);
	ad_userns_release(u);
	fwd_install(init);
	_exit(reap_until(init));
}

static int container_start(struct ad_sbx *s)
{
	const struct ad_spec *sp = s->spec;
	char root[256], notice[256];
	pid_t parent = getpid();
	struct ad_userns u;
	int go[2];

	if (sp->runtime)
		return ad_oci_start(s, sp->runtime);
	if (ad_fmt(root, sizeof(root), "%s/root", sp->state_dir) < 0 || mkdir(root, 0755) < 0)
		return fail("mkdir", root);
	if (ad_cgroup_create(s, notice, sizeof(notice)) < 0)
		return SG_EIO;
	if (notice[0])
		fprintf(stderr, "sandgate run: notice: %s\n", notice);
	/* Here, in the host's mount namespace, where the workspace's path
	 * means what the user meant; init attaches the mount in its own. */
	ad_userns_plan(sp, &u);
	if (pipe2(go, O_CLOEXEC) < 0) {
		ad_userns_release(&u);
		return SG_EIO;
	}
	s->pid = fork();
	if (s->pid < 0) {
		close(go[0]);
		close(go[1]);
		ad_userns_release(&u);
		return SG_EIO;
	}
	if (s->pid == 0) {
		close(go[1]);
		shim_main(sp, parent, go[0], &u);
	}
	close(go[0]);
	ad_userns_release(&u);
	if (ad_cgroup_attach(s, s->pid) < 0) {
		close(go[1]);
		return SG_EIO;          /* the shim reads EOF and exits */
	}
	write_byte(go[1], 'g');
	close(go[1]);
	return 0;
}

static void container_cleanup(struct ad_sbx *s)
{
	if (s->spec->runtime) {
		ad_oci_cleanup(s, s->spec->runtime);
		return;
	}
	ad_cgroup_remove(s);
}

static int container_available(const struct ad_spec *s, char *why, size_t whysz)
{
	if (s->runtime)
		return ad_oci_available(s->runtime, why, whysz);
	if (geteuid() != 0) {
		ad_fmt(why, whysz, "needs root (namespaces, nftables)");
		return SG_EINVAL;
	}
	return 0;
}

const struct ad_backend ad_backend_container = {
	.name = "container",
	.link = AD_LINK_VETH,
	.available = container_available,
	.start = container_start,
	.cleanup = container_cleanup,
};
