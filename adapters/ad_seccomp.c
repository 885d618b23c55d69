/*
 * ad_seccomp.c - the seccomp rules of the sandboxes, in one table that
 * every backend consumes: sandgate's own namespaces load it with
 * libseccomp, runc/crun/runsc get it as the OCI bundle's linux.seccomp
 * (ad_oci.c), and the microVM's workspace virtiofsd loads the no-setid
 * part before it execs (ad_microvm.c). One table, so the paths cannot
 * drift apart.
 *
 * Default action: allow. Every rule answers with an errno; a rule's
 * argument tests are ANDed, each a SCMP_CMP_MASKED_EQ ((arg & mask) ==
 * value), the one comparison that both libseccomp and the OCI runtimes'
 * JSON express the same way.
 *
 * No setuid/setgid files (AD_SCMP_NOSETID). Root inside owns the
 * workspace through its idmapped mount, so a mode it sets there is the
 * mode the host sees on a file of the workspace's owner, root's
 * included. The mount is nosuid in the sandbox, not on the host. So no
 * call that sets or creates a mode with S_ISUID or S_ISGID passes:
 * chmod, fchmod, fchmodat, fchmodat2; open, openat, creat with O_CREAT or
 * O_TMPFILE; mknod, mknodat. openat2 takes its mode in a struct seccomp
 * cannot read: ENOSYS, and libc falls back to openat. io_uring (its
 * IORING_OP_OPENAT carries a mode too) is in the sandbox set, and in
 * this one for the virtiofsd. seccomp cannot tell a directory from a
 * file: chmod g+s on a directory is refused as well (fail closed); mkdir
 * needs no rule, the kernel keeps only the permission and sticky bits of
 * its mode (a directory gets S_ISGID only by inheriting it).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <termios.h>

#include "sg.h"
#include "sg_sbuf.h"
#include "adapters/ad.h"
#include "sg_poison.h"

/* fchmodat2 (Linux 6.6) by number where libseccomp does not know it. */
#if !defined(__NR_fchmodat2) && defined(__x86_64__)
#define __NR_fchmodat2 452
#endif

struct scmp_arg {
	unsigned idx;
	uint64_t mask, val;
};

struct scmp_rule {
	unsigned sets;                    /* AD_SCMP_* it belongs to */
	const char *name;
	int err;
	unsigned nargs;
	struct scmp_arg arg[2];
	const char *why;                  /* OCI "comment", or NULL */
};

#define SETID (S_ISUID | S_ISGID)
/* One rule per bit: MASKED_EQ tests "all of mask", and either bit alone
 * is the danger. */
#define MODE_RULES(sys, idx)                                                            \
	{ AD_SCMP_NOSETID, sys, EPERM, 1, { { idx, S_ISUID, S_ISUID } }, "setuid" },       \
	{ AD_SCMP_NOSETID, sys, EPERM, 1, { { idx, S_ISGID, S_ISGID } }, "setgid" }
/* The mode counts only with O_CREAT or O_TMPFILE: without them it is
 * whatever the caller's register held. O_TMPFILE is two bits (with
 * O_DIRECTORY); the kernel refuses one without the other. */
#define OPEN_RULES(sys, fl, md)                                                         \
	{ AD_SCMP_NOSETID, sys, EPERM, 2, { { fl, O_CREAT, O_CREAT }, { md, S_ISUID, S_ISUID } }, \
	  "O_CREAT setuid" },                                                              \
	{ AD_SCMP_NOSETID, sys, EPERM, 2, { { fl, O_CREAT, O_CREAT }, { md, S_ISGID, S_ISGID } }, \
	  "O_CREAT setgid" },                                                              \
	{ AD_SCMP_NOSETID, sys, EPERM, 2,                                                  \
	  { { fl, O_TMPFILE, O_TMPFILE }, { md, S_ISUID, S_ISUID } }, "O_TMPFILE setuid" }, \
	{ AD_SCMP_NOSETID, sys, EPERM, 2,                                                  \
	  { { fl, O_TMPFILE, O_TMPFILE }, { md, S_ISGID, S_ISGID } }, "O_TMPFILE setgid" }
