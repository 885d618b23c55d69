/*
 * ad.h - adapters: attach sandgate to sandbox backends (DESIGN.md "Adapters").
 *
 * Contract, shared by every file in adapters/:
 *  - The CLI (`sandgate run`, `sandgate-cni`) may block: nothing here runs on
 *    an event loop. Functions return 0 or a negative SG_* code and print one
 *    line saying why on stderr ("sandgate run: ...") before returning < 0.
 *  - Every kernel object a run creates is named from its id (8 hex digits:
 *    the owner's PID in 6, 2 random): namespace and host interface "sgr<id>",
 *    nft table "inet sandgate_<id>", cgroups and OCI container ids
 *    "sandgate-<id>", state under /run/sandgate/run/<id>/ (owner PID +
 *    start time; the runtimes' state in <runtime>-root/ there). The startup
 *    sweep removes only objects of that shape whose owner is gone.
 *  - Nothing here changes the host's ip_forward or any global sysctl.
 */
#ifndef AD_H
#define AD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sg_sbuf;

#define AD_STATE_ROOT "/run/sandgate/run"
#define AD_CACHE_DIR  "/var/cache/sandgate"

/* ------------------------------------------------------------ ad_util.c */

/* Run argv (PATH lookup), stdin from `in` (may be NULL), stdout+stderr
 * into out (NUL-terminated, truncated; out may be NULL: discarded).
 * Returns the exit status (0-255, 128+signal), or SG_EIO if it could not
 * be started. */
int ad_cmd(const char *const argv[], const char *in, size_t inlen, char *out, size_t outsz);
/* Write a whole file (O_TRUNC, mode) / read one into buf (NUL-terminated).
 * ad_file_read returns the length or a negative code. */
int ad_file_write(const char *path, const char *data, size_t len, int mode);
ssize_t ad_file_read(const char *path, char *buf, size_t bufsz);
/* One write() of v to an existing kernel file (proc, cgroupfs): no
 * O_CREAT, O_TRUNC or chmod, which such files refuse. 0 or SG_EIO, errno
 * kept. */
int ad_proc_write(const char *path, const char *v);
int ad_mkdir_p(const char *path, int mode);
/* Remove a directory tree (no symlink following; stops at mount points). */
void ad_rm_rf(const char *path);
/* Process start time (clock ticks since boot, /proc/PID/stat field 22);
 * 0 if the process does not exist. Together with the PID it names one
 * process for ever, PID reuse included. */
