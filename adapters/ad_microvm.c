/*
 * ad_microvm.c - the microvm backend: QEMU `-M microvm` on the run's tap.
 *
 * The guest's only NIC is a virtio-net device on the tap "sgr<id>", whose
 * traffic meets the same nft table as a veth (keyed on iifname): the VM
 * gets no other device that reaches the network. The guest kernel and the
 * initramfs come from ad_vm_image.c; /init configures eth0 from vm.conf,
 * installs the CA bundle, mounts the workspace disk and runs CMD.
 *
 * Exit status: the serial console is the only channel back. /init prints
 * "SANDGATE-START-<nonce>" just before CMD and "\nSANDGATE-EXIT-<nonce> N"
 * after it; the nonce is fresh per run so output that merely looks like a
 * marker is not one. (CMD runs as root in the guest and could read the
 * nonce and forge a status: that only lies about its own exit status.)
 * A "console filter" process sits between QEMU and our stdout: before the
 * start marker everything is boot noise (kept in console.log, shown on
 * failure or with -v); after it, bytes go to stdout unchanged except the
 * newline that /init adds before the exit marker. That filter is the
 * sandbox process of struct ad_sbx: its exit status is CMD's.
 *
 * Acceleration: KVM only where the host really has it (vmx/svm in
 * /proc/cpuinfo and no kvm_pvm module: nested PVM exposes /dev/kvm but
 * guests hang). Otherwise TCG, which needs the host's TSC frequency on the
 * kernel command line (tsc_early_khz, tsc=reliable) or a fifth of boots
 * hang calibrating.
 *
 * Firecracker: where `firecracker` is on PATH and KVM is usable (it has no
 * emulator to fall back to), it replaces QEMU: the same kernel (as the ELF
 * vmlinux it loads, extracted once by ad_fc.c), initramfs, tap and boot
 * arguments, given through its API socket once it is up; its stdout is the
 * guest's serial console, read by the same console filter. It has no
 * virtio-fs, so the workspace is the ext4 copy and CMD has busybox only (a
 * notice says so). SANDGATE_FC_FORCE=1 is a test hook: drive firecracker
 * without checking for KVM (the tests' fake boots in QEMU under TCG).
 *
 * Shared directories (virtio-fs, where QEMU's virtiofsd exists): the
 * workspace read-write, live (what CMD writes is on the host as it writes
 * it), and the host's /usr read-only, so CMD runs the host's curl, python3,
 * node or git as in the container backend. One virtiofsd per share, a child
 * of the console filter like QEMU: each runs in its own user namespace
 * (guest root is the workspace's owner on the host for the workspace, and
 * nobody for /usr, which is also a read-only bind mount) and gets its
 * listening vhost-user socket as an inherited fd; the workspace's one
 * also a seccomp filter that refuses setuid and setgid modes (what guest
 * root sets there lands on the host). QEMU's guest memory is a
 * shared memfd (vhost-user needs it). Without virtiofsd the workspace is
 * an ext4 copy on a virtio-blk disk (ad_vm_image.c), not written back, and
 * the guest has busybox only; a notice says so.
 *
 * Not attached: stdin (the console is output only; CMD reads /dev/null).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_sbuf.h"
#include "adapters/ad.h"
#include "adapters/ad_fc.h"
#include "sg_poison.h"

#define VM_BUSYBOX "/bin/busybox"
#define VM_MEM_MB "256"
#define VM_FC_API_TIMEOUT_MS 15000  /* socket up + every PUT, InstanceStart included */
#define VM_BOOT_TIMEOUT_S 180   /* TCG on a loaded 2-core host: generous */
#define VM_FAILED 125
#define VM_SHARES 2
#define VM_NOBODY 65534

static const char *const virtiofsd_paths[] = {
	"/usr/lib/qemu/virtiofsd",      /* qemu-system-common up to QEMU 7.2 (Debian 12) */
	"/usr/libexec/virtiofsd",       /* the Rust virtiofsd package (Debian 13) */
	"virtiofsd",
	NULL
};

/* The virtiofsd to use, or -1. SANDGATE_VIRTIOFSD names another binary,
 * or "off" for the workspace copy on a disk (and no host /usr). */
static int virtiofsd_find(char *out, size_t outsz)
{
	const char *env = getenv("SANDGATE_VIRTIOFSD");
	int i;

	if (env && *env)
		return strcmp(env, "off") ? ad_which(env, out, outsz) : -1;
	for (i = 0; virtiofsd_paths[i]; i++)
		if (ad_which(virtiofsd_paths[i], out, outsz) == 0)
			return 0;
	return -1;
}

/* The guest's /usr is the host's only on a merged-/usr host (/lib64 ->
 * usr/lib64): the guest's /lib64 and /lib/<triplet> point into /usr. */
static int host_usr_shareable(void)
{
	char l[64];
	ssize_t n = readlink("/lib64", l, sizeof(l) - 1);

	if (n <= 0)
		return 0;
	l[n] = '\0';
	return (!strcmp(l, "usr/lib64") || !strcmp(l, "/usr/lib64")) &&
	       access("/usr/lib/x86_64-linux-gnu", X_OK) == 0;
}

/* ------------------------------------------------------------ checks */

/* busybox-static: an ELF with no PT_INTERP (a dynamic busybox would find
 * no libc in the initramfs and the guest would panic without a word). */
static int is_static_elf(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(path, O_RDONLY | O_CLOEXEC), i, ok = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph))
		goto out;
	ok = 1;
	for (i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (Elf64_Off)i * sizeof(ph))) !=
		    sizeof(ph)) {
			ok = 0;
			break;
		}
		if (ph.p_type == PT_INTERP) {
			ok = 0;
			break;
		}
	}
out:
	close(fd);
	return ok;
}

