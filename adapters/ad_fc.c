/*
 * ad_fc.c - drive Firecracker: the ELF kernel it boots and its API socket.
 *
 * Kernel: Firecracker on x86_64 loads an uncompressed ELF vmlinux (with a
 * PVH note), not a bzImage. The bzImage carries that ELF compressed after
 * its setup code; scripts/extract-vmlinux in the kernel tree finds it by
 * scanning for each compressor's magic and decompressing from every hit
 * until the output is an ELF. We do the same, with the Debian tools in a
 * child process (a false hit makes the tool fail fast; trailing bytes after
 * the real stream make it complain, which is why its exit status is not
 * trusted and the output's ELF header is). Debian's 6.1 cloud kernel is
 * LZ4 (legacy frame, magic 02 21 4C 18, at the boot header's
 * payload_offset); the others are here because kernels are built either
 * way.
 *
 * API: HTTP/1.1 over the unix socket of `firecracker --api-sock PATH`, one
 * request per connection, bodies as in src/firecracker/swagger/
 * firecracker.yaml. Firecracker answers 204 to each PUT and 400 with
 * {"fault_message": "..."} to what it refuses (unknown fields included:
 * its config structs deny them). Its HTTP server (micro_http) accepts only
 * application/json or text/plain in Content-Type and Accept and needs a
 * Content-Length. Every read and write is bounded by one deadline.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "sg_json.h"
#include "sg_jsonp.h"
#include "adapters/ad.h"
#include "adapters/ad_fc.h"
#include "sg_poison.h"

#define FC_DECOMP_TIMEOUT_MS 60000
#define FC_MAX_HITS 64                  /* per compressor: bounded like the scan */
#define FC_VMLINUX_MAX (1LL << 30)      /* RLIMIT_FSIZE of the decompressor */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------- vmlinux */

/* scripts/extract-vmlinux's list, in its order (lzo left out: Debian's
 * lzop is not installed anywhere we run, and no Debian kernel uses it). */
static const struct fc_codec {
	const char *name;
	const char *magic;
	size_t mlen;
	const char *const argv[5];
} fc_codecs[] = {
	{ "gzip", "\037\213\010", 3, { "gzip", "-dc", NULL } },
	{ "xz", "\3757zXZ\000", 6, { "xz", "-dc", NULL } },
	{ "bzip2", "BZh", 3, { "bzip2", "-dc", NULL } },
	{ "lzma", "\135\000\000\000", 4, { "xz", "--format=lzma", "-dc", NULL } },
	{ "lz4", "\002!L\030", 4, { "lz4", "-dcq", NULL } },
	{ "zstd", "(\265/\375", 4, { "zstd", "-dcq", NULL } },
};

static int is_elf_file(const char *path)
{
	unsigned char id[EI_NIDENT];
	int fd = open(path, O_RDONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return 0;
	ok = pread(fd, id, sizeof(id), 0) == (ssize_t)sizeof(id) && !memcmp(id, ELFMAG, SELFMAG) &&
	     id[EI_CLASS] == ELFCLASS64;
	close(fd);
	return ok;
}

/* Decompress vmlinuz from off into out with codec c. Returns 0 when out
 * is an ELF, SG_DECLINED when not, SG_EIO when the tool could not run. */
static int try_decompress(const struct fc_codec *c, const char *vmlinuz, off_t off,
			  const char *out)
{
	int in = open(vmlinuz, O_RDONLY | O_CLOEXEC), ofd, st;
	long long deadline = now_ms() + FC_DECOMP_TIMEOUT_MS;
	pid_t pid, r;

	if (in < 0)
		return SG_EIO;
	ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (ofd < 0 || lseek(in, off, SEEK_SET) != off) {
		close(in);
		if (ofd >= 0)
			close(ofd);
		return SG_EIO;
	}
	pid = fork();
	if (pid == 0) {
		/* A false hit could inflate garbage for a long time: capped. */
		struct rlimit fs = { FC_VMLINUX_MAX, FC_VMLINUX_MAX };
		int devnull = open("/dev/null", O_WRONLY);

		ad_child_signals_reset();
		signal(SIGXFSZ, SIG_DFL);
		setrlimit(RLIMIT_FSIZE, &fs);
		dup2(in, 0);
		dup2(ofd, 1);
		if (devnull >= 0)
			dup2(devnull, 2);
		execvp(c->argv[0], (char *const *)c->argv);
		_exit(127);
	}
	close(in);
	close(ofd);
	if (pid < 0)
		return SG_EIO;
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
		usleep(5000);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return SG_DECLINED;
	}
	if (r < 0)
		return SG_EIO;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return SG_EIO;
	return is_elf_file(out) ? 0 : SG_DECLINED;
}

