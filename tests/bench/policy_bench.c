/*
 * policy_bench.c - the policy engine at scale (issue "Policy engine,
 * complete", performance): a generated policy with 100,000 domain rules
 * (exact, *., **.), 100,000 CIDRs (v4 and v6) and 100 regexes; the time
 * to load and compile it, the memory the compiled policy holds, and
 * pol_eval latency over a million random queries (median, p99).
 *
 *   policy_bench [-d DOMAINS] [-c CIDRS] [-r REGEXES] [-q QUERIES] [-s SEED]
 *                [-o FILE]     (keep the generated policy in FILE)
 *
 * Built and run by policy_bench.sh against build/rel. Not a test: it
 * prints a table and the goals next to the figures. Single-threaded; the
 * evaluator is lock-free and read-only, so workers scale with cores.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "sg.h"
#include "sg_str.h"
#include "policy/pol_int.h"
#include "sg_poison.h"

static uint64_t rng_state = 0x5eedbe11c4a11ULL;

static uint32_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static long rss_kb(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/*
 * Domain i: "w<i>.z<i/50>.b<i/1000>.test" style, so that suffixes are
 * shared the way real ones are (many names under few zones).
 */
static int dom_name(char *out, size_t sz, uint32_t i)
{
	return snprintf(out, sz, "w%u.z%u.b%u.test", i, i / 50, i / 1000);
}

/* v4 rule j: a /24../32 inside 11.0.0.0/8 + j; v6: 2001:db8:<j>::/48../64 */
static void cidr_v4(char *out, size_t sz, uint32_t j, int *plen)
{
	uint32_t base = 0x0b000000u + (j << 8);

	*plen = 24 + (int)(j % 9);
	base &= ~0u << (32 - *plen);
	snprintf(out, sz, "%u.%u.%u.%u/%d", base >> 24, base >> 16 & 255, base >> 8 & 255,
		 base & 255, *plen);
}

static void cidr_v6(char *out, size_t sz, uint32_t j, int *plen)
{
	uint32_t g4;

	*plen = 48 + (int)(j % 17);
	g4 = ((j & 255) << 8) & (0xffffu << (64 - *plen)) & 0xffffu;
	snprintf(out, sz, "\"2001:db8:%x:%x::/%d\"", j >> 8, g4, *plen);
}

struct opts {
	uint32_t domains, cidrs, regexes, queries;
};

/*
 * The policy: a floor, one profile and one sandbox using it. Deny lists
 * get a tenth of each kind; the regexes mostly end in a literal domain
 * (the common case, indexed), a few do not (tried on every name).
 */