/* KVM usable? why gets the reason when not. */
static int kvm_usable(char *why, size_t whysz)
{
	static char cpuinfo[1 << 16];
	int vmx;

	if (ad_file_read("/proc/cpuinfo", cpuinfo, sizeof(cpuinfo)) <= 0) {
		ad_fmt(why, whysz, "/proc/cpuinfo unreadable");
		return 0;
	}
	vmx = strstr(cpuinfo, " vmx") || strstr(cpuinfo, " svm");
	if (!vmx) {
		ad_fmt(why, whysz, "no vmx/svm in /proc/cpuinfo");
		return 0;
	}
	if (access("/sys/module/kvm_pvm", F_OK) == 0) {
		ad_fmt(why, whysz, "/dev/kvm is nested PVM (kvm_pvm), where guests hang");
		return 0;
	}
	if (access("/dev/kvm", R_OK | W_OK) < 0) {
		ad_fmt(why, whysz, "no usable /dev/kvm");
		return 0;
	}
	return 1;
}

/* The host's TSC frequency in kHz: the sysfs value where the kernel
 * exports it, else "cpu MHz" of /proc/cpuinfo (the TSC on constant_tsc
 * CPUs, which is all of them under a hypervisor). 0 if unknown. */
static long tsc_khz(void)
{
	static char buf[1 << 16];
	const char *p;

	if (ad_file_read("/sys/devices/system/cpu/cpu0/tsc_freq_khz", buf, sizeof(buf)) > 0 &&
	    atol(buf) > 0)
		return atol(buf);
	if (ad_file_read("/proc/cpuinfo", buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "cpu MHz")) ||
	    !(p = strchr(p, ':')))
		return 0;
	return (long)(strtod(p + 1, NULL) * 1000.0);
}

static int fc_choose(const struct ad_spec *sp, char *fc, size_t fcsz, int quiet);

static int vm_available(const struct ad_spec *s, char *why, size_t whysz)
{
	char path[512];

	if (ad_which("qemu-system-x86_64", path, sizeof(path)) < 0 &&
	    !fc_choose(s, path, sizeof(path), 1)) {
		ad_fmt(why, whysz, "needs qemu-system-x86_64 (Debian package qemu-system-x86), "
		       "or firecracker and KVM");
		return SG_EINVAL;
	}
	if (!is_static_elf(VM_BUSYBOX)) {
		ad_fmt(why, whysz, "needs a static %s for the guest (Debian package busybox-static)",
		       VM_BUSYBOX);
		return SG_EINVAL;
	}
	if (getenv("SANDGATE_VIRTIOFSD") && *getenv("SANDGATE_VIRTIOFSD") &&
	    strcmp(getenv("SANDGATE_VIRTIOFSD"), "off") &&
	    virtiofsd_find(path, sizeof(path)) < 0) {
		ad_fmt(why, whysz, "SANDGATE_VIRTIOFSD=%s: no such executable",
		       getenv("SANDGATE_VIRTIOFSD"));
		return SG_EINVAL;
	}
	if (s->workspace && virtiofsd_find(path, sizeof(path)) < 0 &&
	    ad_which("mke2fs", path, sizeof(path)) < 0) {
		ad_fmt(why, whysz, "--workspace needs virtiofsd (Debian package qemu-system-common) "
		       "or mke2fs (e2fsprogs)");
		return SG_EINVAL;
	}
	if (s->rootfs) {
		ad_fmt(why, whysz, "--rootfs does not apply: the guest's root is its initramfs");
		return SG_EINVAL;
	}
	if (access("/dev/net/tun", R_OK | W_OK) < 0) {
		ad_fmt(why, whysz, "needs /dev/net/tun");
		return SG_EINVAL;
	}
	return 0;
}

/* --------------------------------------------------- per-run files */

/* 'text' for sh: ' becomes '\'' */
static void sh_quote(struct sg_sbuf *b, const char *s)
{
	sg_sbuf_puts(b, "'");
	for (; *s; s++) {
		if (*s == '\'')
			sg_sbuf_puts(b, "'\\''");
		else
			sg_sbuf_add(b, s, 1);
	}
	sg_sbuf_puts(b, "'");
}

static void sh_var(struct sg_sbuf *b, const char *k, const char *v)
{
	sg_sbuf_printf(b, "%s=", k);
	sh_quote(b, v);
	sg_sbuf_puts(b, "\n");
}

/* One virtio-fs share: host directory, guest tag, who guest root is. */
struct vm_share {
	const char *tag;                /* "ws" -> /workspace, "usr" -> /usr */
	char src[512];                  /* the host directory */
	char sock[128], log[128], pid_file[128], mnt[128];
	int read_only;                  /* the bind mount at mnt is read-only */
	struct ad_userns *idmap;        /* attach this idmapped mount at mnt instead */
	uid_t uid;                      /* guest root on the host */
	gid_t gid;
	int lfd;                        /* listening vhost-user socket, in the filter */
	char chardev[192], device[96];
};

struct vm_run {
	char nonce[33];
	char start_marker[64], exit_marker[64];
	char initrd[128], disk[128], console_log[128], qemu_log[128], pid_file[128];
	char qemu[512], virtiofsd[512];
	struct ad_vm_kernel kernel;
	struct vm_share share[VM_SHARES];
	int nshare;
	struct ad_userns uns;           /* the workspace share's: idmapped, as containers */
	int ws_fs;                      /* workspace on virtio-fs (else the ext4 copy) */
	int usr_fs;                     /* host /usr on virtio-fs */
	int fc;                         /* Firecracker instead of QEMU */
	char fc_bin[512], fc_sock[128], fc_log[128], fc_id[32], vmlinux[300];
};

