/*
 * ad_vm_image.c - what the microvm backend boots: the guest kernel, the
 * initramfs and the workspace disk.
 *
 * Kernel: Debian's linux-image-cloud-amd64 points at one versioned
 * package (linux-image-6.1.0-N-cloud-amd64); it is fetched once with
 * `apt-get download` and unpacked with `dpkg-deb -x`, never installed.
 * The cache keeps only vmlinuz and the few modules the guest loads, in
 * AD_CACHE_DIR/kernel/<package>_<version>/: a new package version is a
 * new key, and without apt (offline) the newest cached kernel is used.
 *
 * Initramfs: a newc cpio written here (no staging tree, no cpio binary):
 * busybox-static, /init and the modules. It is cached under a hash of its
 * inputs (kernel key, busybox identity, init script), so a new busybox or
 * kernel rebuilds it. Per run, a second small archive (CA bundle,
 * resolv.conf, hosts, addresses, the command) is appended to a copy: the
 * kernel unpacks concatenated archives in order (Documentation/
 * driver-api/early-userspace/buffer-format.rst), later files win.
 *
 * Shared directories: Debian's cloud kernel has no 9P (CONFIG_NET_9P is
 * off) but has virtio-fs (fuse + virtiofs modules), which ad_microvm.c
 * serves with QEMU's virtiofsd: /init mounts the workspace and the host's
 * /usr from it. The guest's /lib64 and /lib/x86_64-linux-gnu point into
 * /usr, so the host's dynamic binaries run once /usr is mounted. Where
 * virtiofsd is missing, the workspace is copied into an ext4 image
 * (`mke2fs -d`, ext4 is built in) on a virtio-blk device instead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sg.h"
#include "adapters/ad.h"
#include "sg_poison.h"

#define KERNEL_META "linux-image-cloud-amd64"

/* Loaded by /init in this order (RECIPES.md: virtio_net needs failover
 * and net_failover first; virtio_mmio is the only transport of microvm). */
static const char *const vm_modules[] = {
	"virtio_ring", "virtio", "virtio_mmio", "failover", "net_failover", "virtio_net",
	"virtio_blk", "fuse", "virtiofs", NULL
};

/* Runs as PID 1 in the guest. vm.conf (per run) sets SG_* variables.
 * Every failure before CMD prints the exit marker with 125 so the host
 * reports "sandgate failed" rather than a hang or a made-up status. */
