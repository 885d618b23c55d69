/*
 * ad_net.c - the network every backend gets: a namespace behind a veth
 * (or a tap for a microVM), a /30 and a ULA /64, and one nft table that
 * sends every TCP connection to the transparent listener, DNS to the DNS
 * listener, and drops everything else. Also the sweep of crashed runs.
 *
 * Addressing: index i of the pool gives 10.231.(i>>6).(i&63)*4/30 (host .1,
 * sandbox .2) and fd53:6761:7465:i::/64 (host ::1, sandbox ::2). The index
 * is chosen under a lock among the live runs' state files and the host's
 * own addresses, so two runs (or a run and a host network) never overlap.
 *
 * Ownership: the state dir AD_STATE_ROOT/<id>/owner holds "PID STARTTIME";
 * an object is stale when that process no longer exists. Objects of our
 * shape without a state dir are stale when the PID in their id is gone.
 * The sweep also deletes a dead run's runtime container (ad_oci_sweep,
 * before its state goes) and its cgroups, killing what is left in them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "adapters/ad.h"
#include "sg_poison.h"

#define POOL_SIZE 16384          /* /30s in 10.231.0.0/16 */

static void pool_addrs(struct ad_net *n)
{
	unsigned a = n->idx >> 6, b = (n->idx & 63) * 4;

	ad_fmt(n->host4, sizeof(n->host4), "10.231.%u.%u", a, b + 1);
	ad_fmt(n->sbx4, sizeof(n->sbx4), "10.231.%u.%u", a, b + 2);
	ad_fmt(n->host6, sizeof(n->host6), "fd53:6761:7465:%x::1", n->idx);
	ad_fmt(n->sbx6, sizeof(n->sbx6), "fd53:6761:7465:%x::2", n->idx);
}

/* "sgr" + 8 hex, "sandgate_" + 8 hex: the only names the sweep touches. */
static int id_of(const char *name, const char *prefix, char id[9])
{
	size_t pl = strlen(prefix), i;

	if (strncmp(name, prefix, pl) || strlen(name) != pl + 8)
		return -1;
	for (i = 0; i < 8; i++) {
		char c = name[pl + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return -1;
		id[i] = c;
	}
	id[8] = '\0';
	return 0;
}

/* Is the run that owns id still alive? Unknown counts as alive only when
 * its PID exists: a state file proves identity through the start time. */
static int owner_alive(const char *id)
{
	char path[128], buf[128];
	unsigned long pid = strtoul((char[7]){ id[0], id[1], id[2], id[3], id[4], id[5], 0 },
				    NULL, 16);
	unsigned long long st = 0;

	if (ad_fmt(path, sizeof(path), AD_STATE_ROOT "/%s/owner", id) == 0 &&
	    ad_file_read(path, buf, sizeof(buf)) > 0 &&
	    sscanf(buf, "%lu %llu", &pid, &st) == 2)
		return st && ad_proc_starttime((pid_t)pid) == st;
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static void teardown_id(const char *id, int verbose)
{
	struct ad_net n;

	memset(&n, 0, sizeof(n));
	memcpy(n.id, id, 9);
	ad_fmt(n.ns, sizeof(n.ns), "sgr%s", id);
	ad_fmt(n.ifname, sizeof(n.ifname), "sgr%s", id);
	ad_fmt(n.table, sizeof(n.table), "sandgate_%s", id);
	ad_fmt(n.state_dir, sizeof(n.state_dir), AD_STATE_ROOT "/%s", id);
	n.made = AD_MADE_STATE | AD_MADE_NS | AD_MADE_LINK | AD_MADE_NFT;
	if (verbose)
		fprintf(stderr, "sandgate run: removing what crashed run %s left behind\n", id);
	/* The runtime's container first: its state is in the state dir, and
	 * its processes may still be in the namespace and the cgroups. */
	ad_oci_sweep(n.state_dir, id);
	ad_net_teardown(&n);
}

/* Stale ids from one listing: names are matched exactly, then the owner. */
static void sweep_names(const char *list, const char *prefix, int verbose)
{
	const char *p = list;

	while (p && *p) {
		const char *e = strpbrk(p, " \t\n:@");
		char name[64], id[9];
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len > 0 && len < sizeof(name)) {
			memcpy(name, p, len);
			name[len] = '\0';
			if (id_of(name, prefix, id) == 0 && !owner_alive(id))
				teardown_id(id, verbose);
		}
		p = e ? e + 1 : NULL;
	}
}

/* A cgroup of a dead run: kill what is still in it (an orphaned sandbox:
 * its run, gateway and runtime are gone), then remove it. */
static void cgroup_remove_stale(const char *dir, const char *id, int verbose)
{
	char path[4200], buf[8192], *p, *e;
	int tries;

	if (verbose)
		fprintf(stderr, "sandgate run: removing cgroup %s of crashed run %s\n", dir, id);
	for (tries = 0; tries < 100; tries++) {
		if (rmdir(dir) == 0 || errno != EBUSY)
			return;
		if (ad_fmt(path, sizeof(path), "%s/cgroup.procs", dir) == 0 &&
		    ad_file_read(path, buf, sizeof(buf)) > 0)
			for (p = buf; *p; p = e) {
				long pid = strtol(p, &e, 10);

				if (e == p)
					break;
				if (pid > 1)
					kill((pid_t)pid, SIGKILL);
			}
		usleep(20000);
	}
}

/* Cgroups named "sandgate-<id>" (ours: memory/pids of the container
 * backend under the caller's group; runc's cgroupsPath and runsc's /<id>
 * at the top of each hierarchy), a few levels deep, symlinks not followed
 * (v1 "cpu" -> "cpu,cpuacct"). */
static void sweep_cgroups(const char *dir, int depth, int verbose)
{
	char path[4200], id[9];
	struct dirent *e;
	DIR *d;

	if (depth > 6 || !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.' ||
		    ad_fmt(path, sizeof(path), "%s/%s", dir, e->d_name) < 0)
			continue;
		if (id_of(e->d_name, "sandgate-", id) == 0) {
			if (!owner_alive(id))
				cgroup_remove_stale(path, id, verbose);
			continue;
		}
		sweep_cgroups(path, depth + 1, verbose);
	}
	closedir(d);
}