static int write_initrd(struct ad_sbx *s, struct vm_run *v, const char *base)
{
	const struct ad_spec *sp = s->spec;
	const struct ad_net *n = sp->net;
	struct sg_sbuf conf, cmd;
	int i, rc;

	sg_sbuf_init(&conf);
	sg_sbuf_init(&cmd);
	sh_var(&conf, "SG_NAME", sp->name);
	sh_var(&conf, "SG_SBX4", n->sbx4);
	sh_var(&conf, "SG_HOST4", n->host4);
	sh_var(&conf, "SG_SBX6", n->sbx6);
	sh_var(&conf, "SG_HOST6", n->host6);
	sh_var(&conf, "SG_WORKSPACE", !sp->workspace ? "0" : v->ws_fs ? "fs" : "disk");
	sh_var(&conf, "SG_HOSTUSR", v->usr_fs ? "1" : "0");
	sh_var(&conf, "SG_START", v->start_marker);
	sh_var(&conf, "SG_EXIT", v->exit_marker);
	/* cmd.sh runs under `env -i`: the allow-listed environment is all
	 * CMD sees, then CMD replaces the shell (its status is /init's rc). */
	for (i = 0; sp->env[i]; i++) {
		sg_sbuf_puts(&cmd, "export ");
		sh_quote(&cmd, sp->env[i]);
		sg_sbuf_puts(&cmd, "\n");
	}
	sg_sbuf_puts(&cmd, "cd /workspace 2>/dev/null || cd /\nexec");
	for (i = 0; sp->argv[i]; i++) {
		sg_sbuf_puts(&cmd, " ");
		sh_quote(&cmd, sp->argv[i]);
	}
	sg_sbuf_puts(&cmd, "\n");
	if (conf.oom || cmd.oom) {
		rc = SG_ENOMEM;
	} else {
		const struct ad_vm_file files[] = {
			{ "run/sandgate/vm.conf", NULL, conf.p, conf.len, 0600 },
			{ "run/sandgate/cmd.sh", NULL, cmd.p, cmd.len, 0755 },
			{ "run/sandgate/ca.pem", sp->ca_bundle, NULL, 0, 0644 },
			{ "etc/resolv.conf", sp->resolv_conf, NULL, 0, 0644 },
			{ "etc/hosts", sp->hosts, NULL, 0, 0644 },
		};

		rc = ad_vm_initrd_write(base, v->initrd, files, (int)SG_ARRAY_LEN(files));
		if (rc < 0)
			fprintf(stderr, "sandgate run: cannot write %s\n", v->initrd);
	}
	sg_sbuf_free(&conf);
	sg_sbuf_free(&cmd);
	return rc;
}

/* ------------------------------------------------- console filter */

struct vm_console {
	const struct vm_run *v;
	int out_fd, log_fd, verbose;
	int running;                    /* between the start and exit markers */
	int started;                    /* the start marker was seen */
	int have_status, status;
	int pending_nl;                 /* a line's '\n', held back: maybe /init's */
	char line[4096];
	size_t len, sent;               /* sent: bytes of line already forwarded */
};

static void out_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Forward line[sent..len) to stdout, after any held newline; nl: the
 * line ends here (its newline is held in turn, even for an empty line). */
static void con_forward(struct vm_console *c, int nl)
{
	if (c->pending_nl && (nl || c->len > c->sent)) {
		out_all(c->out_fd, "\n", 1);
		c->pending_nl = 0;
	}
	out_all(c->out_fd, c->line + c->sent, c->len - c->sent);
	c->sent = c->len;
	if (nl)
		c->pending_nl = 1;
}

/* A line is complete (nl) or the buffer is full / idle (!nl). */
static void con_line(struct vm_console *c, int nl)
{
	size_t el = strlen(c->v->exit_marker), n = c->len;

	/* Markers are whole lines: only a line not yet partly forwarded. */
	if (nl && c->sent == 0) {
		if (n > 0 && c->line[n - 1] == '\r')
			n--;
		if (n > el && !memcmp(c->line, c->v->exit_marker, el) && c->line[el] == ' ') {
			c->status = atoi(c->line + el + 1);
			c->have_status = 1;
			c->pending_nl = 0;      /* it was /init's, before the marker */
			c->running = 0;         /* the rest ("reboot: ...") is noise */
			goto done;
		}
		if (!c->started && n == strlen(c->v->start_marker) &&
		    !memcmp(c->line, c->v->start_marker, n)) {
			c->running = c->started = 1;
			goto done;
		}
	}
	if (!c->running) {
		/* Boot noise: kept for the failure report, shown with -v. */
		out_all(c->log_fd, c->line, c->len);
		if (nl)
			out_all(c->log_fd, "\n", 1);
		if (c->verbose) {
			out_all(2, c->line, c->len);
			if (nl)
				out_all(2, "\n", 1);
		}
		goto done;
	}
	con_forward(c, nl);
	if (!nl)
		return;
done:
	c->len = c->sent = 0;
}

static void con_feed(struct vm_console *c, const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (p[i] == '\n') {
			con_line(c, 1);
			continue;
		}
		if (c->len == sizeof(c->line)) {
			/* A full buffer is no marker: forward (or log) it, go on. */
			con_line(c, 0);
			c->len = c->sent = 0;
		}
		c->line[c->len++] = p[i];
	}
}

/* Idle: forward a partial line unless it could still become the exit
 * marker (a prompt, a progress bar: the user wants to see it now). */
static void con_idle(struct vm_console *c)
{
	size_t el = strlen(c->v->exit_marker);

	if (!c->running || c->len == c->sent)
		return;
	if (c->sent == 0 && !memcmp(c->line, c->v->exit_marker, SG_MIN(c->len, el)))
		return;
	con_forward(c, 0);
}

static void show_tail(const char *path, const char *what)
{
	static char buf[1 << 16];
	ssize_t n = ad_file_read(path, buf, sizeof(buf));
	const char *p;
	int lines = 0;

	if (n <= 0)
		return;
	for (p = buf + n; p > buf && lines < 20; p--)
		if (p[-1] == '\n')
			lines++;
	fprintf(stderr, "--- %s (%s)\n%s%s", what, path, p, buf[n - 1] == '\n' ? "" : "\n");
}