static const char init_script[] =
	"#!/bin/busybox sh\n"
	"/bin/busybox --install -s\n"
	"export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"
	"mount -t proc proc /proc\n"
	"mount -t sysfs sysfs /sys\n"
	"mount -t devtmpfs devtmpfs /dev\n"
	"mkdir -p /dev/pts /dev/shm\n"
	"mount -t devpts devpts /dev/pts\n"
	"mount -t tmpfs tmpfs /tmp\n"
	"mount -t tmpfs tmpfs /dev/shm\n"
	". /run/sandgate/vm.conf\n"
	"dmesg -n 1\n"
	"stop() { sync; reboot -f; sleep 5; }\n"
	"fatal() { echo \"sandgate-init: $*\"; printf '\\n%s 125\\n' \"$SG_EXIT\"; stop; }\n"
	"for m in virtio_ring virtio virtio_mmio failover net_failover virtio_net virtio_blk \\\n"
	"\tfuse virtiofs; do\n"
	"\tinsmod /lib/modules/$m.ko || fatal \"insmod $m failed\"\n"
	"done\n"
	"i=0; while [ ! -e /sys/class/net/eth0 ]; do\n"
	"\ti=$((i+1)); [ $i -gt 1000 ] && fatal 'no eth0'; usleep 10000; done\n"
	/* DAD would hold the v6 address for a second (busybox ip has no
	 * "nodad"); RAs must not add routes. */
	"echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad\n"
	"echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_ra\n"
	"ip link set lo up && ip link set eth0 up || fatal 'eth0 up'\n"
	"i=0; while [ \"$(cat /sys/class/net/eth0/carrier 2>/dev/null)\" != 1 ]; do\n"
	"\ti=$((i+1)); [ $i -gt 1000 ] && fatal 'no carrier on eth0'; usleep 10000; done\n"
	"ip addr add \"$SG_SBX4/30\" dev eth0 || fatal 'ipv4 address'\n"
	"ip addr add \"$SG_SBX6/64\" dev eth0 || fatal 'ipv6 address'\n"
	"ip route add default via \"$SG_HOST4\" || fatal 'ipv4 route'\n"
	"ip route add default via \"$SG_HOST6\" || fatal 'ipv6 route'\n"
	"cp /run/sandgate/ca.pem /etc/ssl/certs/ca-certificates.crt\n"
	"hostname \"$SG_NAME\"\n"
	"if [ \"$SG_WORKSPACE\" = disk ]; then\n"
	"\ti=0; while [ ! -b /dev/vda ]; do\n"
	"\t\ti=$((i+1)); [ $i -gt 500 ] && fatal 'no workspace disk'; usleep 10000; done\n"
	"\tmount -t ext4 /dev/vda /workspace || fatal 'cannot mount the workspace'\n"
	"elif [ \"$SG_WORKSPACE\" = fs ]; then\n"
	"\tmount -t virtiofs ws /workspace || fatal 'cannot mount the workspace (virtio-fs)'\n"
	"fi\n"
	/* Last: from here on the host's binaries shadow busybox's in /usr. */
	"if [ \"$SG_HOSTUSR\" = 1 ]; then\n"
	"\tmount -t virtiofs -o ro usr /usr || fatal 'cannot mount /usr (virtio-fs)'\n"
	"fi\n"
	/* The serial line would turn \\n into \\r\\n: CMD's bytes pass as they are. */
	"stty -onlcr 2>/dev/null\n"
	"echo \"$SG_START\"\n"
	"env -i /bin/sh /run/sandgate/cmd.sh </dev/null\n"
	"rc=$?\n"
	/* What CMD left running would keep the workspace busy. */
	"cd /\n"
	"kill -9 -1 2>/dev/null\n"
	"sync\n"
	"[ \"$SG_WORKSPACE\" != 0 ] && umount /workspace 2>/dev/null\n"
	"printf '\\n%s %d\\n' \"$SG_EXIT\" \"$rc\"\n"
	"stop\n";

/* ---------------------------------------------------------- cpio */

/* newc ("070701"): 110-byte ASCII header, name, data, both padded to 4. */
static int cpio_entry(FILE *f, unsigned *ino, const char *name, unsigned mode, const void *data,
		      size_t len, unsigned rmaj, unsigned rmin)
{
	static const char zero[4];
	size_t nl = strlen(name) + 1;

	if (fprintf(f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X",
		    (*ino)++, mode, 0u, 0u, 1u, 0u, len, 0u, 0u, rmaj, rmin, nl, 0u) < 0 ||
	    fwrite(name, 1, nl, f) != nl ||
	    fwrite(zero, 1, (4 - (110 + nl) % 4) % 4, f) != (4 - (110 + nl) % 4) % 4)
		return SG_EIO;
	if (len && fwrite(data, 1, len, f) != len)
		return SG_EIO;
	if (fwrite(zero, 1, (4 - len % 4) % 4, f) != (4 - len % 4) % 4)
		return SG_EIO;
	return 0;
}

static int cpio_file(FILE *f, unsigned *ino, const char *name, const char *host_path,
		     unsigned mode)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int rc;

	if (stat(host_path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20))
		return SG_EIO;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return SG_ENOMEM;
	n = ad_file_read(host_path, buf, (size_t)st.st_size + 1);
	rc = n == st.st_size ? cpio_entry(f, ino, name, S_IFREG | mode, buf, (size_t)n, 0, 0) :
			       SG_EIO;
	free(buf);
	return rc;
}

static int cpio_trailer(FILE *f, unsigned *ino)
{
	return cpio_entry(f, ino, "TRAILER!!!", 0, NULL, 0, 0, 0);
}

/* ---------------------------------------------------------- kernel */