/* Scan img for c's magic; try each hit. 0: out is the ELF. */
static int scan_codec(const struct fc_codec *c, const unsigned char *img, size_t len,
		      const char *vmlinuz, const char *out, int *tried)
{
	const unsigned char *p = img, *end = img + len;
	int hits = 0, rc;

	while (hits < FC_MAX_HITS && (size_t)(end - p) >= c->mlen &&
	       (p = memmem(p, (size_t)(end - p), c->magic, c->mlen))) {
		/* "BZh" is followed by the block size digit: skip English. */
		if (!strcmp(c->name, "bzip2") &&
		    ((size_t)(end - p) <= c->mlen || p[3] < '1' || p[3] > '9')) {
			p++;
			continue;
		}
		hits++;
		rc = try_decompress(c, vmlinuz, (off_t)(p - img), out);
		if (rc == SG_EIO)
			return SG_EIO;          /* the tool is missing: next codec */
		*tried = 1;
		if (rc == 0)
			return 0;
		p++;
	}
	return SG_DECLINED;
}

static int fresh_elf(const char *elf, const struct stat *src)
{
	struct stat st;

	return stat(elf, &st) == 0 && st.st_mtime >= src->st_mtime && is_elf_file(elf);
}

int ad_fc_vmlinux(const char *vmlinuz, const char *out_elf, char *err, size_t errsz)
{
	char tmp[600], missing[128] = "";
	struct stat st;
	unsigned char *img = MAP_FAILED;
	size_t i;
	int fd, rc = SG_DECLINED, tried = 0;

	errno = 0;
	if (stat(vmlinuz, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 1024) {
		ad_fmt(err, errsz, "%s: %s", vmlinuz, errno ? strerror(errno) : "not a kernel");
		return SG_EIO;
	}
	if (fresh_elf(out_elf, &st))
		return 0;
	if (ad_fmt(tmp, sizeof(tmp), "%s.%d.tmp", out_elf, (int)getpid()) < 0) {
		ad_fmt(err, errsz, "path too long: %s", out_elf);
		return SG_EINVAL;
	}
	fd = open(vmlinuz, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		close(fd);
	}
	if (img == MAP_FAILED) {
		ad_fmt(err, errsz, "cannot read %s: %s", vmlinuz, strerror(errno));
		return SG_EIO;
	}
	/* Already an ELF (an unpacked vmlinux handed in): a plain copy. */
	if (!memcmp(img, ELFMAG, SELFMAG)) {
		rc = ad_file_write(tmp, (const char *)img, (size_t)st.st_size, 0644) < 0 ? SG_EIO : 0;
	} else {
		for (i = 0; i < SG_ARRAY_LEN(fc_codecs) && rc != 0; i++) {
			rc = scan_codec(&fc_codecs[i], img, (size_t)st.st_size, vmlinuz, tmp, &tried);
			if (rc == SG_EIO) {
				size_t n = strlen(missing);

				ad_fmt(missing + n, sizeof(missing) - n, "%s%s", n ? ", " : "",
				       fc_codecs[i].argv[0]);
				rc = SG_DECLINED;
			}
		}
	}
	munmap(img, (size_t)st.st_size);
	if (rc == 0 && rename(tmp, out_elf) < 0)
		rc = SG_EIO;
	unlink(tmp);
	if (rc == 0)
		return 0;
	if (missing[0])
		ad_fmt(err, errsz, "no ELF vmlinux found in %s (tools that did not run: %s)",
		       vmlinuz, missing);
	else
		ad_fmt(err, errsz, "no ELF vmlinux found in %s%s", vmlinuz,
		       tried ? "" : " (no compression magic)");
	return SG_EIO;
}

/* ------------------------------------------------------------ API */

/* Poll fd for ev until the deadline. 0, or SG_EIO on timeout/error. */
static int wait_fd(int fd, short ev, long long deadline)
{
	for (;;) {
		struct pollfd pf = { fd, ev, 0 };
		long long left = deadline - now_ms();
		int r;

		if (left <= 0)
			return SG_EIO;
		r = poll(&pf, 1, (int)SG_MIN(left, 1000LL));
		if (r < 0 && errno != EINTR)
			return SG_EIO;
		if (r > 0)
			return pf.revents & POLLNVAL ? SG_EIO : 0;
	}
}

/* Has the firecracker process exited? A child is not reaped here (WNOWAIT):
 * its parent collects the status. */
static int fc_gone(pid_t pid)
{
	siginfo_t si;

	if (pid <= 0)
		return 0;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		/* Not our child after all: alive while it can be signalled. */
		return errno == ECHILD && kill(pid, 0) < 0 && errno == ESRCH;
	return si.si_pid == pid;
}

/* Connect to the API socket, retrying while it is not there yet. */
static int fc_connect(const char *path, pid_t pid, long long deadline, char *err, size_t errsz)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, e = 0;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		ad_fmt(err, errsz, "API socket path too long: %s", path);
		return SG_EINVAL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			ad_fmt(err, errsz, "socket: %s", strerror(errno));
			return SG_EIO;
		}
		/* A unix connect completes or fails at once (EAGAIN: the
		 * backlog is full; retried like a missing socket). */
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		e = errno;
		close(fd);
		if (e != ENOENT && e != ECONNREFUSED && e != EAGAIN && e != EINTR)
			break;
		if (fc_gone(pid)) {
			ad_fmt(err, errsz, "firecracker exited before its API socket %s accepted",
			       path);
			return SG_EIO;
		}
		if (now_ms() >= deadline)
			break;
		usleep(10000);
	}
	ad_fmt(err, errsz, "API socket %s: %s", path, e ? strerror(e) : "timed out");
	return SG_EIO;
}