static pid_t spawn_qemu(const char *const argv[], int out_fd, const char *log)
{
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	/* QEMU goes with the filter, even a SIGKILLed one. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	ad_child_signals_reset();
	{
		int devnull = open("/dev/null", O_RDONLY);
		int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		dup2(devnull, 0);
		dup2(out_fd, 1);
		dup2(lfd >= 0 ? lfd : devnull, 2);
	}
	execvp(argv[0], (char *const *)argv);
	_exit(127);
}

/* ------------------------------------------------------ virtio-fs */

/* The vhost-user socket QEMU connects to, listening before either
 * process starts (so the order they come up in does not matter). */
static int vfs_listen(struct vm_share *sh)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (ad_fmt(a.sun_path, sizeof(a.sun_path), "%s", sh->sock) < 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	unlink(sh->sock);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(sh->sock, 0600) < 0 ||
	    listen(fd, 1) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One write to a /proc file (uid_map wants it whole, in one call). */
static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	return close(fd) == 0 && ok ? 0 : -1;
}

/* The child: its own mount namespace where the share is bind-mounted at
 * sh->mnt (read-only for /usr), done as the host's root so the mount is
 * locked for what follows and the source is reachable whatever the
 * permissions of its parents; then its own user namespace (maps written
 * by the parent between 'u' and 'g') and virtiofsd on fd 3. Never returns. */
static void __attribute__((noreturn))
vfs_child(const struct vm_run *v, const struct vm_share *sh, pid_t parent, int up, int down)
{
	char fdarg[16], src[600], c = 0;
	const char *cache = sh->read_only ? "cache=always" : "cache=auto";
	const char *argv[] = { v->virtiofsd, fdarg, "-o", src, "-o", cache, "-o", "no_posix_lock",
			       "--rlimit-nofile=0", NULL };
	const char *step = "unshare";
	int nul, lfd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	ad_child_signals_reset();
	/* Opened as the host's root: guest root may be nobody, who cannot
	 * create files in the state directory. */
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	lfd = open(sh->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (nul < 0 || lfd < 0) {
		dprintf(2, "sandgate run: virtio-fs %s: %s: %s\n", sh->tag, sh->log, strerror(errno));
		_exit(127);
	}
	/* The run's supplementary groups (root's) would count in every
	 * permission check virtiofsd makes, and cannot be dropped once the
	 * parent denies setgroups: dropped here. */
	if ((step = "setgroups", setgroups(0, NULL)) < 0 ||
	    (step = "unshare", unshare(CLONE_NEWNS)) < 0 ||
	    (step = "private /", mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) < 0 ||
	    (sh->idmap ? (step = "idmapped mount", ad_userns_ws_attach(sh->idmap, sh->mnt)) :
	     (step = "bind", mount(sh->src, sh->mnt, NULL, MS_BIND | MS_REC, NULL))) < 0 ||
	    (sh->read_only &&
	     (step = "read-only remount",
	      mount(NULL, sh->mnt, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
		    NULL)) < 0) ||
	    (step = "user namespace", unshare(CLONE_NEWUSER)) < 0) {
		dprintf(2, "sandgate run: virtio-fs %s (%s): %s: %s\n", sh->tag, sh->src, step,
			strerror(errno));
		_exit(127);
	}
	/* The writable share: guest root writes there as the workspace's
	 * owner, root included, so a guest chmod 4755 would be a setuid file
	 * on the host. virtiofsd makes every such change with chmod, open or
	 * mknod calls of its own: the no-setid filter (ad_seccomp.c) refuses
	 * them, and the guest gets EPERM. Loaded here, before exec (it stays:
	 * no_new_privs is set with it), and before the parent maps our uid,
	 * so that a failure is the spawn's failure: no virtiofsd, no VM.
	 * virtiofsd's own filter and sandbox stack on top (the kernel applies
	 * the strictest verdict of all). */
	if (!sh->read_only && ad_seccomp_load(AD_SCMP_NOSETID) < 0) {
		dprintf(2, "sandgate run: virtio-fs %s: cannot load the seccomp filter\n", sh->tag);
		_exit(127);
	}
	if (write(up, "u", 1) != 1 || read(down, &c, 1) != 1 || c != 'g')
		_exit(127);
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		dprintf(2, "sandgate run: virtio-fs %s: setresuid: %s\n", sh->tag, strerror(errno));
		_exit(127);
	}
	/* Changing credentials cleared the parent-death signal: again, or a
	 * virtiofsd whose filter died before QEMU connected would wait on
	 * its socket for ever. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	ad_fmt(src, sizeof(src), "source=%s", sh->mnt);
	if (dup2(nul, 0) < 0 || dup2(lfd, 1) < 0 || dup2(lfd, 2) < 0 ||
	    (sh->lfd == 3 ? fcntl(3, F_SETFD, 0) : dup2(sh->lfd, 3)) < 0)
		_exit(127);
	ad_fmt(fdarg, sizeof(fdarg), "--fd=3");
	execv(argv[0], (char *const *)argv);
	dprintf(2, "sandgate run: exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* One virtiofsd for sh, a child of the filter (it goes with QEMU). */
static pid_t vfs_spawn(const struct vm_run *v, const struct vm_share *sh)
{
	char path[64], map[64], buf[64], c = 0;
	int up[2], down[2], ok = 0;
	pid_t me = getpid(), pid;

	if (pipe2(up, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(down, O_CLOEXEC) < 0) {
		close(up[0]);
		close(up[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		vfs_child(v, sh, me, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	if (pid > 0 && read(up[0], &c, 1) == 1 && c == 'u') {
		/* Guest root is one host uid: the workspace's owner, or nobody
		 * for /usr. setgroups is denied first (required for gid_map). */
		ad_fmt(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
		ok = write_str(path, "deny") == 0;
		ad_fmt(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
		ad_fmt(map, sizeof(map), "0 %u 1\n", (unsigned)sh->uid);
		ok = ok && write_str(path, map) == 0;
		ad_fmt(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
		ad_fmt(map, sizeof(map), "0 %u 1\n", (unsigned)sh->gid);
		ok = ok && write_str(path, map) == 0;
		ok = ok && write(down[1], "g", 1) == 1;
	}
	close(up[0]);
	close(down[1]);
	if (pid > 0 && !ok) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	if (pid > 0) {
		ad_fmt(buf, sizeof(buf), "%d %llu\n", (int)pid, ad_proc_starttime(pid));
		ad_file_write(sh->pid_file, buf, strlen(buf), 0644);
	}
	return pid;
}

/* Firecracker is up (or about to be): configure it and start the guest.
 * On failure it is killed and reaped; the caller exits VM_FAILED. */
static int fc_boot(const struct vm_run *v, const struct ad_fc_vm *fcvm, pid_t pid)
{
	struct ad_fc_vm vm = *fcvm;
	char err[768];

	vm.pid = pid;
	if (ad_fc_configure(v->fc_sock, &vm, VM_FC_API_TIMEOUT_MS, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "sandgate run: firecracker: %s\n", err);
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	show_tail(v->fc_log, "firecracker log");
	show_tail(v->qemu_log, "firecracker stderr");
	return SG_EIO;
}

/* The sandbox process: runs QEMU (or Firecracker: fcvm), filters its
 * console, exits with CMD's status (VM_FAILED when the guest never
 * reported one, 128+N when signal N stopped it first). */
static void __attribute__((noreturn))
filter_main(const struct vm_run *v, const char *const qargv[], const struct ad_fc_vm *fcvm,
	    int verbose)
{
	struct vm_console c = { .v = v, .out_fd = 1, .verbose = verbose };
	sigset_t set;
	int p[2], sfd, st, got_sig = 0, boot_timeout = VM_BOOT_TIMEOUT_S * 10, after_exit = 0, i;
	pid_t qpid;
	char buf[8192];

	/* The Firecracker API socket is the run's alone, whatever umask the
	 * caller had: whoever reaches it can repoint the VM's disk. (Not
	 * for virtiofsd: the guest's file modes would be masked too.) */
	if (fcvm)
		umask(077);
	c.log_fd = open(v->console_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	/* The run blocked these for its signalfd; so do we (inherited mask). */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (pipe2(p, O_CLOEXEC) < 0 || sfd < 0)
		_exit(VM_FAILED);
	for (i = 0; i < v->nshare; i++)
		if (vfs_spawn(v, &v->share[i]) < 0) {
			fprintf(stderr, "sandgate run: cannot start %s for the %s share\n",
				v->virtiofsd, v->share[i].tag);
			show_tail(v->share[i].log, "virtiofsd");
			_exit(VM_FAILED);
		}
	qpid = spawn_qemu(qargv, p[1], v->qemu_log);
	close(p[1]);
	for (i = 0; i < v->nshare; i++)
		close(v->share[i].lfd);
	if (v->uns.ws_fd >= 0)          /* the virtiofsd attached its copy */
		close(v->uns.ws_fd);
	if (qpid < 0)
		_exit(VM_FAILED);
	/* For cleanup(): QEMU is our child, not the run's. */
	ad_fmt(buf, sizeof(buf), "%d %llu\n", (int)qpid, ad_proc_starttime(qpid));
	ad_file_write(v->pid_file, buf, strlen(buf), 0644);
	/* Signals wait in the signalfd meanwhile (bounded by the timeout). */
	if (fcvm && fc_boot(v, fcvm, qpid) < 0)
		_exit(VM_FAILED);
	for (;;) {
		struct pollfd pf[2] = { { p[0], POLLIN, 0 }, { sfd, POLLIN, 0 } };
		int r = poll(pf, 2, 100);
		ssize_t n;

		if (r < 0 && errno != EINTR)
			break;
		/* After the exit marker the guest has synced and unmounted: if
		 * its reboot does not end QEMU within 3 s, we do. */
		if (c.have_status && ++after_exit == 30)
			kill(qpid, SIGKILL);
		if (r == 0) {
			con_idle(&c);
			if (!c.started && --boot_timeout == 0) {
				fprintf(stderr, "sandgate run: the microVM did not boot in %d s\n",
					VM_BOOT_TIMEOUT_S);
				kill(qpid, SIGKILL);
			}
			continue;
		}
		if (pf[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				got_sig = got_sig ? got_sig : (int)si.ssi_signo;
				/* QEMU ends the guest on SIGTERM; a second signal kills. */
				kill(qpid, got_sig == (int)si.ssi_signo ? SIGTERM : SIGKILL);
			}
		}
		if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			n = read(p[0], buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			con_feed(&c, buf, (size_t)n);
		}
	}
	if (c.running)
		con_forward(&c, 0);
	while (waitpid(qpid, &st, 0) < 0 && errno == EINTR)
		;
	if (c.have_status && c.status >= 0 && c.status <= 255 && (c.status != VM_FAILED || c.started))
		_exit(c.status);
	if (c.have_status) {
		fprintf(stderr, "sandgate run: the microVM could not start CMD\n");
		show_tail(v->console_log, "guest console");
	} else if (got_sig) {
		_exit(128 + got_sig);
	} else {
		fprintf(stderr, "sandgate run: the microVM ended without reporting CMD's status "
			"(%s %s %d)\n", v->fc ? "firecracker" : "QEMU",
			WIFEXITED(st) ? "exit" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		if (v->fc)
			show_tail(v->fc_log, "firecracker log");
		show_tail(v->qemu_log, v->fc ? "firecracker stderr" : "QEMU");
		for (i = 0; i < v->nshare; i++)
			show_tail(v->share[i].log, "virtiofsd");
		show_tail(v->console_log, "guest console");
	}
	_exit(VM_FAILED);
}

/* ------------------------------------------------------------- start */

/* The run's virtio-fs shares: paths, owners, listening sockets. */
static int vm_share_add(const struct ad_spec *sp, struct vm_run *v, const char *tag,
			const char *src, int read_only, uid_t uid, gid_t gid)
{
	struct vm_share *sh = &v->share[v->nshare];

	sh->tag = tag;
	sh->read_only = read_only;
	sh->uid = uid;
	sh->gid = gid;
	if (ad_fmt(sh->src, sizeof(sh->src), "%s", src) < 0 ||
	    ad_fmt(sh->sock, sizeof(sh->sock), "%s/vfs-%s.sock", sp->state_dir, tag) < 0 ||
	    ad_fmt(sh->log, sizeof(sh->log), "%s/virtiofsd-%s.log", sp->state_dir, tag) < 0 ||
	    ad_fmt(sh->pid_file, sizeof(sh->pid_file), "%s/virtiofsd-%s.pid", sp->state_dir,
		   tag) < 0 ||
	    ad_fmt(sh->mnt, sizeof(sh->mnt), "%s/vfs-%s", sp->state_dir, tag) < 0 ||
	    ad_fmt(sh->chardev, sizeof(sh->chardev), "socket,id=fs%d,path=%s", v->nshare,
		   sh->sock) < 0 ||
	    ad_fmt(sh->device, sizeof(sh->device), "vhost-user-fs-device,chardev=fs%d,tag=%s",
		   v->nshare, tag) < 0)
		return SG_EINVAL;
	if (mkdir(sh->mnt, 0755) < 0 && errno != EEXIST)
		return SG_EIO;
	sh->lfd = vfs_listen(sh);
	if (sh->lfd < 0) {
		fprintf(stderr, "sandgate run: cannot listen on %s: %s\n", sh->sock, strerror(errno));
		return SG_EIO;
	}
	v->nshare++;
	return 0;
}

static int vm_shares(const struct ad_spec *sp, struct vm_run *v)
{
	struct stat st;

	if (v->ws_fs) {
		/* Guest root writes as the workspace's owner (as in the
		 * container backend): nothing it creates is another user's. */
		if (stat(sp->workspace, &st) < 0 || !S_ISDIR(st.st_mode)) {
			fprintf(stderr, "sandgate run: --workspace %s: not a directory\n",
				sp->workspace);
			return SG_EINVAL;
		}
		/* As in the container backends (ad_idmap.c): guest root is
		 * the run's own unprivileged uid, and the workspace an idmapped
		 * mount where that uid is the owner: what the VM writes lands
		 * as the owner. Fallbacks: root inside = the owner, or (a
		 * root-owned workspace that cannot be idmapped) root. */
		ad_userns_plan(sp, &v->uns);
		if (vm_share_add(sp, v, "ws", sp->workspace, 0,
				 v->uns.on ? v->uns.uid : st.st_uid,
				 v->uns.on ? v->uns.gid : st.st_gid) < 0)
			return SG_EIO;
		if (v->uns.ws_fd >= 0)
			v->share[v->nshare - 1].idmap = &v->uns;
	}
	if (v->usr_fs && vm_share_add(sp, v, "usr", "/usr", 1, VM_NOBODY, VM_NOBODY) < 0)
		return SG_EIO;
	return 0;
}

/* Drive Firecracker? When it is on PATH, KVM is usable (Firecracker has
 * no emulator) or the test hook SANDGATE_FC_FORCE=1 is set, and a
 * --workspace can become its disk (no virtio-fs in Firecracker). fc gets
 * the binary's path; quiet: no notices (vm_available asks too). */
static int fc_choose(const struct ad_spec *sp, char *fc, size_t fcsz, int quiet)
{
	const char *force = getenv("SANDGATE_FC_FORCE");
	char why[160], path[512];
	int kvm;

	if (ad_which("firecracker", fc, fcsz) < 0)
		return 0;
	kvm = kvm_usable(why, sizeof(why));
	if (!kvm && !(force && !strcmp(force, "1"))) {
		if (!quiet)
			fprintf(stderr, "sandgate run: notice: %s found, but Firecracker needs KVM "
				"(%s): using QEMU\n", fc, why);
		return 0;
	}
	if (sp->workspace && ad_which("mke2fs", path, sizeof(path)) < 0) {
		if (!quiet)
			fprintf(stderr, "sandgate run: notice: %s found, but its --workspace disk "
				"needs mke2fs (Debian package e2fsprogs): using QEMU\n", fc);
		return 0;
	}
	if (!kvm && !quiet)
		fprintf(stderr, "sandgate run: notice: SANDGATE_FC_FORCE=1 (a test hook): driving "
			"%s without KVM (%s)\n", fc, why);
	return 1;
}

/* The ELF vmlinux Firecracker loads, cached next to the vmlinuz. */
static int fc_kernel(struct vm_run *v, int verbose)
{
	char err[768];

	if (ad_fmt(v->vmlinux, sizeof(v->vmlinux), "%s/vmlinux", v->kernel.dir) < 0)
		return SG_EINVAL;
	if (ad_fc_vmlinux(v->kernel.vmlinuz, v->vmlinux, err, sizeof(err)) < 0) {
		fprintf(stderr, "sandgate run: firecracker: %s\n", err);
		return SG_EIO;
	}
	if (verbose)
		fprintf(stderr, "sandgate run: firecracker kernel %s\n", v->vmlinux);
	return 0;
}

/* `firecracker --api-sock ...`: configured by the filter (fc_boot) once
 * spawned. Its log goes to a file, never to stdout: stdout is the guest's
 * console, forwarded to CMD's stdout. */
static int fc_argv(struct vm_run *v, const char *qargv[])
{
	int q = 0, fd;

	/* Firecracker refuses to start on an existing socket path; its
	 * --log-path must exist on older releases. */
	unlink(v->fc_sock);
	fd = open(v->fc_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "sandgate run: cannot create %s: %s\n", v->fc_log, strerror(errno));
		return SG_EIO;
	}
	close(fd);
	qargv[q++] = v->fc_bin;
	qargv[q++] = "--api-sock";
	qargv[q++] = v->fc_sock;
	qargv[q++] = "--id";
	qargv[q++] = v->fc_id;
	qargv[q++] = "--log-path";
	qargv[q++] = v->fc_log;
	qargv[q++] = "--level";
	qargv[q++] = "Warning";
	qargv[q] = NULL;
	return 0;
}

static int vm_start(struct ad_sbx *s)
{
	static struct vm_run v;
	const struct ad_spec *sp = s->spec;
	char base[512], fc[512], append[256], netdev[96], drive[192], accel_why[160];
	const char *qargv[48];
	struct ad_fc_vm fcvm;
	unsigned char rnd[16];
	int i, q = 0, kvm;
	long khz;

	memset(&v, 0, sizeof(v));
	v.uns.ws_fd = -1;
	v.fc = fc_choose(sp, v.fc_bin, sizeof(v.fc_bin), 0);
	if (!v.fc && sp->verbose && ad_which("firecracker", fc, sizeof(fc)) < 0)
		fprintf(stderr, "sandgate run: firecracker not found, using QEMU\n");
	if (!v.fc && ad_which("qemu-system-x86_64", v.qemu, sizeof(v.qemu)) < 0)
		return SG_EINVAL;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return SG_EIO;
	for (i = 0; i < 16; i++)
		ad_fmt(v.nonce + 2 * i, 3, "%02x", rnd[i]);
	ad_fmt(v.start_marker, sizeof(v.start_marker), "SANDGATE-START-%s", v.nonce);
	ad_fmt(v.exit_marker, sizeof(v.exit_marker), "SANDGATE-EXIT-%s", v.nonce);
	if (ad_fmt(v.initrd, sizeof(v.initrd), "%s/initrd.cpio", sp->state_dir) < 0 ||
	    ad_fmt(v.disk, sizeof(v.disk), "%s/workspace.img", sp->state_dir) < 0 ||
	    ad_fmt(v.console_log, sizeof(v.console_log), "%s/console.log", sp->state_dir) < 0 ||
	    ad_fmt(v.qemu_log, sizeof(v.qemu_log), "%s/%s", sp->state_dir,
		   v.fc ? "firecracker.stderr" : "qemu.log") < 0 ||
	    ad_fmt(v.pid_file, sizeof(v.pid_file), "%s/qemu.pid", sp->state_dir) < 0 ||
	    ad_fmt(v.fc_sock, sizeof(v.fc_sock), "%s/fc.sock", sp->state_dir) < 0 ||
	    ad_fmt(v.fc_log, sizeof(v.fc_log), "%s/firecracker.log", sp->state_dir) < 0 ||
	    ad_fmt(v.fc_id, sizeof(v.fc_id), "sandgate-%s", sp->net->id) < 0)
		return SG_EINVAL;

	if (v.fc) {
		fprintf(stderr, "sandgate run: notice: driving %s: no virtio-fs there, so CMD has "
			"busybox only%s\n", v.fc_bin, sp->workspace ?
			", and the workspace is a copy whose changes are not written back" : "");
	} else if (virtiofsd_find(v.virtiofsd, sizeof(v.virtiofsd)) == 0) {
		v.ws_fs = sp->workspace != NULL;
		v.usr_fs = host_usr_shareable();
		if (!v.usr_fs)
			fprintf(stderr, "sandgate run: notice: this host's /usr cannot serve the "
				"guest (not merged-/usr): CMD has busybox only\n");
	} else {
		fprintf(stderr, "sandgate run: notice: no virtiofsd (Debian package "
			"qemu-system-common; SANDGATE_VIRTIOFSD): CMD has busybox only%s\n",
			sp->workspace ?
			", and the workspace is a copy whose changes are not written back" : "");
	}
	if (vm_shares(sp, &v) < 0)
		return SG_EIO;
	if (ad_vm_kernel_get(&v.kernel, sp->verbose) < 0 ||
	    ad_vm_initramfs_base(&v.kernel, VM_BUSYBOX, base, sizeof(base), sp->verbose) < 0 ||
	    write_initrd(s, &v, base) < 0)
		return SG_EIO;
	if (sp->workspace && !v.ws_fs && ad_vm_workspace_image(sp->workspace, v.disk) < 0)
		return SG_EIO;
	if (v.fc && fc_kernel(&v, sp->verbose) < 0)
		return SG_EIO;

	/* The same boot arguments for Firecracker: with the test hook and
	 * no KVM its guest runs under TCG too. */
	kvm = kvm_usable(accel_why, sizeof(accel_why));
	khz = tsc_khz();
	if (!kvm && !v.fc)
		fprintf(stderr, "sandgate run: notice: no KVM here (%s): the microVM runs under "
			"TCG emulation, slower\n", accel_why);
	if (kvm)
		ad_fmt(append, sizeof(append), "console=ttyS0 quiet loglevel=1 panic=-1");
	else if (khz > 0)
		ad_fmt(append, sizeof(append), "console=ttyS0 quiet loglevel=1 panic=-1 "
		       "tsc_early_khz=%ld tsc=reliable", khz);
	else {
		fprintf(stderr, "sandgate run: warning: the host's TSC frequency is unknown; TCG "
			"boots may hang calibrating it\n");
		ad_fmt(append, sizeof(append), "console=ttyS0 quiet loglevel=1 panic=-1");
	}
	ad_fmt(netdev, sizeof(netdev), "tap,id=n0,ifname=%s,script=no,downscript=no",
	       sp->net->ifname);
	ad_fmt(drive, sizeof(drive), "file=%s,if=none,format=raw,id=ws,cache=unsafe", v.disk);
	fcvm = (struct ad_fc_vm){
		.kernel = v.vmlinux,
		.initrd = v.initrd,
		.boot_args = append,
		.tap = sp->net->ifname,
		.drive = sp->workspace ? v.disk : NULL,
		.vcpus = 1,
		.mem_mib = atoi(VM_MEM_MB),
	};
	if (v.fc) {
		if (fc_argv(&v, qargv) < 0)
			return SG_EIO;
		if (sp->verbose)
			fprintf(stderr, "sandgate run: firecracker: %s, api %s, kernel %s, "
				"initrd %s%s%s\n", kvm ? "kvm" : "no kvm", v.fc_sock, v.vmlinux, v.initrd,
				sp->workspace ? ", workspace disk " : "", sp->workspace ? v.disk : "");
		goto spawn;
	}

	qargv[q++] = v.qemu;
	qargv[q++] = "-M";
	qargv[q++] = v.nshare ? "microvm,memory-backend=mem" : "microvm";
	if (v.nshare) {
		/* vhost-user: virtiofsd maps the guest's memory. */
		qargv[q++] = "-object";
		qargv[q++] = "memory-backend-memfd,id=mem,size=" VM_MEM_MB "M,share=on";
		/* libvhost-user refuses legacy virtio; microvm's MMIO
		 * transport is legacy unless told otherwise. */
		qargv[q++] = "-global";
		qargv[q++] = "virtio-mmio.force-legacy=false";
	}
	qargv[q++] = "-accel";
	qargv[q++] = kvm ? "kvm" : "tcg";
	qargv[q++] = "-cpu";
	qargv[q++] = kvm ? "host" : "qemu64";
	qargv[q++] = "-m";
	qargv[q++] = VM_MEM_MB;
	qargv[q++] = "-smp";
	qargv[q++] = "1";
	qargv[q++] = "-nodefaults";
	qargv[q++] = "-no-user-config";
	qargv[q++] = "-nographic";
	qargv[q++] = "-serial";
	qargv[q++] = "stdio";
	qargv[q++] = "-no-reboot";
	qargv[q++] = "-kernel";
	qargv[q++] = v.kernel.vmlinuz;
	qargv[q++] = "-initrd";
	qargv[q++] = v.initrd;
	qargv[q++] = "-append";
	qargv[q++] = append;
	qargv[q++] = "-netdev";
	qargv[q++] = netdev;
	qargv[q++] = "-device";
	qargv[q++] = "virtio-net-device,netdev=n0";
	for (i = 0; i < v.nshare; i++) {
		qargv[q++] = "-chardev";
		qargv[q++] = v.share[i].chardev;
		qargv[q++] = "-device";
		qargv[q++] = v.share[i].device;
	}
	if (sp->workspace && !v.ws_fs) {
		qargv[q++] = "-drive";
		qargv[q++] = drive;
		qargv[q++] = "-device";
		qargv[q++] = "virtio-blk-device,drive=ws";
	}
	qargv[q] = NULL;
	if (sp->verbose)
		fprintf(stderr, "sandgate run: qemu: accel %s, kernel %s, initrd %s%s%s%s\n",
			kvm ? "kvm" : "tcg", v.kernel.vmlinuz, v.initrd,
			v.ws_fs ? ", workspace on virtio-fs" : "",
			sp->workspace && !v.ws_fs ? ", workspace disk " : "",
			sp->workspace && !v.ws_fs ? v.disk : "");

spawn:
	s->pid = fork();
	if (s->pid < 0)
		return SG_EIO;
	if (s->pid == 0) {
		pid_t parent = getppid();

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(VM_FAILED);
		/* Own process group: a terminal's ^C reaches the run, which
		 * forwards it here once, rather than QEMU directly. */
		setpgid(0, 0);
		filter_main(&v, qargv, v.fc ? &fcvm : NULL, sp->verbose);
	}
	for (i = 0; i < v.nshare; i++)   /* the filter's now */
		close(v.share[i].lfd);
	ad_userns_release(&v.uns);
	return 0;
}

/* End the process named by a "PID STARTTIME" file (never a reused PID):
 * SIGTERM, then SIGKILL after a second, waiting up to 3 s. */
static void reap_pid_file(const char *path, const char *what)
{
	char buf[64];
	unsigned long long st = 0;
	int pid = 0, i;

	if (ad_file_read(path, buf, sizeof(buf)) <= 0 || sscanf(buf, "%d %llu", &pid, &st) != 2 ||
	    pid <= 0 || !st)
		return;
	for (i = 0; i < 300 && ad_proc_starttime(pid) == st; i++) {
		if (i == 0 || i == 100)
			kill(pid, i ? SIGKILL : SIGTERM);
		usleep(10000);
	}
	if (ad_proc_starttime(pid) == st) {
		kill(pid, SIGKILL);
		fprintf(stderr, "sandgate run: warning: %s (pid %d) is slow to exit\n", what, pid);
	}
}

/* QEMU and virtiofsd are the filter's children: after a SIGKILLed filter
 * they die through PDEATHSIG, but asynchronously; the tap, the disk and
 * the shared directories must be free before teardown, so wait here. */
static void vm_cleanup(struct ad_sbx *s)
{
	static const char *const files[] = {
		"qemu.pid", "virtiofsd-ws.pid", "virtiofsd-usr.pid", NULL
	};
	char path[128];
	int i;

	for (i = 0; files[i]; i++)
		if (ad_fmt(path, sizeof(path), "%s/%s", s->spec->state_dir, files[i]) == 0)
			reap_pid_file(path, i ? "virtiofsd" : "the VMM (QEMU or firecracker)");
}

const struct ad_backend ad_backend_microvm = {
	.name = "microvm",
	.link = AD_LINK_TAP,
	.available = vm_available,
	.start = vm_start,
	.cleanup = vm_cleanup,
};