static int write_policy(const char *path, const struct opts *o, uint32_t *n_v4,
			uint32_t *n_v6)
{
	static const char *const kinds[] = { "", "*.", "**." };
	char name[128], cidr[128];
	uint32_t i, v4 = 0, v6 = 0;
	int plen;
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "version: 1\nfloor:\n  deny:\n"
		"    - { name: metadata, cidrs: [169.254.0.0/16, \"fd00:ec2::254/128\"] }\n"
		"    - { name: internal, domains: [\"**.internal.bench.test\"] }\n"
		"profiles:\n  common:\n    allow:\n");
	for (i = 0; i < o->domains; i++) {
		const char *list = i % 10 == 0 ? NULL : i % 10 == 1 ? "common" : "own";

		if (list && strcmp(list, "common"))
			continue;
		if (!list)
			continue;
		dom_name(name, sizeof(name), i);
		fprintf(f, "      - { domains: [\"%s%s\"] }\n", kinds[i % 3], name);
	}
	fprintf(f, "sandboxes:\n  \"bench-*\":\n    sources: [10.200.0.0/16]\n"
		"    profiles: [common]\n    deny:\n");
	for (i = 0; i < o->domains; i += 10) {
		dom_name(name, sizeof(name), i);
		fprintf(f, "      - { domains: [\"%s%s\"] }\n", kinds[i % 3], name);
	}
	for (i = 0; i < o->cidrs; i += 10) {
		if (i % 3) {
			cidr_v4(cidr, sizeof(cidr), i, &plen);
			v4++;
		} else {
			cidr_v6(cidr, sizeof(cidr), i, &plen);
			v6++;
		}
		fprintf(f, "      - { cidrs: [%s], ports: [5432] }\n", cidr);
	}
	for (i = 0; i < o->regexes; i += 10)
		fprintf(f, "      - { regex: '^[a-z]+-%u\\.rx\\.bench\\.test$' }\n", i);
	fprintf(f, "    allow:\n");
	for (i = 0; i < o->domains; i++) {
		if (i % 10 < 2)
			continue;
		dom_name(name, sizeof(name), i);
		fprintf(f, "      - { domains: [\"%s%s\"] }\n", kinds[i % 3], name);
	}
	for (i = 0; i < o->cidrs; i++) {
		if (i % 10 == 0)
			continue;
		if (i % 3) {
			cidr_v4(cidr, sizeof(cidr), i, &plen);
			v4++;
		} else {
			cidr_v6(cidr, sizeof(cidr), i, &plen);
			v6++;
		}
		fprintf(f, "      - { cidrs: [%s], ports: [5432, \"8000-8100\"] }\n", cidr);
	}
	for (i = 0; i < o->regexes; i++) {
		if (i % 10 == 0)
			continue;
		if (i % 20 == 5)        /* no literal tail */
			fprintf(f, "      - { regex: '^(api|www)[0-9]*-%u\\.(dev|stg)\\.[a-z]+$' }\n", i);
		else
			fprintf(f, "      - { regex: '^[a-z0-9-]+\\.r%u\\.rx\\.bench\\.test$', "
				"ports: [443, 8443] }\n", i);
	}
	fprintf(f, "default: deny\n");
	*n_v4 = v4;
	*n_v6 = v6;
	return fclose(f);
}

enum qkind { Q_NAME, Q_NAME_ADDR, Q_ADDR, Q_KINDS };

static const char *const qkind_names[] = {
	"name only (before resolving)", "name + address", "address only",
};

struct query {
	uint32_t name_off;      /* in the name pool, or UINT32_MAX */
	uint8_t kind;
	uint16_t port;
	struct sg_addr addr;
};

/* A name: one a rule names (exact, under a wildcard), a regex's, or none. */
static void rand_qname(char *out, size_t sz, const struct opts *o)
{
	char base[96];
	uint32_t i = rng() % (o->domains ? o->domains : 1), r = rng() % 100;

	dom_name(base, sizeof(base), i);
	if (r < 35)
		snprintf(out, sz, "%s", base);
	else if (r < 60)
		snprintf(out, sz, "x%u.%s", rng() % 1000, base);
	else if (r < 70)
		snprintf(out, sz, "a%u.b.%s", rng() % 1000, base);
	else if (r < 80)
		snprintf(out, sz, "host-%u.r%u.rx.bench.test", rng() % 1000,
			 o->regexes ? rng() % o->regexes : 0);
	else
		snprintf(out, sz, "n%u.unknown%u.example", rng(), rng() % 5000);
}

static void rand_qaddr(struct sg_addr *a, const struct opts *o)
{
	uint32_t j = rng() % (o->cidrs ? o->cidrs : 1);
	int plen, r = (int)(rng() % 100);
	char buf[128], *p;

	if (r < 60) {
		if (j % 3) {
			uint32_t x = 0x0b000000u + (j << 8) + (rng() & 0xff);

			a->family = AF_INET;
			a->u.v4.s_addr = htonl(x);
			return;
		}
		cidr_v6(buf, sizeof(buf), j, &plen);
		p = strchr(buf + 1, '/');
		*p = '\0';
		sg_addr_parse(buf + 1, strlen(buf + 1), a);
		a->u.v6.s6_addr[15] = (uint8_t)rng();
		return;
	}
	/* a public address nothing names */
	a->family = AF_INET;
	a->u.v4.s_addr = htonl(0x5db8d800u + (rng() & 0xffff));
}