static int send_all(int fd, const char *p, size_t n, long long deadline)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
			if (wait_fd(fd, POLLOUT, deadline) < 0)
				return SG_EIO;
			continue;
		}
		if (w <= 0)
			return SG_EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Content-Length of a response head (NUL-terminated), or -1. */
static long content_length(const char *head)
{
	const char *p = head;

	while ((p = strstr(p, "\r\n"))) {
		p += 2;
		if (!strncasecmp(p, "Content-Length:", 15))
			return strtol(p + 15, NULL, 10);
	}
	return -1;
}

/* The fault_message of a JSON error body into out, else the body itself. */
static void fault_message(const char *body, size_t len, char *out, size_t outsz)
{
	struct sg_jsonp_tok t[32];
	size_t off, i;
	int n = sg_jsonp_parse(body, len, t, SG_ARRAY_LEN(t), &off);

	if (n > 0 && t[0].type == SG_JSON_OBJECT)
		for (i = 1; i + 1 < (size_t)n; i = t[i + 1].next)
			if (t[i].type == SG_JSON_STRING && sg_jsonp_eq(body, &t[i], "fault_message") &&
			    t[i + 1].type == SG_JSON_STRING &&
			    sg_jsonp_str(body, &t[i + 1], out, outsz) >= 0)
				return;
	/* Not JSON (or no fault_message): the start of the body, one line. */
	for (i = 0; i < len && i + 1 < outsz && body[i] != '\n' && body[i] != '\r'; i++)
		out[i] = body[i];
	if (outsz)
		out[SG_MIN(i, outsz - 1)] = '\0';
}

