/*
 * ad_idmap.c - the user namespace of the container backends (sandgate's own
 * namespaces and runc/crun) and the idmapped workspace that goes with it.
 *
 * Root inside the sandbox is host uid/gid AD_ID_BASE + the run's subnet
 * index: unique among live runs, owning nothing on the host. The workspace
 * is an idmapped mount in which its owner's files belong to that uid, so
 * CMD writes there as root and the files land as the owner. The mount is
 * made here detached (open_tree + mount_setattr, in the caller's process,
 * which is real root) and attached later by whoever builds the sandbox's
 * mount namespace: nothing lands in the host's mount table.
 *
 * Fallbacks (a notice each, the run goes on): a workspace that cannot be
 * idmapped (filesystem, kernel) makes root inside its owner; for a
 * root-owned one, and on a host without user namespaces, there is none
 * (root inside is root outside, without capabilities).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sg.h"
#include "adapters/ad.h"
#include "sg_poison.h"

/* pid's user namespace maps in_uid/in_gid (inside) to uid/gid, size 1.
 * One write each, by a process holding CAP_SETUID/CAP_SETGID over the
 * parent namespace: setgroups need not be denied first. */
static int maps_write(pid_t pid, unsigned in_uid, unsigned in_gid, unsigned uid, unsigned gid)
{
	char path[64], map[64];

	if (ad_fmt(path, sizeof(path), "/proc/%d/uid_map", (int)pid) < 0 ||
	    ad_fmt(map, sizeof(map), "%u %u 1\n", in_uid, uid) < 0 || ad_proc_write(path, map) < 0 ||
	    ad_fmt(path, sizeof(path), "/proc/%d/gid_map", (int)pid) < 0 ||
	    ad_fmt(map, sizeof(map), "%u %u 1\n", in_gid, gid) < 0 || ad_proc_write(path, map) < 0)
		return SG_EIO;
	return 0;
}

int ad_userns_map(pid_t pid, unsigned uid, unsigned gid)
{
	return maps_write(pid, 0, 0, uid, gid);
}

/* A user namespace that only carries an idmapping: a child is cloned into
 * a fresh one, we write its maps (inside in_uid/in_gid <-> outside
 * uid/gid) and keep a descriptor of it; the child exits once we hold it.
 * Returns the descriptor or -errno. */
static int userns_fd_make(unsigned in_uid, unsigned in_gid, unsigned uid, unsigned gid)
{
	char path[64];
	int p[2], fd = -1, err = 0, st;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/* clone with a NULL stack behaves like fork; the child only reads. */
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0) {
		err = errno;
		close(p[0]);
		close(p[1]);
		return -err;
	}
	if (pid == 0) {
		char c;

		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	errno = 0;
	if (maps_write(pid, in_uid, in_gid, uid, gid) < 0 ||
	    ad_fmt(path, sizeof(path), "/proc/%d/ns/user", (int)pid) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		err = errno ? errno : EIO;
	close(p[1]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return fd >= 0 ? fd : -err;
}

/* The workspace as a detached mount idmapped through ns (whose map takes
 * the owner, as "inside" id, to root inside). Non-recursive: a mount
 * inside the workspace is not carried over. Returns the fd or -errno. */
static int ws_idmapped(const char *ws, int ns)
{
	struct mount_attr attr;
	int fd, err;

	fd = open_tree(AT_FDCWD, ws, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&attr, 0, sizeof(attr));
	attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	attr.userns_fd = (uint64_t)ns;
	if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

void ad_userns_plan(const struct ad_spec *sp, struct ad_userns *u)
{
	struct stat st;
	int ns, fd;

	memset(u, 0, sizeof(*u));
	u->ws_fd = -1;
	u->uid = u->gid = AD_ID_BASE + sp->net->idx;
	if (sp->workspace && stat(sp->workspace, &st) < 0) {
		fprintf(stderr, "sandgate run: notice: no user namespace (%s: %s)\n", sp->workspace,
			strerror(errno));
		return;
	}
	/* The idmapping's namespace: the workspace's owner <-> root inside.
	 * Without a workspace it is only a probe: can this host make one? */
	ns = sp->workspace ? userns_fd_make(st.st_uid, st.st_gid, u->uid, u->gid) :
			     userns_fd_make(0, 0, u->uid, u->gid);
	if (ns < 0) {
		fprintf(stderr, "sandgate run: notice: no user namespace (%s): root in the sandbox "
			"is root on the host, without capabilities\n", strerror(-ns));
		return;
	}
	if (!sp->workspace) {
		close(ns);
		u->on = 1;
		goto said;
	}
	fd = ws_idmapped(sp->workspace, ns);
	close(ns);
	if (fd >= 0) {
		u->on = 1;
		u->ws_fd = fd;
		goto said;
	}
	if (st.st_uid != 0) {
		u->on = 1;
		u->uid = st.st_uid;
		u->gid = st.st_gid;
		fprintf(stderr, "sandgate run: notice: the workspace cannot be idmapped (%s): root in "
			"the sandbox is its owner, uid %u\n", strerror(-fd), u->uid);
		goto said;
	}
	fprintf(stderr, "sandgate run: notice: no user namespace: the workspace is root's and "
		"cannot be idmapped (%s); root in the sandbox is root on the host, without "
		"capabilities\n", strerror(-fd));
	return;
said:
	if (sp->verbose)
		fprintf(stderr, "sandgate run: user namespace: root inside is host uid %u gid %u%s\n",
			u->uid, u->gid, u->ws_fd >= 0 ? " (workspace idmapped to its owner)" : "");
}

int ad_userns_ws_attach(struct ad_userns *u, const char *path)
{
	int rc = move_mount(u->ws_fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH), e = errno;

	ad_userns_release(u);
	errno = e;
	return rc < 0 ? SG_EIO : 0;
}

void ad_userns_release(struct ad_userns *u)
{
	if (u->ws_fd >= 0)
		close(u->ws_fd);
	u->ws_fd = -1;
}