void ad_net_sweep(int verbose)
{
	static char out[65536];
	const char *nft_list[] = { "nft", "list", "tables", NULL };
	const char *ip_list[] = { "ip", "-o", "link", "show", NULL };
	DIR *d;
	struct dirent *e;
	char id[9];

	/* State dirs first: they name every object of their run. */
	if ((d = opendir(AD_STATE_ROOT))) {
		while ((e = readdir(d)))
			if (id_of(e->d_name, "", id) == 0 && !owner_alive(id))
				teardown_id(id, verbose);
		closedir(d);
	}
	if ((d = opendir("/run/netns"))) {
		while ((e = readdir(d)))
			if (id_of(e->d_name, "sgr", id) == 0 && !owner_alive(id))
				teardown_id(id, verbose);
		closedir(d);
	}
	if (ad_cmd(nft_list, NULL, 0, out, sizeof(out)) == 0)
		sweep_names(out, "sandgate_", verbose);
	if (ad_cmd(ip_list, NULL, 0, out, sizeof(out)) == 0)
		sweep_names(out, "sgr", verbose);
	/* Last: the runtimes above removed their own; what is left is empty
	 * (or holds an orphan, killed here). */
	sweep_cgroups("/sys/fs/cgroup", 0, verbose);
}

/* Is the /30 of idx (or its /64) on any host interface already? */
static int idx_in_use_on_host(unsigned idx, struct ifaddrs *ifs)
{
	struct ifaddrs *i;
	uint32_t net = (uint32_t)(10u << 24 | 231u << 16 | (idx >> 6) << 8 | (idx & 63) * 4);

	for (i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			uint32_t a = ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr);

			if ((a & ~3u) == net)
				return 1;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			const uint8_t *b =
				((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr.s6_addr;
			static const uint8_t pfx[6] = { 0xfd, 0x53, 0x67, 0x61, 0x74, 0x65 };

			if (!memcmp(b, pfx, 6) && (b[6] << 8 | b[7]) == (int)idx)
				return 1;
		}
	}
	return 0;
}