static void count_warn(void *arg, int line, int col, const char *msg)
{
	SG_UNUSED(arg);
	SG_UNUSED(line);
	SG_UNUSED(col);
	SG_UNUSED(msg);
}

static int cmp_u32(const void *pa, const void *pb)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

	return a < b ? -1 : a > b;
}

static void pct(uint32_t *v, size_t n, double *med, double *p99, double *max)
{
	if (!n) {
		*med = *p99 = *max = 0;
		return;
	}
	qsort(v, n, sizeof(*v), cmp_u32);
	*med = v[n / 2] / 1000.0;
	*p99 = v[(size_t)((double)n * 0.99)] / 1000.0;
	*max = v[n - 1] / 1000.0;
}

int main(int argc, char **argv)
{
	struct opts o = { 100000, 100000, 100, 1000000 };
	char path[] = "/tmp/policy_bench.XXXXXX", err[512], name[256];
	const char *keep = NULL, *file = path;
	struct mallinfo2 m0, m1;
	struct sg_config *cfg = NULL;
	struct pol_verdict v;
	struct query *qs;
	uint32_t *lat, *by[Q_KINDS], nby[Q_KINDS] = { 0 }, n_v4, n_v6, i, c;
	char *pool;
	size_t pool_len = 0, pool_cap;
	long rss0, rss1;
	double t0, t_load, t_all, t_check, med, p99, max, ovh;
	int n_warn;
	uint64_t a, b, allow = 0;
	int fd, opt;
	FILE *f;

	while ((opt = getopt(argc, argv, "d:c:r:q:s:o:")) != -1) {
		uint32_t val = (uint32_t)strtoul(optarg, NULL, 10);

		switch (opt) {
		case 'o': keep = optarg; break;
		case 'd': o.domains = val; break;
		case 'c': o.cidrs = val; break;
		case 'r': o.regexes = val; break;
		case 'q': o.queries = val ? val : 1; break;
		case 's': rng_state = val ? val : 1; break;
		default:
			fprintf(stderr, "usage: %s [-d DOMAINS] [-c CIDRS] [-r REGEXES] "
				"[-q QUERIES] [-s SEED] [-o FILE]\n", argv[0]);
			return 2;
		}
	}
	fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	if (keep) {
		unlink(path);
		file = keep;
	}
	if (write_policy(file, &o, &n_v4, &n_v6)) {
		perror(file);
		return 1;
	}
	f = fopen(file, "r");
	fseek(f, 0, SEEK_END);
	printf("policy_bench: %u domain rules, %u CIDRs (%u v4, %u v6), %u regexes; "
	       "%.1f MB of YAML\n\n", o.domains, o.cidrs, n_v4, n_v6, o.regexes,
	       (double)ftell(f) / 1e6);
	fclose(f);

	m0 = mallinfo2();
	rss0 = rss_kb();
	t0 = now_s();
	if (pol_config_load(file, &cfg, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		if (!keep)
			unlink(path);
		return 1;
	}
	t_load = now_s() - t0;
	m1 = mallinfo2();
	/* give back what the YAML tree used, so RSS shows what stays */
	malloc_trim(0);
	rss1 = rss_kb();
	if (!keep)
		unlink(path);

	/* queries made up front: the loop times pol_eval alone */
	qs = calloc(o.queries, sizeof(*qs));
	lat = malloc(o.queries * sizeof(*lat));
	pool_cap = (size_t)o.queries * 48;
	pool = malloc(pool_cap);
	for (i = 0; i < Q_KINDS; i++)
		by[i] = malloc(o.queries * sizeof(*by[i]));
	if (!qs || !lat || !pool || !by[0] || !by[1] || !by[2])
		return 1;
	for (i = 0; i < o.queries; i++) {
		struct query *q = &qs[i];
		int len;

		q->kind = (uint8_t)(rng() % 10 < 4 ? Q_NAME : rng() % 3 ? Q_NAME_ADDR : Q_ADDR);
		q->name_off = UINT32_MAX;
		if (q->kind != Q_ADDR) {
			rand_qname(name, sizeof(name), &o);
			len = (int)strlen(name);
			if (pool_len + (size_t)len + 1 > pool_cap)
				return 1;
			memcpy(pool + pool_len, name, (size_t)len + 1);
			q->name_off = (uint32_t)pool_len;
			pool_len += (size_t)len + 1;
		}
		if (q->kind != Q_NAME)
			rand_qaddr(&q->addr, &o);
		q->port = q->kind == Q_ADDR ? 5432 : 443;
	}
	/* what reading the clock costs, taken off each sample */
	for (i = 0, ovh = 1e9; i < 1000; i++) {
		a = now_ns();
		b = now_ns();
		if ((double)(b - a) < ovh)
			ovh = (double)(b - a);
	}
	t0 = now_s();
	for (i = 0; i < o.queries; i++) {
		const struct query *q = &qs[i];
		struct pol_query pq = {
			.sbx = &cfg->sandboxes[0],
			.name = q->name_off == UINT32_MAX ? NULL : pool + q->name_off,
			.addr = q->kind == Q_NAME ? NULL : &q->addr,
			.port = q->port,
		};

		a = now_ns();
		pol_eval(cfg, &pq, &v);
		b = now_ns();
		lat[i] = (uint32_t)((double)(b - a) > ovh ? (double)(b - a) - ovh : 0);
		by[q->kind][nby[q->kind]++] = lat[i];
		allow += v.decision == POL_ALLOW;
	}
	t_all = now_s() - t0;
	t0 = now_s();
	n_warn = pol_check(cfg, count_warn, NULL);
	t_check = now_s() - t0;

	printf("  %-34s %10.3f s      goal < 1 s  %s\n", "load + compile", t_load,
	       t_load < 1 ? "ok" : "MISSED");
	printf("  %-34s %10.1f MB     heap in use after load\n", "compiled policy",
	       (double)(m1.uordblks - m0.uordblks) / 1e6);
	printf("  %-34s %10.1f MB     of which the index (tries, ranges)\n", "",
	       (double)cfg->index->bytes / 1e6);
	printf("  %-34s %10.1f MB     (after malloc_trim)\n",
	       "RSS delta", (double)(rss1 - rss0) / 1e3);
	pct(lat, o.queries, &med, &p99, &max);
	printf("  %-34s %10.3f us     goal < 1 us  %s\n", "pol_eval median", med,
	       med < 1 ? "ok" : "MISSED");
	printf("  %-34s %10.3f us     goal < 5 us  %s\n", "pol_eval p99", p99,
	       p99 < 5 ? "ok" : "MISSED");
	printf("  %-34s %10.3f us\n", "pol_eval max", max);
	printf("  %-34s %10.2f M/s    (%u queries, %.0f%% allowed, clock cost %.0f ns "
	       "removed)\n", "throughput, one thread", o.queries / t_all / 1e6, o.queries,
	       100.0 * (double)allow / o.queries, ovh);
	printf("  %-34s %10.3f s      (%d warnings)\n", "policy check (warnings)", t_check,
	       n_warn);
	printf("\n  %-34s %10s %10s %10s\n", "by query", "median us", "p99 us", "count");
	for (c = 0; c < Q_KINDS; c++) {
		uint32_t n = nby[c];

		pct(by[c], n, &med, &p99, &max);
		printf("  %-34s %10.3f %10.3f %10u\n", qkind_names[c], med, p99, n);
	}
	pol_config_free(cfg);
	for (i = 0; i < Q_KINDS; i++)
		free(by[i]);
	free(qs);
	free(lat);
	free(pool);
	return 0;
}