unsigned long long ad_proc_starttime(pid_t pid);
/* Path of the running binary (/proc/self/exe resolved). */
int ad_self_exe(char *out, size_t outsz);
/* snprintf that reports truncation as SG_EINVAL. */
int ad_fmt(char *out, size_t outsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Is cmd on PATH (or an absolute executable path)? Fills out with the path. */
int ad_which(const char *cmd, char *out, size_t outsz);
/* Restore the default signal dispositions and an empty mask: call in a
 * child between fork and exec (the CLI blocks signals for its signalfd). */
void ad_child_signals_reset(void);

/* ------------------------------------------------------------- ad_net.c */

enum ad_link_kind { AD_LINK_VETH, AD_LINK_TAP };

struct ad_net {
	char id[9];               /* 8 hex digits */
	char state_dir[64];       /* AD_STATE_ROOT/<id> */
	char ns[16];              /* "sgr<id>"; empty for a tap (no namespace) */
	char ifname[16];          /* host side: "sgr<id>" */
	char table[32];           /* "sandgate_<id>" (inet family) */
	enum ad_link_kind kind;
	unsigned idx;             /* index of the /30 and /64 in the pool */
	char host4[16], sbx4[16]; /* host side .1, sandbox side .2 of the /30 */
	char host6[48], sbx6[48]; /* ::1 and ::2 of the /64 */
	int tp_port, dns_port;    /* dns_port 0: DNS dropped (no DNS listener) */
	unsigned made;            /* AD_MADE_* bits: what teardown must undo */
};

#define AD_MADE_STATE 0x01
#define AD_MADE_NS    0x02
#define AD_MADE_LINK  0x04
#define AD_MADE_NFT   0x08

/* Remove stale objects of crashed runs (see the naming contract above). */
void ad_net_sweep(int verbose);
/* Allocate an id and a subnet, write the state dir (owner = this process). */
int ad_net_alloc(struct ad_net *n, enum ad_link_kind kind);
/* Create the namespace + veth (configured on both sides), or the tap. */
int ad_net_create(struct ad_net *n);
/* Load the nft table: TCP -> tp_port, DNS -> dns_port (or dropped), rest dropped. */
int ad_net_redirect(struct ad_net *n);
/* The nft ruleset text. sel: nft selectors for the sandbox's packets
 * ("iifname \"sgrX\"", "ip saddr 10.1.2.3"), each gets every rule (the
 * CNI plugin matches addresses behind a bridge). */
int ad_nft_ruleset(char *out, size_t outsz, const char *table, const char *const sel[],
		   int nsel, int tp_port, int dns_port);
/* Undo whatever `made` says exists; safe to call twice. */
void ad_net_teardown(struct ad_net *n);

/* -------------------------------------------------------------- ad_gw.c */

struct ad_gw {
	pid_t pid;                /* the `serve` this run started, or 0 (attached) */
	char admin[108];          /* unix socket path of the control API */
	char config[256];         /* the config the gateway runs (private copy) */
	char log[256];            /* its stderr */
	int tp_port, dns_port;    /* dns_port 0: no DNS listener */
	char ca_cert[512];        /* gateway.tls.ca.cert, or "" */
};

/* Start `sandgate serve` on a private copy of user_config (NULL: deny-all
 * defaults) with an admin socket and free ports for the transparent and
 * DNS listeners; waits until /healthz answers. The child gets PDEATHSIG. */
int ad_gw_start(struct ad_gw *g, const char *user_config, const char *state_dir, int verbose);
/* Use a running gateway: admin "unix:PATH"; ports from user_config. */
int ad_gw_attach(struct ad_gw *g, const char *admin, const char *user_config);
int ad_gw_register(struct ad_gw *g, const char *name, const char *const addrs[], int naddrs,
		   const char *backend);
int ad_gw_unregister(struct ad_gw *g, const char *name);
/* Attached: may this run register name? Not when another live sandbox
 * holds it (the registration would replace theirs, our teardown delete
 * it); an entry left by a dead `sandgate run` may be replaced. 0 or < 0
 * (said why). */
int ad_gw_claim(struct ad_gw *g, const char *name);
/* SIGTERM, wait up to 3 s, then SIGKILL. No-op when attached. */
void ad_gw_stop(struct ad_gw *g);
/* Watch for the gateway stopping sandbox name (block_and_kill, or an
 * operator's POST /v1/sandboxes/NAME/stop): a non-blocking connection
 * holding GET /v1/sandboxes/NAME/wait, to poll for POLLIN; -1 on error. */
int ad_gw_watch(struct ad_gw *g, const char *name);
/* Read what the watch has (call on POLLIN): 0 nothing yet, 1 the gateway
 * stopped the sandbox (its reason code in reason; "unregistered" when
 * someone else removed it), -1 the watch ended without an answer (the
 * gateway went away): fd closed either way unless 0 is returned. */
int ad_gw_watch_read(int fd, struct sg_sbuf *acc, char *reason, size_t reasonsz);
int ad_gw_alive(struct ad_gw *g);
/* One HTTP/1.1 request over a unix socket; *status gets the code.
 * resp (may be NULL) gets the body. */
int ad_http_unix(const char *path, const char *method, const char *uri, const char *body,
		 int *status, char *resp, size_t respsz);
/* Write the CA bundle: the system bundle plus ca_cert (may be ""). */
int ad_ca_bundle(const char *out_path, const char *ca_cert);

/* ----------------------------------------------------------- backends */

/* What every backend gets: the sandbox to start and its prepared network. */
struct ad_spec {
	const char *name;                 /* sandbox name (registered) */
	char *const *argv;                /* CMD ARGS..., NULL-terminated */
	char *const *env;                 /* "K=V", allow-listed, NULL-terminated */
	const char *workspace;            /* host dir -> /workspace (rw), or NULL */
	const char *rootfs;               /* host dir as /, or NULL: host's /usr... read-only */
	const char *runtime;              /* "runc" | "crun" | NULL (container backend) */
	const char *state_dir;            /* AD_STATE_ROOT/<id>: bundle, root, files */
	const char *ca_bundle;            /* host path of the bundle to install */
	const char *resolv_conf;          /* host path of the generated resolv.conf */
	const char *hosts;                /* host path of the generated /etc/hosts */
	const struct ad_net *net;         /* borrowed */
	int64_t mem_bytes;                /* 0: no memory limit */
	int pids_max;                     /* 0: no pids limit */
	int verbose;
};

/* A running sandbox is one host process whose exit status is CMD's:
 * the backend arranges that (a reaper, the OCI runtime, a console filter). */
struct ad_sbx {
	const struct ad_spec *spec;       /* borrowed */
	pid_t pid;                        /* that process */
	char cg[2][256];                  /* cgroup dirs created (memory, pids), or "" */
	char id[64];                      /* runtime container id, or "" */
	const struct ad_backend *be;      /* borrowed */
};

struct ad_backend {
	const char *name;
	enum ad_link_kind link;
	/* 0 if usable here, else SG_EINVAL with why filled in ("needs runsc"). */
	int (*available)(const struct ad_spec *s, char *why, size_t whysz);
	/* Start CMD; on success s->pid is set and stdin/out/err are CMD's. */
	int (*start)(struct ad_sbx *s);
	/* After the sandbox process is gone (or was SIGKILLed): remove runtime
	 * state (containers, cgroups). Must be safe after a failed start. */
	void (*cleanup)(struct ad_sbx *s);
};

extern const struct ad_backend ad_backend_container;
extern const struct ad_backend ad_backend_gvisor;
extern const struct ad_backend ad_backend_microvm;

/* ad_container.c helpers shared with ad_oci.c */
int ad_cgroup_create(struct ad_sbx *s, char *notice, size_t noticesz);
int ad_cgroup_attach(struct ad_sbx *s, pid_t pid);
void ad_cgroup_remove(struct ad_sbx *s);

/* ad_seccomp.c: the sandboxes' seccomp rules, one table for every backend.
 * Default allow; each rule answers with an errno (EPERM; ENOSYS where libc
 * falls back: clone3, openat2). Sets:
 *  AD_SCMP_SANDBOX  the container filter: mounts and namespaces, kernel
 *                   attack surface (bpf, ptrace, keyctl, modules, ...),
 *                   clone with a CLONE_NEW* flag, clone3, io_uring,
 *                   ioctl TIOCSTI/TIOCLINUX;
 *  AD_SCMP_NOSETID  no file mode with S_ISUID or S_ISGID, set or created:
 *                   chmod, fchmod, fchmodat(2), mknod(at), creat, open(at)
 *                   with O_CREAT/O_TMPFILE; openat2 (mode unreadable) and
 *                   io_uring refused. Directories included (seccomp cannot
 *                   tell them apart).
 * ad_seccomp_add adds sets to a libseccomp scmp_filter_ctx; ad_seccomp_load
 * loads them into this process (sets no_new_privs; survives exec); both 0
 * or SG_EIO. ad_seccomp_oci_json appends them as OCI linux.seccomp.syscalls
 * entries (no leading or trailing comma). */
#define AD_SCMP_SANDBOX 0x1u
#define AD_SCMP_NOSETID 0x2u
int ad_seccomp_add(void *ctx, unsigned sets);
int ad_seccomp_load(unsigned sets);
void ad_seccomp_oci_json(struct sg_sbuf *b, unsigned sets);
/* Can an OCI runtime apply the rules by name here? SG_EINVAL with why
 * when one it needs is unknown to this libseccomp but in the kernel. */
int ad_seccomp_oci_check(char *why, size_t whysz);

/* ad_idmap.c: the user namespace of the container backends (own
 * namespaces, runc, crun; not runsc) and the idmapped workspace. */

/* Host uid/gid of root inside: AD_ID_BASE + the run's subnet index, in
 * the 1879048192-2147483647 block systemd documents as unused (above its
 * container ranges, below the ids that trip signed 32-bit code). */
#define AD_ID_BASE 0x70000000u

struct ad_userns {
	int on;                           /* a user namespace, root inside = uid/gid */
	unsigned uid, gid;                /* host ids of root inside */
	int ws_fd;                        /* detached idmapped workspace (owned), or -1 */
};

/* Decide (never fails; fallbacks print a notice): uid/gid AD_ID_BASE +
 * idx and the workspace idmapped (its owner <-> them), else root inside =
 * the workspace's owner, else no user namespace (root-owned workspace
 * that cannot be idmapped, host without user namespaces). -v says which. */
void ad_userns_plan(const struct ad_spec *sp, struct ad_userns *u);
/* Write pid's maps: 0 inside <-> uid/gid, size 1. 0 or SG_EIO (errno). */
int ad_userns_map(pid_t pid, unsigned uid, unsigned gid);
/* Attach the idmapped workspace at path (a mount namespace of the
 * sandbox's, not the host's) and close it. 0 or SG_EIO (errno). */
int ad_userns_ws_attach(struct ad_userns *u, const char *path);
/* Close the workspace mount if still held (each process that has it). */
void ad_userns_release(struct ad_userns *u);

/* ad_oci.c: OCI bundles for runc/crun/runsc */
int ad_oci_start(struct ad_sbx *s, const char *runtime);
void ad_oci_cleanup(struct ad_sbx *s, const char *runtime);
int ad_oci_available(const char *runtime, char *why, size_t whysz);
/* The sweep: delete (kill) the container a dead run's runtime recorded
 * under state_dir (runc, crun or runsc), by its id "sandgate-<run_id>". */
void ad_oci_sweep(const char *state_dir, const char *run_id);

/* ad_vm_image.c: what the microvm backend boots (kernel, initramfs, disk) */
struct ad_vm_kernel {
	char key[128];                    /* "<package>_<version>": the cache key */
	char dir[256];                    /* AD_CACHE_DIR/kernel/<key> */
	char vmlinuz[300];
};
/* A file of the per-run initramfs: from the host (host_path) or memory. */
struct ad_vm_file {
	const char *name;                 /* path inside the guest, no leading '/' */
	const char *host_path;            /* or NULL: data/len */
	const char *data;
	size_t len;
	int mode;
};
/* Find (or apt-get download once) Debian's cloud kernel in the cache. */
int ad_vm_kernel_get(struct ad_vm_kernel *k, int verbose);
/* The cached base initramfs (busybox, /init, modules) for k: out = path. */
int ad_vm_initramfs_base(const struct ad_vm_kernel *k, const char *busybox, char *out,
			 size_t outsz, int verbose);
/* out = base + one more archive of files (later files win in the guest). */
int ad_vm_initrd_write(const char *base, const char *out, const struct ad_vm_file *files, int nf);
/* An ext4 image holding a copy of dir (mke2fs -d). */
int ad_vm_workspace_image(const char *dir, const char *img);

/* --------------------------------------------------------------- entry */

int ad_run_main(int argc, char **argv);     /* `sandgate run ...` */
/* `sandgate cni` / argv[0] "sandgate-cni": the CNI plugin (env + stdin). */
int ad_cni_main(int argc, char **argv);

#endif