static int idx_in_use_by_run(unsigned idx)
{
	char path[128], buf[64];
	DIR *d = opendir(AD_STATE_ROOT);
	struct dirent *e;
	int used = 0;

	if (!d)
		return 0;
	while (!used && (e = readdir(d))) {
		if (e->d_name[0] == '.' ||
		    ad_fmt(path, sizeof(path), AD_STATE_ROOT "/%s/net", e->d_name) < 0)
			continue;
		if (ad_file_read(path, buf, sizeof(buf)) > 0 && strtoul(buf, NULL, 10) == idx)
			used = 1;
	}
	closedir(d);
	return used;
}

int ad_net_alloc(struct ad_net *n, enum ad_link_kind kind)
{
	struct ifaddrs *ifs = NULL;
	char path[128], buf[64];
	unsigned i, start;
	int lock = -1, rc = SG_EIO;
	struct timespec ts;

	memset(n, 0, sizeof(n[0]));
	n->kind = kind;
	clock_gettime(CLOCK_REALTIME, &ts);
	ad_fmt(n->id, sizeof(n->id), "%06x%02x", (unsigned)getpid() & 0xffffff,
	       (unsigned)(ts.tv_nsec / 1000) & 0xff);
	if (kind == AD_LINK_VETH)
		ad_fmt(n->ns, sizeof(n->ns), "sgr%s", n->id);
	ad_fmt(n->ifname, sizeof(n->ifname), "sgr%s", n->id);
	ad_fmt(n->table, sizeof(n->table), "sandgate_%s", n->id);
	ad_fmt(n->state_dir, sizeof(n->state_dir), AD_STATE_ROOT "/%s", n->id);
	if (ad_mkdir_p(AD_STATE_ROOT, 0755) < 0) {
		fprintf(stderr, "sandgate run: cannot create %s: %s\n", AD_STATE_ROOT,
			strerror(errno));
		return SG_EIO;
	}
	/* One lock serialises choosing an index and publishing it. */
	lock = open(AD_STATE_ROOT "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		goto out;
	/* 0711: a sandbox's setup may run as an unprivileged mapped user and
	 * must be able to reach its own files, not list the others. */
	if (mkdir(n->state_dir, 0711) < 0) {
		fprintf(stderr, "sandgate run: %s: %s\n", n->state_dir, strerror(errno));
		goto out;
	}
	chmod(n->state_dir, 0711);
	n->made |= AD_MADE_STATE;
	if (ad_fmt(path, sizeof(path), "%s/owner", n->state_dir) < 0 ||
	    ad_fmt(buf, sizeof(buf), "%d %llu\n", (int)getpid(),
		   ad_proc_starttime(getpid())) < 0 ||
	    ad_file_write(path, buf, strlen(buf), 0644) < 0)
		goto out;
	getifaddrs(&ifs);
	start = (unsigned)getpid() % POOL_SIZE;
	for (i = 0; i < POOL_SIZE; i++) {
		unsigned idx = (start + i) % POOL_SIZE;

		if (idx_in_use_on_host(idx, ifs) || idx_in_use_by_run(idx))
			continue;
		n->idx = idx;
		if (ad_fmt(path, sizeof(path), "%s/net", n->state_dir) < 0 ||
		    ad_fmt(buf, sizeof(buf), "%u\n", idx) < 0 ||
		    ad_file_write(path, buf, strlen(buf), 0644) < 0)
			goto out;
		pool_addrs(n);
		rc = 0;
		break;
	}
	if (rc < 0)
		fprintf(stderr, "sandgate run: no free subnet in 10.231.0.0/16\n");
out:
	if (rc < 0 && n->made & AD_MADE_STATE) {
		ad_rm_rf(n->state_dir);
		n->made &= ~(unsigned)AD_MADE_STATE;
	}
	if (ifs)
		freeifaddrs(ifs);
	if (lock >= 0)
		close(lock);
	return rc;
}

/* Write a sysctl of the namespace we are in (the caller setns'd if needed). */
static int sysctl_set(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t w = fd >= 0 ? write(fd, v, strlen(v)) : -1;

	if (fd >= 0)
		close(fd);
	if (w != (ssize_t)strlen(v)) {
		fprintf(stderr, "sandgate run: %s: %s\n", path, strerror(errno));
		return SG_EIO;
	}
	return 0;
}

static int ip_batch(const char *ns, const char *script)
{
	const char *argv_host[] = { "ip", "-batch", "-", NULL };
	const char *argv_ns[] = { "ip", "-n", ns, "-batch", "-", NULL };
	char out[2048];
	int rc = ad_cmd(ns ? argv_ns : argv_host, script, strlen(script), out, sizeof(out));

	if (rc != 0) {
		fprintf(stderr, "sandgate run: ip%s%s: %s", ns ? " -n " : "", ns ? ns : "", out);
		return SG_EIO;
	}
	return 0;
}

int ad_net_create(struct ad_net *n)
{
	char script[1024], path[128];
	const char *add[] = { "ip", "netns", "add", n->ns, NULL };
	char out[512];

	if (n->kind == AD_LINK_TAP) {
		if (ad_fmt(script, sizeof(script),
			   "tuntap add dev %s mode tap\n"
			   "addr add %s/30 dev %s\n", n->ifname, n->host4, n->ifname) < 0 ||
		    ip_batch(NULL, script) < 0)
			return SG_EIO;
		n->made |= AD_MADE_LINK;
	} else {
		if (ad_cmd(add, NULL, 0, out, sizeof(out)) != 0) {
			fprintf(stderr, "sandgate run: ip netns add %s: %s", n->ns, out);
			return SG_EIO;
		}
		n->made |= AD_MADE_NS;
		if (ad_fmt(script, sizeof(script),
			   "link add %s type veth peer name eth0 netns %s\n"
			   "addr add %s/30 dev %s\n", n->ifname, n->ns, n->host4, n->ifname) < 0 ||
		    ip_batch(NULL, script) < 0)
			return SG_EIO;
		n->made |= AD_MADE_LINK;
	}
	/* No router advertisement may give the host side another address or
	 * route; nodad: the address is usable at once, not after DAD. */
	if (ad_fmt(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/accept_ra", n->ifname) < 0 ||
	    sysctl_set(path, "0") < 0)
		return SG_EIO;
	if (ad_fmt(script, sizeof(script),
		   "addr add %s/64 dev %s nodad\n"
		   "link set %s up\n", n->host6, n->ifname, n->ifname) < 0 ||
	    ip_batch(NULL, script) < 0)
		return SG_EIO;
	if (n->kind == AD_LINK_TAP)
		return 0;       /* the guest configures its own side */
	if (ad_fmt(script, sizeof(script),
		   "addr add %s/30 dev eth0\n"
		   "addr add %s/64 dev eth0 nodad\n"
		   "link set lo up\n"
		   "link set eth0 up\n"
		   "route add default via %s\n"
		   "-6 route add default via %s\n",
		   n->sbx4, n->sbx6, n->host4, n->host6) < 0)
		return SG_EIO;
	/* `ip -batch` takes no per-line options: "-6 route" is written as
	 * "route add default via V6" (the family follows the address). */
	{
		char *m = strstr(script, "-6 route");

		if (m)
			memmove(m, m + 3, strlen(m + 3) + 1);
	}
	return ip_batch(n->ns, script);
}

/* Append to a fixed buffer; overflow latches (checked once at the end). */
struct nbuf {
	char *p;
	size_t cap, len;
	int over;
};

static void nb_add(struct nbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void nb_add(struct nbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->over)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->cap - b->len)
		b->over = 1;
	else
		b->len += (size_t)n;
}

int ad_nft_ruleset(char *out, size_t outsz, const char *table, const char *const sel[],
		   int nsel, int tp_port, int dns_port)
{
	struct nbuf b = { out, outsz, 0, 0 };
	int i;

	/* Chain names: pre/fwd/in are nft keywords. A closing brace after a
	 * redirect statement goes on its own line (nft 1.0.6). */
	nb_add(&b, "table inet %s {\n\tchain sbx_pre {\n"
	       "\t\ttype nat hook prerouting priority dstnat; policy accept;\n", table);
	for (i = 0; i < nsel; i++) {
		/* Port 53, UDP and TCP, before the TCP catch-all. Without a DNS
		 * listener "accept" in a nat chain only means "no NAT": the
		 * packet then meets the input or forward chain and is dropped. */
		if (dns_port > 0)
			nb_add(&b, "\t\t%s udp dport 53 redirect to :%d\n"
			       "\t\t%s tcp dport 53 redirect to :%d\n",
			       sel[i], dns_port, sel[i], dns_port);
		else
			nb_add(&b, "\t\t%s udp dport 53 accept\n\t\t%s tcp dport 53 accept\n",
			       sel[i], sel[i]);
		nb_add(&b, "\t\t%s meta l4proto tcp redirect to :%d\n", sel[i], tp_port);
	}
	/* Nothing from or to the sandbox is forwarded, whatever ip_forward
	 * says (another table may accept: a drop in any base chain is final). */
	nb_add(&b, "\t}\n\tchain sbx_fwd {\n"
	       "\t\ttype filter hook forward priority filter; policy accept;\n");
	for (i = 0; i < nsel; i++)
		nb_add(&b, "\t\t%s drop\n", sel[i]);
	nb_add(&b, "\t}\n\tchain sbx_input {\n"
	       "\t\ttype filter hook input priority filter; policy accept;\n");
	for (i = 0; i < nsel; i++) {
		/* After REDIRECT the destination port is the listener's. */
		nb_add(&b, "\t\t%s tcp dport %d accept\n", sel[i], tp_port);
		if (dns_port > 0)
			nb_add(&b, "\t\t%s meta l4proto { tcp, udp } th dport %d accept\n",
			       sel[i], dns_port);
		else    /* refused at once, so resolvers fail fast instead of timing out */
			nb_add(&b, "\t\t%s meta l4proto { tcp, udp } th dport 53 reject\n", sel[i]);
		/* Neighbour discovery must reach the host or IPv6 never works;
		 * echo to the host is harmless. Everything else (other UDP, so
		 * QUIC falls back to TCP; other services of the host) drops. */
		nb_add(&b, "\t\t%s icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, "
		       "nd-router-solicit, echo-request } accept\n"
		       "\t\t%s icmp type echo-request accept\n"
		       "\t\t%s drop\n", sel[i], sel[i], sel[i]);
	}
	nb_add(&b, "\t}\n}\n");
	return b.over ? SG_EINVAL : 0;
}

int ad_net_redirect(struct ad_net *n)
{
	static char rules[8192];
	char sel[64], out[2048];
	const char *sels[1] = { sel };
	const char *argv[] = { "nft", "-f", "-", NULL };

	if (ad_fmt(sel, sizeof(sel), "iifname \"%s\"", n->ifname) < 0 ||
	    ad_nft_ruleset(rules, sizeof(rules), n->table, sels, 1, n->tp_port, n->dns_port) < 0)
		return SG_EINVAL;
	/* One `nft -f`: the table appears with all its rules or not at all. */
	if (ad_cmd(argv, rules, strlen(rules), out, sizeof(out)) != 0) {
		fprintf(stderr, "sandgate run: nft: %s", out);
		return SG_EIO;
	}
	n->made |= AD_MADE_NFT;
	return 0;
}

void ad_net_teardown(struct ad_net *n)
{
	const char *del_table[] = { "nft", "delete", "table", "inet", n->table, NULL };
	const char *del_link[] = { "ip", "link", "del", n->ifname, NULL };
	const char *del_ns[] = { "ip", "netns", "del", n->ns, NULL };

	/* Table first: from here on nothing of the sandbox is redirected to
	 * a port something else might bind later. */
	if (n->made & AD_MADE_NFT)
		ad_cmd(del_table, NULL, 0, NULL, 0);
	if (n->made & AD_MADE_LINK)
		ad_cmd(del_link, NULL, 0, NULL, 0);
	if ((n->made & AD_MADE_NS) && n->ns[0])
		ad_cmd(del_ns, NULL, 0, NULL, 0);
	if (n->made & AD_MADE_STATE)
		ad_rm_rf(n->state_dir);
	n->made = 0;
}
