/*
 * ad_oci.c - OCI runtimes on a generated bundle: runc, crun (container
 * backend with --runtime) and runsc (the gvisor backend).
 *
 * The bundle lives in the run's state dir: config.json and a rootfs that
 * is either --rootfs or an empty directory with mount points, the host's
 * merged-/usr symlinks and read-only binds of /usr, /lib*, /etc essentials
 * listed in config.json (the same view as the container backend). The
 * network namespace is the prepared one; root is read-only; no
 * capabilities; no_new_privs; the container backend's seccomp filter as
 * linux.seccomp, from the same table (ad_seccomp.c), runsc included
 * (--oci-seccomp: without it runsc ignores the section, and its gofer,
 * root on the host, would carry a chmod u+s to the workspace).
 *
 * Host quirks handled here (RECIPES.md, verified on this machine):
 *  - crun 1.8 refuses hybrid cgroups: it runs in a private mount namespace
 *    with a tmpfs over /sys/fs/cgroup/unified and --cgroup-manager=disabled
 *    (so no memory/pids limits: a notice says so).
 *  - runsc --network=sandbox copies eth0 of the namespace named in
 *    config.json into its own stack and strips its addresses (fine: every
 *    run has a fresh namespace). It refuses to when it thinks it is in the
 *    root namespace, which on this kernel it always does (it tests for
 *    /proc/sys/net/core/rmem_default): it runs inside that namespace
 *    (nsenter) with a tmpfs over /proc/sys/net/core. Never `runsc do`.
 *
 * User namespace (runc, crun): the container backend's (ad_idmap.c): root
 * inside is host uid/gid AD_ID_BASE + the run's subnet index, the
 * workspace an idmapped mount (its owner <-> that uid) that the runtime's
 * private mount namespace gets at <state>/workspace, so CMD writes there
 * as root and the files belong to the workspace's owner; the host views
 * stay readable (root-owned files show as nobody, their "other" bits
 * apply). Fallbacks as there. gVisor gets none: its sentry is the boundary
 * and runs unprivileged.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sg.h"
#include "sg_sbuf.h"
#include "adapters/ad.h"
#include "sg_poison.h"

static const char *const oci_host_top[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64",
					    "libx32", "opt", NULL };
static const char *const oci_etc[] = {
	"etc/passwd", "etc/group", "etc/nsswitch.conf", "etc/host.conf", "etc/gai.conf",
	"etc/ld.so.cache", "etc/ld.so.conf", "etc/ld.so.conf.d", "etc/alternatives",
	"etc/ssl/certs", "etc/ssl/openssl.cnf", "etc/localtime", "etc/protocols",
	"etc/services", "etc/os-release", "etc/bash.bashrc", "etc/profile", "etc/inputrc",
	"etc/python3", "etc/python3.11", "etc/gitconfig", "etc/mime.types", NULL
};

int ad_oci_available(const char *runtime, char *why, size_t whysz)
{
	char path[512];

	if (ad_which(runtime, path, sizeof(path)) < 0) {
		ad_fmt(why, whysz, "%s is not installed (Debian package %s)", runtime, runtime);
		return SG_EINVAL;
	}
	if (!strcmp(runtime, "runsc") &&
	    (ad_which("nsenter", path, sizeof(path)) < 0 || ad_which("unshare", path, sizeof(path)) < 0)) {
		ad_fmt(why, whysz, "runsc needs nsenter and unshare (util-linux)");
		return SG_EINVAL;
	}
	/* (runsc's sentry has its own syscall table: names it lacks are
	 * calls it does not implement.) */
	if (strcmp(runtime, "runsc") && ad_seccomp_oci_check(why, whysz) < 0)
		return SG_EINVAL;
	return 0;
}

/* The rootfs the mounts go into, when it is our skeleton: every mount
 * point exists beforehand (gVisor cannot create one in a read-only root;
 * runc would create it anyway). */
static const char *mp_root;