/* First token after `key` at a line start in text, into out. */
static int field_after(const char *text, const char *key, char *out, size_t outsz)
{
	const char *p = strstr(text, key);
	size_t n;

	if (!p)
		return SG_EINVAL;
	p += strlen(key);
	n = strcspn(p, " \t\n(");
	if (n == 0 || n >= outsz)
		return SG_EINVAL;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* The versioned package behind the metapackage and its candidate version. */
static int kernel_candidate(char *pkg, size_t pkgsz, char *ver, size_t versz)
{
	static char out[16384];
	const char *dep[] = { "apt-cache", "depends", KERNEL_META, NULL };
	const char *show[] = { "apt-cache", "show", "--no-all-versions", pkg, NULL };

	if (ad_cmd(dep, NULL, 0, out, sizeof(out)) != 0 ||
	    field_after(out, "Depends: ", pkg, pkgsz) < 0 || strncmp(pkg, "linux-image-", 12))
		return SG_EINVAL;
	if (ad_cmd(show, NULL, 0, out, sizeof(out)) != 0 ||
	    field_after(out, "\nVersion: ", ver, versz) < 0)
		return SG_EINVAL;
	return 0;
}

static int kernel_complete(const char *dir)
{
	char p[512];
	int i;

	if (ad_fmt(p, sizeof(p), "%s/vmlinuz", dir) < 0 || access(p, R_OK) < 0)
		return 0;
	for (i = 0; vm_modules[i]; i++)
		if (ad_fmt(p, sizeof(p), "%s/%s.ko", dir, vm_modules[i]) < 0 || access(p, R_OK) < 0)
			return 0;
	return 1;
}

/* nftw has no user pointer: the module search runs under the cache lock. */
static const char *find_name;
static char find_hit[1024];

static int find_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	SG_UNUSED(st);
	if (type == FTW_F && !strcmp(path + ftw->base, find_name)) {
		ad_fmt(find_hit, sizeof(find_hit), "%s", path);
		return 1;
	}
	return 0;
}

static int copy_file(const char *from, const char *to, int mode)
{
	const char *cp[] = { "cp", from, to, NULL };

	return ad_cmd(cp, NULL, 0, NULL, 0) == 0 && chmod(to, (mode_t)mode) == 0 ? 0 : SG_EIO;
}

/* Download and unpack into tmp, then keep vmlinuz + modules in stage. */
static int kernel_fetch(const char *pkg, const char *tmp, const char *stage)
{
	char deb[1024], x[600], path[1100], ko[64], out[2048];
	const char *dl[] = { "apt-get", "-q", "download", pkg, NULL };
	DIR *d;
	struct dirent *e;
	int cwd, rc, i;

	/* apt-get download writes into the current directory. */
	cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0 || chdir(tmp) < 0) {
		if (cwd >= 0)
			close(cwd);
		return SG_EIO;
	}
	rc = ad_cmd(dl, NULL, 0, out, sizeof(out));
	if (fchdir(cwd) < 0)
		rc = -1;
	close(cwd);
	if (rc != 0) {
		fprintf(stderr, "sandgate run: apt-get download %s: %s", pkg, out);
		return SG_EIO;
	}
	deb[0] = '\0';
	if ((d = opendir(tmp))) {
		while ((e = readdir(d)))
			if (strlen(e->d_name) > 4 && !strcmp(e->d_name + strlen(e->d_name) - 4, ".deb"))
				ad_fmt(deb, sizeof(deb), "%s/%s", tmp, e->d_name);
		closedir(d);
	}
	if (!deb[0] || ad_fmt(x, sizeof(x), "%s/x", tmp) < 0)
		return SG_EIO;
	{
		const char *ex[] = { "dpkg-deb", "-x", deb, x, NULL };

		if (ad_cmd(ex, NULL, 0, out, sizeof(out)) != 0) {
			fprintf(stderr, "sandgate run: dpkg-deb -x %s: %s", deb, out);
			return SG_EIO;
		}
	}
	/* boot/vmlinuz-<release> */
	if (ad_fmt(path, sizeof(path), "%s/boot", x) < 0 || !(d = opendir(path)))
		return SG_EIO;
	rc = SG_EIO;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "vmlinuz-", 8) &&
		    ad_fmt(path, sizeof(path), "%s/boot/%s", x, e->d_name) == 0) {
			char to[600];

			rc = ad_fmt(to, sizeof(to), "%s/vmlinuz", stage) == 0 ?
			     copy_file(path, to, 0644) : SG_EIO;
			break;
		}
	closedir(d);
	if (rc < 0)
		return rc;
	if (ad_fmt(path, sizeof(path), "%s/lib/modules", x) < 0)
		return SG_EIO;
	for (i = 0; vm_modules[i]; i++) {
		char to[600];

		ad_fmt(ko, sizeof(ko), "%s.ko", vm_modules[i]);
		find_name = ko;
		find_hit[0] = '\0';
		nftw(path, find_cb, 16, FTW_PHYS);
		if (!find_hit[0]) {
			/* Newer Debian kernels compress modules; this one must not. */
			fprintf(stderr, "sandgate run: %s has no %s (compressed modules are not "
				"supported)\n", pkg, ko);
			return SG_EIO;
		}
		if (ad_fmt(to, sizeof(to), "%s/%s", stage, ko) < 0 ||
		    copy_file(find_hit, to, 0644) < 0)
			return SG_EIO;
	}
	return 0;
}