/* One PUT: 0 on 2xx, else SG_EIO with err filled in. */
static int fc_put(const char *sock, pid_t pid, const char *uri, const char *body,
		  long long deadline, char *err, size_t errsz)
{
	char req[8192], resp[4096 + 1], msg[512];
	size_t got = 0, blen = strlen(body), hlen;
	const char *eoh = NULL;
	long cl;
	int fd, n, status, rc = SG_EIO;

	n = snprintf(req, sizeof(req),
		     "PUT %s HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		     uri, blen, body);
	if (n < 0 || (size_t)n >= sizeof(req)) {
		ad_fmt(err, errsz, "PUT %s: request too large", uri);
		return SG_EINVAL;
	}
	fd = fc_connect(sock, pid, deadline, err, errsz);
	if (fd < 0)
		return fd;
	if (send_all(fd, req, (size_t)n, deadline) < 0) {
		ad_fmt(err, errsz, "PUT %s: cannot send to %s", uri, sock);
		goto out;
	}
	/* Head, then Content-Length bytes of body; what does not fit in
	 * resp is not needed (a fault_message is short). */
	for (;;) {
		ssize_t r;

		resp[got] = '\0';
		eoh = strstr(resp, "\r\n\r\n");
		if (eoh) {
			hlen = (size_t)(eoh + 4 - resp);
			cl = content_length(resp);
			if (cl <= 0 || got - hlen >= (size_t)cl || got == sizeof(resp) - 1)
				break;
		} else if (got == sizeof(resp) - 1) {
			ad_fmt(err, errsz, "PUT %s: response head too large", uri);
			goto out;
		}
		if (wait_fd(fd, POLLIN, deadline) < 0) {
			ad_fmt(err, errsz, "PUT %s: no answer from firecracker in time", uri);
			goto out;
		}
		r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			if (eoh)
				break;          /* body cut short: judge what came */
			ad_fmt(err, errsz, "PUT %s: connection closed without an answer", uri);
			goto out;
		}
		got += (size_t)r;
	}
	if (strncmp(resp, "HTTP/1.", 7) || got < 12 || resp[8] != ' ') {
		ad_fmt(err, errsz, "PUT %s: not an HTTP response", uri);
		goto out;
	}
	status = atoi(resp + 9);
	if (status >= 200 && status < 300) {
		rc = 0;
		goto out;
	}
	hlen = (size_t)(eoh + 4 - resp);
	cl = content_length(resp);
	fault_message(resp + hlen, cl >= 0 ? SG_MIN((size_t)cl, got - hlen) : got - hlen, msg,
		      sizeof(msg));
	ad_fmt(err, errsz, "PUT %s: HTTP %d: %s", uri, status, msg[0] ? msg : "(no message)");
out:
	close(fd);
	return rc;
}

int ad_fc_configure(const char *api_sock, const struct ad_fc_vm *vm, int timeout_ms, char *err,
		    size_t errsz)
{
	long long deadline = now_ms() + timeout_ms;
	char body[4096];
	struct sg_json j;
	int rc;

#define FC_BODY_END()                                                         \
	do {                                                                  \
		if (sg_json_end(&j) < 0) {                                    \
			ad_fmt(err, errsz, "API request body too large");     \
			return SG_EINVAL;                                     \
		}                                                             \
	} while (0)

	sg_json_init(&j, body, sizeof(body));
	sg_json_begin(&j);
	sg_json_str(&j, "kernel_image_path", vm->kernel);
	if (vm->initrd)
		sg_json_str(&j, "initrd_path", vm->initrd);
	if (vm->boot_args)
		sg_json_str(&j, "boot_args", vm->boot_args);
	FC_BODY_END();
	if ((rc = fc_put(api_sock, vm->pid, "/boot-source", body, deadline, err, errsz)) < 0)
		return rc;

	sg_json_init(&j, body, sizeof(body));
	sg_json_begin(&j);
	sg_json_int(&j, "vcpu_count", vm->vcpus);
	sg_json_int(&j, "mem_size_mib", vm->mem_mib);
	FC_BODY_END();
	if ((rc = fc_put(api_sock, vm->pid, "/machine-config", body, deadline, err, errsz)) < 0)
		return rc;

	/* The path's id and the body's iface_id must match (400 otherwise). */
	sg_json_init(&j, body, sizeof(body));
	sg_json_begin(&j);
	sg_json_str(&j, "iface_id", "eth0");
	sg_json_str(&j, "host_dev_name", vm->tap);
	FC_BODY_END();
	if ((rc = fc_put(api_sock, vm->pid, "/network-interfaces/eth0", body, deadline, err,
			 errsz)) < 0)
		return rc;

	if (vm->drive) {
		/* Not the root device: the guest's root is its initramfs;
		 * the disk is /dev/vda, mounted on /workspace by /init. */
		sg_json_init(&j, body, sizeof(body));
		sg_json_begin(&j);
		sg_json_str(&j, "drive_id", "ws");
		sg_json_str(&j, "path_on_host", vm->drive);
		sg_json_bool(&j, "is_root_device", 0);
		sg_json_bool(&j, "is_read_only", 0);
		FC_BODY_END();
		if ((rc = fc_put(api_sock, vm->pid, "/drives/ws", body, deadline, err, errsz)) < 0)
			return rc;
	}

	return fc_put(api_sock, vm->pid, "/actions", "{\"action_type\":\"InstanceStart\"}",
		      deadline, err, errsz);
#undef FC_BODY_END
}