/* Create dst (a directory, or an empty file for a file bind) under
 * mp_root without following a symlink anywhere on the way: a --rootfs can
 * be someone else's tree, and this runs as the host's root. Component by
 * component with O_NOFOLLOW; a symlink stops it (the runtime then fails
 * to mount there, and the run with it). */
static void mountpoint(const char *dst, const char *src, const char *type)
{
	char path[1024], *p, *next;
	struct stat st;
	int dfd, nfd, file;

	if (!mp_root || ad_fmt(path, sizeof(path), "%s", dst) < 0)
		return;
	file = !strcmp(type, "bind") && stat(src, &st) == 0 && !S_ISDIR(st.st_mode);
	dfd = open(mp_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (p = path; dfd >= 0 && *p; p = next) {
		while (*p == '/')
			p++;
		next = strchr(p, '/');
		if (next)
			*next++ = '\0';
		else
			next = p + strlen(p);
		if (!*p)
			break;
		if (!*next && file) {
			nfd = openat(dfd, p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (nfd >= 0)
				close(nfd);
			break;
		}
		if (mkdirat(dfd, p, 0755) < 0 && errno != EEXIST)
			break;
		nfd = openat(dfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		dfd = nfd;
	}
	if (dfd >= 0)
		close(dfd);
}

static void mount_json(struct sg_sbuf *b, int *first, const char *dst, const char *type,
		       const char *src, const char *opts)
{
	const char *o, *e;

	mountpoint(dst, src, type);
	sg_sbuf_puts(b, *first ? "\n    {" : ",\n    {");
	*first = 0;
	sg_sbuf_puts(b, "\"destination\":");
	sg_sbuf_json_str(b, dst);
	sg_sbuf_puts(b, ",\"type\":");
	sg_sbuf_json_str(b, type);
	sg_sbuf_puts(b, ",\"source\":");
	sg_sbuf_json_str(b, src);
	sg_sbuf_puts(b, ",\"options\":[");
	/* opts: comma-separated */
	for (o = opts; *o; o = *e ? e + 1 : e) {
		e = strchr(o, ',');
		if (!e)
			e = o + strlen(o);
		sg_sbuf_printf(b, "%s\"%.*s\"", o == opts ? "" : ",", (int)(e - o), o);
	}
	sg_sbuf_puts(b, "]}");
}

/* The rootfs skeleton for the host view: symlinks where the host has them
 * (merged /usr), directories as mount points elsewhere. */
static int skeleton(const char *rootfs, struct sg_sbuf *m, int *first)
{
	char src[512], dst[512], link[512];
	struct stat st;
	ssize_t n;
	int i;

	for (i = 0; oci_host_top[i]; i++) {
		ad_fmt(src, sizeof(src), "/%s", oci_host_top[i]);
		ad_fmt(dst, sizeof(dst), "%s/%s", rootfs, oci_host_top[i]);
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(src, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = '\0';
			if (symlink(link, dst) < 0 && errno != EEXIST)
				return SG_EIO;
			continue;
		}
		if (ad_mkdir_p(dst, 0755) < 0)
			return SG_EIO;
		mount_json(m, first, src, "bind", src, "rbind,ro,nosuid,nodev");
	}
	for (i = 0; oci_etc[i]; i++) {
		ad_fmt(src, sizeof(src), "/%s", oci_etc[i]);
		if (stat(src, &st) < 0)
			continue;
		mount_json(m, first, src, "bind", src, "rbind,ro,nosuid,nodev");
	}
	return 0;
}


/* runc/crun get the container backend's user namespace (ad_idmap.c);
 * runsc none. */
static void userns_plan(const struct ad_sbx *s, const char *runtime, struct ad_userns *u)
{
	if (strcmp(runtime, "runsc")) {
		ad_userns_plan(s->spec, u);
		return;
	}
	memset(u, 0, sizeof(*u));
	u->ws_fd = -1;
}

static int write_bundle(struct ad_sbx *s, const char *runtime, const struct ad_userns *u,
			const char *ws_path, char *bundle, size_t bsz)
{
	const struct ad_spec *sp = s->spec;
	struct sg_sbuf b, m;
	char rootfs[512], path[600], home_opts[96] = "nosuid,nodev,mode=0700";
	int first = 1, i, rc = SG_EIO;
	uid_t run_uid = 0;
	gid_t run_gid = 0;
	struct stat st;

	sg_sbuf_init(&b);
	sg_sbuf_init(&m);
	/* gVisor gets no user namespace (its sentry keeps the sandbox's users
	 * from the host's, and root in it has no capabilities): CMD, root
	 * without CAP_DAC_OVERRIDE, could not write a workspace another user
	 * owns. It runs as that owner instead, with a home it owns. */
	if (!strcmp(runtime, "runsc") && sp->workspace && stat(sp->workspace, &st) == 0 &&
	    st.st_uid != 0) {
		run_uid = st.st_uid;
		run_gid = st.st_gid;
		ad_fmt(home_opts, sizeof(home_opts), "nosuid,nodev,mode=0700,uid=%u,gid=%u",
		       (unsigned)run_uid, (unsigned)run_gid);
		if (sp->verbose)
			fprintf(stderr, "sandgate run: gVisor: CMD runs as the workspace's owner, "
				"uid %u gid %u\n", (unsigned)run_uid, (unsigned)run_gid);
	}
	if (ad_fmt(bundle, bsz, "%s/bundle", sp->state_dir) < 0 ||
	    ad_fmt(rootfs, sizeof(rootfs), "%s/rootfs", bundle) < 0 ||
	    ad_mkdir_p(rootfs, 0755) < 0)
		goto out;
	/* In a user namespace the runtime cannot create mount points in a
	 * root-owned tree: they are made here, in --rootfs too. */
	mp_root = sp->rootfs ? (u->on ? sp->rootfs : NULL) : rootfs;
	mount_json(&m, &first, "/proc", "proc", "proc", "nosuid,noexec,nodev");
	mount_json(&m, &first, "/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k");
	mount_json(&m, &first, "/dev/pts", "devpts", "devpts",
		   "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620");
	mount_json(&m, &first, "/dev/shm", "tmpfs", "shm", "nosuid,noexec,nodev,mode=1777,size=65536k");
	if (!sp->rootfs && skeleton(rootfs, &m, &first) < 0)
		goto out;
	mount_json(&m, &first, "/tmp", "tmpfs", "tmpfs", "nosuid,nodev,mode=1777");
	mount_json(&m, &first, "/var/tmp", "tmpfs", "tmpfs", "nosuid,nodev,mode=1777");
	mount_json(&m, &first, "/home/sandbox", "tmpfs", "tmpfs", home_opts);
	mount_json(&m, &first, "/run", "tmpfs", "tmpfs", "nosuid,nodev,mode=0755");
	mount_json(&m, &first, "/run/sandgate/ca.pem", "bind", sp->ca_bundle, "bind,ro");
	mount_json(&m, &first, "/etc/resolv.conf", "bind", sp->resolv_conf, "bind,ro");
	mount_json(&m, &first, "/etc/hosts", "bind", sp->hosts, "bind,ro");
	if (!sp->rootfs)
		mount_json(&m, &first, "/etc/ssl/certs/ca-certificates.crt", "bind", sp->ca_bundle,
			   "bind,ro");
	if (sp->workspace)
		/* runsc's gofer refuses nosuid/nodev on a bind (EINVAL); its
		 * sentry never honours setuid bits or device files from it. */
		mount_json(&m, &first, "/workspace", "bind", u->ws_fd >= 0 ? ws_path : sp->workspace,
			   strcmp(runtime, "runsc") ? "rbind,rw,nosuid,nodev" : "rbind,rw");

	sg_sbuf_printf(&b, "{\n  \"ociVersion\": \"1.0.2\",\n  \"process\": {\n"
		       "    \"terminal\": false,\n    \"user\": {\"uid\": %u, \"gid\": %u},\n"
		       "    \"args\": [", (unsigned)run_uid, (unsigned)run_gid);
	for (i = 0; sp->argv[i]; i++) {
		if (i)
			sg_sbuf_puts(&b, ",");
		sg_sbuf_json_str(&b, sp->argv[i]);
	}
	sg_sbuf_puts(&b, "],\n    \"env\": [");
	for (i = 0; sp->env[i]; i++) {
		if (i)
			sg_sbuf_puts(&b, ",");
		sg_sbuf_json_str(&b, sp->env[i]);
	}
	sg_sbuf_puts(&b, "],\n    \"cwd\": ");
	sg_sbuf_json_str(&b, sp->workspace ? "/workspace" : "/home/sandbox");
	sg_sbuf_puts(&b, ",\n    \"capabilities\": {\"bounding\": [], \"effective\": [], "
		     "\"inheritable\": [], \"permitted\": [], \"ambient\": []},\n"
		     "    \"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"hard\": 4096, \"soft\": 4096}],\n"
		     "    \"noNewPrivileges\": true\n  },\n  \"root\": {\"path\": ");
	sg_sbuf_json_str(&b, sp->rootfs ? sp->rootfs : rootfs);
	sg_sbuf_puts(&b, ", \"readonly\": true},\n  \"hostname\": ");
	sg_sbuf_json_str(&b, sp->name);
	sg_sbuf_puts(&b, ",\n  \"mounts\": [");
	sg_sbuf_add(&b, m.p ? m.p : "", m.len);
	sg_sbuf_puts(&b, "\n  ],\n  \"linux\": {\n    \"namespaces\": [{\"type\": \"pid\"}, "
		     "{\"type\": \"ipc\"}, {\"type\": \"uts\"}, {\"type\": \"mount\"}");
	/* runsc too: its sandbox process joins this path, and runsc copies
	 * the interfaces it finds there into its own network stack (without
	 * a path it would make a fresh, empty namespace). */
	sg_sbuf_printf(&b, ", {\"type\": \"network\", \"path\": \"/run/netns/%s\"}",
		       sp->net->ns);
	/* The runtime joins the network namespace (owned by the host's user
	 * namespace) before making this one: root inside has no say over it. */
	if (u->on)
		sg_sbuf_printf(&b, ", {\"type\": \"user\"}],\n"
			       "    \"uidMappings\": [{\"containerID\": 0, \"hostID\": %u, \"size\": 1}],\n"
			       "    \"gidMappings\": [{\"containerID\": 0, \"hostID\": %u, \"size\": 1}],\n",
			       u->uid, u->gid);
	else
		sg_sbuf_puts(&b, "],\n");
	if (!strcmp(runtime, "runc") && (sp->mem_bytes || sp->pids_max)) {
		sg_sbuf_puts(&b, "    \"resources\": {");
		if (sp->mem_bytes)
			sg_sbuf_printf(&b, "\"memory\": {\"limit\": %lld}%s", (long long)sp->mem_bytes,
				       sp->pids_max ? ", " : "");
		if (sp->pids_max)
			sg_sbuf_printf(&b, "\"pids\": {\"limit\": %d}", sp->pids_max);
		sg_sbuf_printf(&b, "},\n    \"cgroupsPath\": \"/sandgate-%s\",\n", sp->net->id);
	}
	sg_sbuf_puts(&b, "    \"maskedPaths\": [\"/proc/kcore\", \"/proc/keys\", \"/proc/timer_list\", "
		     "\"/proc/sched_debug\", \"/sys/firmware\"],\n"
		     "    \"readonlyPaths\": [\"/proc/sys\", \"/proc/sysrq-trigger\", \"/proc/irq\", "
		     "\"/proc/bus\"],\n"
		     "    \"seccomp\": {\"defaultAction\": \"SCMP_ACT_ALLOW\", \"architectures\": "
		     "[\"SCMP_ARCH_X86_64\", \"SCMP_ARCH_X86\", \"SCMP_ARCH_X32\"], \"syscalls\": [");
	/* The container backend's filter, rule for rule (ad_seccomp.c). */
	ad_seccomp_oci_json(&b, AD_SCMP_SANDBOX | AD_SCMP_NOSETID);
	sg_sbuf_puts(&b, "\n    ]}\n  }\n}\n");
	if (b.oom || m.oom || ad_fmt(path, sizeof(path), "%s/config.json", bundle) < 0 ||
	    ad_file_write(path, b.p, b.len, 0600) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "sandgate run: cannot write the OCI bundle in %s\n", sp->state_dir);
	sg_sbuf_free(&b);
	sg_sbuf_free(&m);
	return rc;
}

/* The runtime's process, between fork and exec: crun and an idmapped
 * workspace need a private mount namespace (what is mounted there stays
 * there and goes with the runtime). Never returns. */
static void runtime_exec(const char *runtime, const char *root, const char *bundle,
			 const char *id, struct ad_userns *u, const char *ws_path,
			 const char *netns, const char *script)
{
	int crun = !strcmp(runtime, "crun");

	if (crun || u->ws_fd >= 0) {
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
			fprintf(stderr, "sandgate run: private mount namespace: %s\n", strerror(errno));
			_exit(125);
		}
		/* crun 1.8 refuses hybrid cgroups: hide the v2 half. */
		if (crun)
			(void)mount("none", "/sys/fs/cgroup/unified", "tmpfs", 0, "size=4k");
		if (u->ws_fd >= 0 && ad_userns_ws_attach(u, ws_path) < 0) {
			fprintf(stderr, "sandgate run: attaching the idmapped workspace: %s\n",
				strerror(errno));
			_exit(125);
		}
	}
	if (!strcmp(runtime, "runc"))
		execlp("runc", "runc", "--root", root, "run", "--bundle", bundle, id, (char *)NULL);
	else if (crun)
		execlp("crun", "crun", "--root", root, "--cgroup-manager=disabled", "run", "--bundle",
		       bundle, id, (char *)NULL);
	else
		execlp("nsenter", "nsenter", netns, "unshare", "-m", "--propagation", "private",
		       "sh", "-c", script, (char *)NULL);
	_exit(127);
}

int ad_oci_start(struct ad_sbx *s, const char *runtime)
{
	const struct ad_spec *sp = s->spec;
	char bundle[512], root[512], script[2048], netns[128], ws_path[512] = "";
	struct ad_userns u;
	pid_t parent = getpid();

	userns_plan(s, runtime, &u);
	/* The idmapped workspace's mount point: only the runtime's mount
	 * namespace mounts on it. */
	if (u.ws_fd >= 0 &&
	    (ad_fmt(ws_path, sizeof(ws_path), "%s/workspace", sp->state_dir) < 0 ||
	     mkdir(ws_path, 0700) < 0)) {
		fprintf(stderr, "sandgate run: mkdir %s/workspace: %s\n", sp->state_dir,
			strerror(errno));
		goto fail;
	}
	if (write_bundle(s, runtime, &u, ws_path, bundle, sizeof(bundle)) < 0)
		goto fail;
	if (ad_fmt(root, sizeof(root), "%s/%s-root", sp->state_dir, runtime) < 0 ||
	    ad_fmt(s->id, sizeof(s->id), "sandgate-%s", sp->net->id) < 0 ||
	    ad_fmt(netns, sizeof(netns), "--net=/run/netns/%s", sp->net->ns) < 0)
		goto fail;
	if (!strcmp(runtime, "crun"))
		fprintf(stderr, "sandgate run: notice: crun runs with --cgroup-manager=disabled on "
			"this host's hybrid cgroups: no memory/pids limits\n");
	/* runsc's script execs it: its exit status is CMD's. */
	if (ad_fmt(script, sizeof(script),
		   "mount -t tmpfs -o size=4k none /proc/sys/net/core && "
		   "exec runsc --root='%s' --network=sandbox --platform=ptrace --oci-seccomp "
		   "run --bundle '%s' '%s'",
		   root, bundle, s->id) < 0)
		goto fail;
	s->pid = fork();
	if (s->pid < 0)
		goto fail;
	if (s->pid == 0) {
		/* SIGTERM, not SIGKILL: the runtime forwards it to the container
		 * and cleans up; a SIGKILLed runc would leave it running. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(125);
		ad_child_signals_reset();
		runtime_exec(runtime, root, bundle, s->id, &u, ws_path, netns, script);
	}
	ad_userns_release(&u);
	return 0;
fail:
	ad_userns_release(&u);
	return SG_EIO;
}

void ad_oci_cleanup(struct ad_sbx *s, const char *runtime)
{
	const struct ad_spec *sp = s->spec;
	char root[512], out[512];

	if (!s->id[0] || ad_fmt(root, sizeof(root), "%s/%s-root", sp->state_dir, runtime) < 0)
		return;
	/* The runtime's run ended (or was killed): make sure the container
	 * and its cgroups are gone. */
	if (!strcmp(runtime, "runsc")) {
		char rootarg[600];
		const char *argv[] = { "runsc", rootarg, "delete", "-force", s->id, NULL };

		ad_fmt(rootarg, sizeof(rootarg), "--root=%s", root);
		ad_cmd(argv, NULL, 0, out, sizeof(out));
	} else {
		const char *argv[] = { runtime, "--root", root, "delete", "-f", s->id, NULL };

		ad_cmd(argv, NULL, 0, out, sizeof(out));
	}
	/* A runtime killed mid-run leaves the cgroups it made, one per v1
	 * hierarchy, named after the container (runsc: /<id>; runc: our
	 * cgroupsPath). They are empty once the sandbox is gone. */
	{
		DIR *d = opendir("/sys/fs/cgroup");
		struct dirent *e;
		char cg[600];
		int tries;

		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.' ||
			    ad_fmt(cg, sizeof(cg), "/sys/fs/cgroup/%s/%s", e->d_name, s->id) < 0)
				continue;
			for (tries = 0; tries < 50 && rmdir(cg) < 0 && errno == EBUSY; tries++)
				usleep(20000);
		}
		if (d)
			closedir(d);
	}
	s->id[0] = '\0';
}

void ad_oci_sweep(const char *state_dir, const char *run_id)
{
	static const char *const runtimes[] = { "runc", "crun", "runsc" };
	char root[512], rootarg[600], id[64], out[512], path[600];
	struct stat st;
	size_t i;

	if (ad_fmt(id, sizeof(id), "sandgate-%s", run_id) < 0)
		return;
	for (i = 0; i < SG_ARRAY_LEN(runtimes); i++) {
		const char *rt = runtimes[i];
		const char *argv_runsc[] = { "runsc", rootarg, "delete", "-force", id, NULL };
		const char *argv_oci[] = { rt, "--root", root, "delete", "-f", id, NULL };

		/* Only a container this run's runtime recorded: its state is
		 * <state>/<runtime>-root/<id>. */
		if (ad_fmt(root, sizeof(root), "%s/%s-root", state_dir, rt) < 0 ||
		    ad_fmt(path, sizeof(path), "%s/%s", root, id) < 0 ||
		    stat(path, &st) < 0 || ad_which(rt, out, sizeof(out)) < 0)
			continue;
		ad_fmt(rootarg, sizeof(rootarg), "--root=%s", root);
		/* delete -f kills what is left of the container (SIGKILL) and
		 * removes its state and cgroups. */
		ad_cmd(!strcmp(rt, "runsc") ? argv_runsc : argv_oci, NULL, 0, out, sizeof(out));
	}
}

static int gv_available(const struct ad_spec *s, char *why, size_t whysz)
{
	if (s->runtime) {
		ad_fmt(why, whysz, "--runtime is for --backend container");
		return SG_EINVAL;
	}
	return ad_oci_available("runsc", why, whysz);
}

static int gv_start(struct ad_sbx *s)
{
	return ad_oci_start(s, "runsc");
}

static void gv_cleanup(struct ad_sbx *s)
{
	ad_oci_cleanup(s, "runsc");
}

const struct ad_backend ad_backend_gvisor = {
	.name = "gvisor",
	.link = AD_LINK_VETH,
	.available = gv_available,
	.start = gv_start,
	.cleanup = gv_cleanup,
};