#define CLONE_NS_RULE(flag, name)                                                       \
	{ AD_SCMP_SANDBOX, "clone", EPERM, 1, { { 0, flag, flag } }, name }
#define TIOC_RULE(req, name)                                                            \
	{ AD_SCMP_SANDBOX, "ioctl", EPERM, 1, { { 1, 0xffffffffu, req } }, name }

static const struct scmp_rule rules[] = {
	MODE_RULES("chmod", 1),
	MODE_RULES("fchmod", 1),
	MODE_RULES("fchmodat", 2),
	MODE_RULES("fchmodat2", 2),
	MODE_RULES("mknod", 1),
	MODE_RULES("mknodat", 2),
	MODE_RULES("creat", 1),
	OPEN_RULES("open", 1, 2),
	OPEN_RULES("openat", 2, 3),
	{ AD_SCMP_NOSETID, "openat2", ENOSYS, 0, { { 0, 0, 0 } }, "mode in memory" },
	{ AD_SCMP_NOSETID | AD_SCMP_SANDBOX, "io_uring_setup", EPERM, 0, { { 0, 0, 0 } }, NULL },
	{ AD_SCMP_NOSETID | AD_SCMP_SANDBOX, "io_uring_enter", EPERM, 0, { { 0, 0, 0 } }, NULL },
	{ AD_SCMP_NOSETID | AD_SCMP_SANDBOX, "io_uring_register", EPERM, 0, { { 0, 0, 0 } }, NULL },
	/* clone() with any namespace flag; clone3() passes its flags in
	 * memory seccomp cannot read, so it reports ENOSYS and libc falls
	 * back to clone(). */
	CLONE_NS_RULE(CLONE_NEWNS, "CLONE_NEWNS"),
	CLONE_NS_RULE(CLONE_NEWUTS, "CLONE_NEWUTS"),
	CLONE_NS_RULE(CLONE_NEWIPC, "CLONE_NEWIPC"),
	CLONE_NS_RULE(CLONE_NEWUSER, "CLONE_NEWUSER"),
	CLONE_NS_RULE(CLONE_NEWPID, "CLONE_NEWPID"),
	CLONE_NS_RULE(CLONE_NEWNET, "CLONE_NEWNET"),
	CLONE_NS_RULE(CLONE_NEWCGROUP, "CLONE_NEWCGROUP"),
	{ AD_SCMP_SANDBOX, "clone3", ENOSYS, 0, { { 0, 0, 0 } }, "flags in memory" },
	/* TIOCSTI would push keystrokes into the terminal the sandbox shares
	 * with the host shell that started it. */
	TIOC_RULE(TIOCSTI, "TIOCSTI"),
	TIOC_RULE(TIOCLINUX, "TIOCLINUX"),
};

/* Answered with EPERM whatever the arguments (AD_SCMP_SANDBOX). */
static const char *const deny[] = {
	/* namespaces and mounts: the sandbox's view of the world is fixed */
	"unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
	"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	/* kernel attack surface and other processes */
	"keyctl", "add_key", "request_key", "bpf", "ptrace", "process_vm_readv",
	"process_vm_writev", "perf_event_open", "userfaultfd", "open_by_handle_at",
	"name_to_handle_at", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
	"lookup_dcookie", "vhangup", "nfsservctl", "uselib", "personality",
	NULL
};

/* The native number of name, or __NR_SCMP_ERROR: unknown to this
 * libseccomp and to the kernel headers we were built with. */
static int scmp_nr(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

#ifdef __NR_fchmodat2
	if (nr == __NR_SCMP_ERROR && !strcmp(name, "fchmodat2"))
		nr = __NR_fchmodat2;
#endif
	return nr;
}

/* Linux >= major.minor (uname's release). */
static int kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return 1;       /* unknown: assume it has everything */
	return ma > major || (ma == major && mi >= minor);
}

int ad_seccomp_oci_check(char *why, size_t whysz)
{
	/* runc and crun resolve the OCI rules' names with this same system
	 * libseccomp and skip the names it does not know; the in-process
	 * filter falls back to the number, they cannot. */
	if (seccomp_syscall_resolve_name("fchmodat2") == __NR_SCMP_ERROR &&
	    kernel_at_least(6, 6)) {
		ad_fmt(why, whysz, "this host's libseccomp does not know fchmodat2 (Linux 6.6 "
		       "has it), so the runtime would let a setuid chmod through; update "
		       "libseccomp (2.5.5+), or use the default backend");
		return SG_EINVAL;
	}
	return 0;
}