/* The newest complete cached kernel (offline use). */
static int kernel_newest_cached(const char *root, char *key, size_t keysz)
{
	DIR *d = opendir(root);
	struct dirent *e;
	time_t best = 0;
	char dir[512];
	struct stat st;

	if (!d)
		return SG_EIO;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || ad_fmt(dir, sizeof(dir), "%s/%s", root, e->d_name) < 0 ||
		    stat(dir, &st) < 0 || !kernel_complete(dir) || st.st_mtime < best)
			continue;
		best = st.st_mtime;
		ad_fmt(key, keysz, "%s", e->d_name);
	}
	closedir(d);
	return best ? 0 : SG_EIO;
}

int ad_vm_kernel_get(struct ad_vm_kernel *k, int verbose)
{
	char pkg[128], ver[64], tmp[512], stage[512], root[256];
	int lock = -1, rc = SG_EIO;
	size_t i;

	memset(k, 0, sizeof(*k));
	if (ad_fmt(root, sizeof(root), "%s/kernel", AD_CACHE_DIR) < 0 || ad_mkdir_p(root, 0755) < 0) {
		fprintf(stderr, "sandgate run: cannot create %s/kernel\n", AD_CACHE_DIR);
		return SG_EIO;
	}
	if (kernel_candidate(pkg, sizeof(pkg), ver, sizeof(ver)) < 0) {
		if (kernel_newest_cached(root, k->key, sizeof(k->key)) < 0) {
			fprintf(stderr, "sandgate run: apt knows no %s and nothing is cached in %s\n",
				KERNEL_META, root);
			return SG_EIO;
		}
		fprintf(stderr, "sandgate run: notice: apt has no %s here; using the cached "
			"kernel %s\n", KERNEL_META, k->key);
		goto found;
	}
	/* The key names package and version: an epoch's ':' is not welcome
	 * in a path that ends up on QEMU's command line. */
	if (ad_fmt(k->key, sizeof(k->key), "%s_%s", pkg, ver) < 0)
		return SG_EINVAL;
	for (i = 0; k->key[i]; i++)
		if (k->key[i] == ':' || k->key[i] == '/' || k->key[i] == ',')
			k->key[i] = '_';
	if (ad_fmt(k->dir, sizeof(k->dir), "%s/%s", root, k->key) < 0)
		return SG_EINVAL;
	if (kernel_complete(k->dir))
		goto found;
	/* One download at a time; a second run waits and then finds it. */
	lock = open(AD_CACHE_DIR "/.kernel.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		goto out;
	if (kernel_complete(k->dir)) {
		rc = 0;
		goto out_found;
	}
	fprintf(stderr, "sandgate run: fetching the guest kernel %s %s (once; cached in %s)\n",
		pkg, ver, root);
	if (ad_fmt(tmp, sizeof(tmp), "%s/.dl-%d", root, (int)getpid()) < 0 ||
	    ad_fmt(stage, sizeof(stage), "%s/.stage-%d", root, (int)getpid()) < 0)
		goto out;
	ad_rm_rf(tmp);
	ad_rm_rf(stage);
	if (mkdir(tmp, 0700) < 0 || mkdir(stage, 0755) < 0)
		goto out;
	rc = kernel_fetch(pkg, tmp, stage);
	ad_rm_rf(tmp);
	/* An older build's cache of this kernel lacks a module we now load:
	 * set it aside (a run using it keeps its open files), then swap. */
	if (rc == 0 && access(k->dir, F_OK) == 0 &&
	    (ad_fmt(tmp, sizeof(tmp), "%s/.old-%d", root, (int)getpid()) < 0 ||
	     rename(k->dir, tmp) < 0))
		rc = SG_EIO;
	if (rc == 0 && rename(stage, k->dir) < 0)
		rc = SG_EIO;
	ad_rm_rf(tmp);
	ad_rm_rf(stage);
	if (rc < 0) {
		/* No network: an older cached kernel still boots. */
		if (kernel_newest_cached(root, k->key, sizeof(k->key)) < 0)
			goto out;
		fprintf(stderr, "sandgate run: notice: using the cached kernel %s\n", k->key);
		rc = 0;
		goto out_found;
	}
	goto out_found;
found:
	rc = 0;
out_found:
	if (ad_fmt(k->dir, sizeof(k->dir), "%s/%s", root, k->key) < 0 ||
	    ad_fmt(k->vmlinuz, sizeof(k->vmlinuz), "%s/vmlinuz", k->dir) < 0)
		rc = SG_EINVAL;
	if (rc == 0 && verbose)
		fprintf(stderr, "sandgate run: guest kernel %s\n", k->dir);
out:
	if (lock >= 0)
		close(lock);
	return rc;
}

/* ------------------------------------------------------ initramfs */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int base_write(const struct ad_vm_kernel *k, const char *busybox, const char *path)
{
	static const char *const dirs[] = {
		"bin", "sbin", "usr", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "etc",
		"etc/ssl", "etc/ssl/certs", "run", "run/sandgate", "lib", "lib/modules", "root",
		"home", "home/sandbox", "workspace", "var", "var/tmp", NULL
	};
	static const char *const links[][2] = {
		{ "lib64", "usr/lib64" },
		{ "lib/x86_64-linux-gnu", "../usr/lib/x86_64-linux-gnu" },
		{ NULL, NULL }
	};
	/* getpwuid() and friends (git's committer identity, python's
	 * getpass, ssh) want the user to exist. */
	static const char *const etc[][2] = {
		{ "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n" },
		{ "etc/group", "root:x:0:\n" },
		{ NULL, NULL }
	};
	char src[600], name[128];
	unsigned ino = 1;
	FILE *f = fopen(path, "we");
	int i, rc = 0;

	if (!f)
		return SG_EIO;
	for (i = 0; dirs[i] && rc == 0; i++)
		rc = cpio_entry(f, &ino, dirs[i], S_IFDIR | 0755, NULL, 0, 0, 0);
	/* The kernel opens /dev/console for init before anything is mounted. */
	if (rc == 0)
		rc = cpio_entry(f, &ino, "dev/console", S_IFCHR | 0600, NULL, 0, 5, 1);
	if (rc == 0)
		rc = cpio_entry(f, &ino, "init", S_IFREG | 0755, init_script, strlen(init_script),
				0, 0);
	if (rc == 0)
		rc = cpio_file(f, &ino, "bin/busybox", busybox, 0755);
	if (rc == 0)
		rc = cpio_entry(f, &ino, "bin/sh", S_IFLNK | 0777, "busybox", 7, 0, 0);
	/* The host's dynamic loader and libraries, once /usr is mounted. */
	for (i = 0; links[i][0] && rc == 0; i++)
		rc = cpio_entry(f, &ino, links[i][0], S_IFLNK | 0777, links[i][1],
				strlen(links[i][1]), 0, 0);
	for (i = 0; etc[i][0] && rc == 0; i++)
		rc = cpio_entry(f, &ino, etc[i][0], S_IFREG | 0644, etc[i][1], strlen(etc[i][1]),
				0, 0);
	for (i = 0; vm_modules[i] && rc == 0; i++) {
		if (ad_fmt(src, sizeof(src), "%s/%s.ko", k->dir, vm_modules[i]) < 0 ||
		    ad_fmt(name, sizeof(name), "lib/modules/%s.ko", vm_modules[i]) < 0)
			rc = SG_EINVAL;
		else
			rc = cpio_file(f, &ino, name, src, 0644);
	}
	if (rc == 0)
		rc = cpio_trailer(f, &ino);
	if (fclose(f) != 0 && rc == 0)
		rc = SG_EIO;
	return rc;
}

int ad_vm_initramfs_base(const struct ad_vm_kernel *k, const char *busybox, char *out,
			 size_t outsz, int verbose)
{
	char tmp[600];
	struct stat st;
	uint64_t h = 0xcbf29ce484222325ULL;
	int rc;

	if (stat(busybox, &st) < 0)
		return SG_EIO;
	/* Inputs: which kernel (its modules), which busybox, which /init. */
	h = fnv1a(h, k->key, strlen(k->key));
	h = fnv1a(h, &st.st_size, sizeof(st.st_size));
	h = fnv1a(h, &st.st_mtime, sizeof(st.st_mtime));
	h = fnv1a(h, &st.st_ino, sizeof(st.st_ino));
	h = fnv1a(h, init_script, sizeof(init_script));
	if (ad_fmt(out, outsz, "%s/initramfs-%016llx.cpio", AD_CACHE_DIR,
		   (unsigned long long)h) < 0 ||
	    ad_fmt(tmp, sizeof(tmp), "%s.%d.tmp", out, (int)getpid()) < 0)
		return SG_EINVAL;
	if (access(out, R_OK) == 0)
		return 0;
	rc = base_write(k, busybox, tmp);
	/* rename: a concurrent run sees the old file or the whole new one. */
	if (rc == 0 && rename(tmp, out) < 0)
		rc = SG_EIO;
	unlink(tmp);
	if (rc < 0)
		fprintf(stderr, "sandgate run: cannot build the initramfs %s\n", out);
	else if (verbose)
		fprintf(stderr, "sandgate run: built the initramfs %s\n", out);
	return rc;
}

int ad_vm_initrd_write(const char *base, const char *out, const struct ad_vm_file *files, int nf)
{
	const char *cp[] = { "cp", base, out, NULL };
	unsigned ino = 100000;          /* above the base archive's inode numbers */
	FILE *f;
	int i, rc = 0;

	/* 0600: it holds CMD's environment (--env values) and arguments. */
	if (ad_cmd(cp, NULL, 0, NULL, 0) != 0 || chmod(out, 0600) < 0)
		return SG_EIO;
	f = fopen(out, "ae");
	if (!f)
		return SG_EIO;
	for (i = 0; i < nf && rc == 0; i++)
		rc = files[i].host_path ?
		     cpio_file(f, &ino, files[i].name, files[i].host_path, (unsigned)files[i].mode) :
		     cpio_entry(f, &ino, files[i].name, S_IFREG | (unsigned)files[i].mode,
				files[i].data, files[i].len, 0, 0);
	if (rc == 0)
		rc = cpio_trailer(f, &ino);
	if (fclose(f) != 0 && rc == 0)
		rc = SG_EIO;
	return rc;
}

/* ------------------------------------------------------ workspace */

static long long tree_bytes;

static int size_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	SG_UNUSED(path);
	SG_UNUSED(type);
	SG_UNUSED(ftw);
	tree_bytes += (long long)st->st_size + 4096;
	return 0;
}

int ad_vm_workspace_image(const char *dir, const char *img)
{
	char size[32], out[2048];
	const char *mk[] = { "mke2fs", "-q", "-F", "-t", "ext4", "-d", dir, img, size, NULL };

	tree_bytes = 0;
	if (nftw(dir, size_cb, 16, FTW_PHYS) != 0)
		return SG_EIO;
	/* Room to write: the tree, a quarter more, and 64 MiB (sparse file). */
	ad_fmt(size, sizeof(size), "%lldk", (tree_bytes + tree_bytes / 4) / 1024 + 65536);
	if (ad_cmd(mk, NULL, 0, out, sizeof(out)) != 0) {
		fprintf(stderr, "sandgate run: mke2fs -d %s: %s", dir, out);
		return SG_EIO;
	}
	/* A copy of the user's files: no wider access than the run's own. */
	return chmod(img, 0600) < 0 ? SG_EIO : 0;
}
