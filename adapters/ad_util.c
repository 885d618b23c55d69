/*
 * ad_util.c - small blocking helpers for the adapters' CLI code: run a
 * command and capture its output, whole-file reads and writes, process
 * identity (PID + start time), directory trees. See ad.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sg.h"
#include "adapters/ad.h"
#include "sg_poison.h"

int ad_fmt(char *out, size_t outsz, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, outsz, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= outsz ? SG_EINVAL : 0;
}

int ad_proc_write(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), e;
	ssize_t w = fd >= 0 ? write(fd, v, strlen(v)) : -1;

	e = errno;
	if (fd >= 0)
		close(fd);
	errno = e;
	return w == (ssize_t)strlen(v) ? 0 : SG_EIO;
}

void ad_child_signals_reset(void)
{
	sigset_t none;
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int ad_cmd(const char *const argv[], const char *in, size_t inlen, char *out, size_t outsz)
{
	int inp[2] = { -1, -1 }, outp[2] = { -1, -1 }, st, rc = SG_EIO;
	size_t got = 0, put = 0;
	pid_t pid;

	if (out && outsz)
		out[0] = '\0';
	if ((in && pipe2(inp, O_CLOEXEC) < 0) || pipe2(outp, O_CLOEXEC) < 0)
		goto out;
	pid = fork();
	if (pid < 0)
		goto out;
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		ad_child_signals_reset();
		dup2(in ? inp[0] : devnull, 0);
		dup2(outp[1], 1);
		dup2(outp[1], 2);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(outp[1]);
	outp[1] = -1;
	if (in) {
		close(inp[0]);
		inp[0] = -1;
		fcntl(inp[1], F_SETFL, O_NONBLOCK);
	}
	/* Feed stdin and drain stdout together: either may fill its pipe. */
	for (;;) {
		struct pollfd p[2] = { { outp[0], POLLIN, 0 }, { inp[1], POLLOUT, 0 } };
		int np = inp[1] >= 0 ? 2 : 1;
		char buf[4096];
		ssize_t r;

		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (np == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			r = write(inp[1], in + put, inlen - put);
			if (r > 0)
				put += (size_t)r;
			if (r < 0 || put == inlen) {
				close(inp[1]);
				inp[1] = -1;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = read(outp[0], buf, sizeof(buf));
			if (r <= 0)
				break;
			if (out && got + 1 < outsz) {
				size_t n = SG_MIN((size_t)r, outsz - 1 - got);

				memcpy(out + got, buf, n);
				got += n;
				out[got] = '\0';
			}
		}
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
out:
	if (inp[0] >= 0)
		close(inp[0]);
	if (inp[1] >= 0)
		close(inp[1]);
	if (outp[0] >= 0)
		close(outp[0]);
	if (outp[1] >= 0)
		close(outp[1]);
	return rc;
}

int ad_file_write(const char *path, const char *data, size_t len, int mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	size_t off = 0;

	if (fd < 0)
		return SG_EIO;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return SG_EIO;
		}
		off += (size_t)w;
	}
	/* fchmod: O_CREAT's mode is filtered by the umask, and an existing
	 * file keeps its old mode. */
	if (fchmod(fd, (mode_t)mode) < 0 || close(fd) < 0)
		return SG_EIO;
	return 0;
}

ssize_t ad_file_read(const char *path, char *buf, size_t bufsz)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;

	if (fd < 0 || bufsz == 0) {
		if (fd >= 0)
			close(fd);
		return SG_EIO;
	}
	while (got + 1 < bufsz) {
		ssize_t r = read(fd, buf + got, bufsz - 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	close(fd);
	return (ssize_t)got;
}

int ad_mkdir_p(const char *path, int mode)
{
	char p[PATH_MAX];
	size_t i, n = strlen(path);

	if (n == 0 || n >= sizeof(p))
		return SG_EINVAL;
	memcpy(p, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST)
			return SG_EIO;
		p[i] = i < n ? '/' : '\0';
	}
	return 0;
}

/* Depth-first, never crossing into another filesystem (a mount left
 * behind must not have its contents deleted) nor following symlinks. */
static void rm_rf_at(int dfd, const char *name, dev_t dev)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlinkat(dfd, name, 0);
		return;
	}
	if (st.st_dev != dev)
		return;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rm_rf_at(fd, e->d_name, dev);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

void ad_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return;
	rm_rf_at(AT_FDCWD, path, st.st_dev);
}

unsigned long long ad_proc_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	int field;

	if (pid <= 0 || ad_fmt(path, sizeof(path), "/proc/%d/stat", (int)pid) < 0 ||
	    ad_file_read(path, buf, sizeof(buf)) <= 0)
		return 0;
	/* comm (field 2) may hold spaces and parens: start after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	v = strtoull(p, NULL, 10);
	return v;
}

int ad_self_exe(char *out, size_t outsz)
{
	ssize_t n = readlink("/proc/self/exe", out, outsz - 1);

	if (n <= 0 || (size_t)n >= outsz - 1)
		return SG_EIO;
	out[n] = '\0';
	return 0;
}

int ad_which(const char *cmd, char *out, size_t outsz)
{
	const char *path = getenv("PATH"), *p, *e;

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0 && ad_fmt(out, outsz, "%s", cmd) == 0 ? 0 : SG_EINVAL;
	if (!path || !*path)
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (p = path; *p; p = *e ? e + 1 : e) {
		e = strchr(p, ':');
		if (!e)
			e = p + strlen(p);
		if (e > p && ad_fmt(out, outsz, "%.*s/%s", (int)(e - p), p, cmd) == 0 &&
		    access(out, X_OK) == 0)
			return 0;
	}
	return SG_EINVAL;
}