int ad_seccomp_add(void *ctx, unsigned sets)
{
	struct scmp_arg_cmp cmp[2];
	size_t i;
	unsigned k;
	int nr;

	if (sets & AD_SCMP_SANDBOX)
		for (i = 0; deny[i]; i++) {
			/* A name this libseccomp does not know is one this
			 * kernel's ABI predates or never had here (nfsservctl):
			 * nothing to deny. */
			nr = scmp_nr(deny[i]);
			if (nr != __NR_SCMP_ERROR &&
			    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0)
				return SG_EIO;
		}
	for (i = 0; i < SG_ARRAY_LEN(rules); i++) {
		const struct scmp_rule *r = &rules[i];

		if (!(r->sets & sets))
			continue;
		nr = scmp_nr(r->name);
		if (nr == __NR_SCMP_ERROR) {
			/* The setid rules must all be in place: a mode call we
			 * cannot name is one we cannot filter. */
			if (r->sets & AD_SCMP_NOSETID) {
				fprintf(stderr, "sandgate run: seccomp: %s unknown to libseccomp\n",
					r->name);
				return SG_EIO;
			}
			continue;
		}
		for (k = 0; k < r->nargs; k++)
			cmp[k] = (struct scmp_arg_cmp){ .arg = r->arg[k].idx, .op = SCMP_CMP_MASKED_EQ,
							.datum_a = r->arg[k].mask,
							.datum_b = r->arg[k].val };
		if (seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(r->err), nr, r->nargs, cmp) < 0)
			return SG_EIO;
	}
	return 0;
}

int ad_seccomp_load(unsigned sets)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc = SG_EIO;

	if (!ctx)
		return SG_EIO;
	/* libseccomp sets no_new_privs before loading (SCMP_FLTATR_CTL_NNP,
	 * on by default): the filter outlives exec and cannot be shed by a
	 * setuid binary. Other architectures' calls (int 0x80) are killed
	 * (the default bad-arch action): their numbers are not filtered. */
	if (ad_seccomp_add(ctx, sets) == 0 && seccomp_load(ctx) == 0)
		rc = 0;
	seccomp_release(ctx);
	return rc;
}

void ad_seccomp_oci_json(struct sg_sbuf *b, unsigned sets)
{
	const char *sep = "\n      ";
	size_t i;
	unsigned k;

	if (sets & AD_SCMP_SANDBOX) {
		sg_sbuf_puts(b, "\n      {\"names\": [");
		for (i = 0; deny[i]; i++) {
			if (i)
				sg_sbuf_puts(b, ",");
			sg_sbuf_json_str(b, deny[i]);
		}
		sg_sbuf_printf(b, "], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": %d}", EPERM);
		sep = ",\n      ";
	}
	for (i = 0; i < SG_ARRAY_LEN(rules); i++) {
		const struct scmp_rule *r = &rules[i];

		if (!(r->sets & sets))
			continue;
		sg_sbuf_printf(b, "%s{\"names\": [\"%s\"], \"action\": \"SCMP_ACT_ERRNO\", "
			       "\"errnoRet\": %d", sep, r->name, r->err);
		sep = ",\n      ";
		if (r->why)
			sg_sbuf_printf(b, ", \"comment\": \"%s\"", r->why);
		if (!r->nargs) {
			sg_sbuf_puts(b, "}");
			continue;
		}
		/* runc ANDs the args of one entry when their indexes differ
		 * (they do here); crun always does. */
		sg_sbuf_puts(b, ", \"args\": [");
		for (k = 0; k < r->nargs; k++)
			sg_sbuf_printf(b, "%s{\"index\": %u, \"value\": %llu, \"valueTwo\": %llu, "
				       "\"op\": \"SCMP_CMP_MASKED_EQ\"}", k ? ", " : "", r->arg[k].idx,
				       (unsigned long long)r->arg[k].mask,
				       (unsigned long long)r->arg[k].val);
		sg_sbuf_puts(b, "]}");
	}
}
