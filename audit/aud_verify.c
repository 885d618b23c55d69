/*
 * aud_verify.c - `sandgate audit verify`: the chain across files, the
 * anchor, and the command line (contracts in aud_verify.h, aud_cmd.h).
 *
 * Speed comes from doing little per record: files are read in 4 MiB
 * blocks into one buffer, lines are found with memchr, and a record is
 * touched only at its fixed prefix ({"v":1,"seq":N,"ts":..,"event":..),
 * its chain suffix, and, for audit_rotate / recovery records, a key
 * search. One HMAC per record, on a context keyed once. No allocation
 * per record.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "sg.h"
#include "audit/aud_chain.h"
#include "audit/aud_cmd.h"
#include "audit/aud_verify.h"
#include "policy/pol.h"
#include "sg_poison.h"

#define BLOCK (4u << 20)

struct vstate {
	const struct aud_verify_opts *opts;
	struct aud_verify_result *res;
	struct aud_mac *mac;
	const char *file;               /* borrowed: the one being read */
	const char *prev_file;          /* the one before it, or NULL */
	uint64_t lineno;
	int have;                       /* a record was accepted */
	uint64_t last_seq;
	char last_chain[AUD_CHAIN_HEX + 1];
	/* a line that was not a record, waiting for the next one to say
	 * whether the writer recovered from it */
	int torn;
	const char *torn_file;
	uint64_t torn_line, torn_len;
	int torn_eof;                   /* it was the end of a file */
	/* the anchor */
	int has_anchor, anchor_seen;
	struct aud_head anchor;
};

__attribute__((format(printf, 2, 3)))
static int problem(struct vstate *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v->res->where, sizeof(v->res->where), fmt, ap);
	va_end(ap);
	v->res->ok = 0;
	return 1;
}

static int torn_report(struct vstate *v, int announced)
{
	if (v->torn_eof)
		return problem(v, "%s:%llu: truncated record: the file ends mid-line "
			       "(%llu bytes without a newline)%s", v->torn_file,
			       (unsigned long long)v->torn_line,
			       (unsigned long long)v->torn_len,
			       announced ? "; the next record says the writer recovered "
			       "from this torn write: pass --accept-recovered to accept it" : "");
	return problem(v, "%s:%llu: not a complete audit record (%llu bytes)%s",
		       v->torn_file, (unsigned long long)v->torn_line,
		       (unsigned long long)v->torn_len,
		       announced ? "; the next record says the writer recovered from this "
		       "torn write: pass --accept-recovered to accept it" : "");
}

static int mac_ok(struct vstate *v, const char *prev, const char *p,
		  const struct aud_line *l)
{
	char want[AUD_CHAIN_HEX + 1];

	if (aud_chain_compute(v->mac, prev, p, l->body_len, want) < 0)
		return -1;
	return !memcmp(want, l->chain, AUD_CHAIN_HEX);
}

static const char *short_chain(const char *c, char *out)
{
	if (!c)
		return "null";
	memcpy(out, c, 12);
	memcpy(out + 12, "...", 4);
	return out;
}

/* One line without its '\n'. 0 go on, 1 a problem (res->where set). */
static int verify_line(struct vstate *v, const char *p, size_t len)
{
	struct aud_verify_result *res = v->res;
	struct aud_line l;
	const char *prev, *pc = NULL;
	uint64_t expect, ps = 0, tb;
	int rotate, has_ps = 0, ok, announced;
	char c1[16], c2[16];

	if (len > AUD_LINE_MAX || aud_line_parse(p, len, &l) < 0) {
		if (v->torn)
			return torn_report(v, 0);
		v->torn = 1;
		v->torn_file = v->file;
		v->torn_line = v->lineno;
		v->torn_len = len;
		v->torn_eof = 0;
		return 0;
	}
	/* only a line after a fragment needs the key search */
	announced = v->torn && aud_line_flag(p, len, "recovered_torn_tail");
	if (v->torn && (!announced || !v->opts->accept_recovered ||
			(aud_line_u64(p, len, "torn_bytes", &tb) == 0 && tb &&
			 tb != v->torn_len)))
		return torn_report(v, announced);
	if (!l.chain)
		return problem(v, "%s:%llu: no chain field: this record was written without "
			       "audit.key and is not tamper-evident", v->file,
			       (unsigned long long)v->lineno);
	rotate = aud_line_is(&l, "audit_rotate");
	if (rotate && aud_line_rotate_link(p, len, &has_ps, &ps, &pc) < 0)
		return problem(v, "%s:%llu: audit_rotate record without a valid prev_seq "
			       "and prev_chain", v->file, (unsigned long long)v->lineno);
	if (v->have) {
		if (rotate && (!has_ps || ps != v->last_seq || !pc ||
			       memcmp(pc, v->last_chain, AUD_CHAIN_HEX))) {
			if (v->lineno == 1 && v->prev_file)
				return problem(v, "%s:1: does not follow %s: it links to seq %llu "
					       "(chain %s) but %s ends at seq %llu (chain %s): "
					       "a file between them is missing, or the files are "
					       "out of order", v->file, v->prev_file,
					       (unsigned long long)ps, short_chain(pc, c1),
					       v->prev_file, (unsigned long long)v->last_seq,
					       short_chain(v->last_chain, c2));
			return problem(v, "%s:%llu: audit_rotate links to seq %llu but the "
				       "record before it is seq %llu", v->file,
				       (unsigned long long)v->lineno, (unsigned long long)ps,
				       (unsigned long long)v->last_seq);
		}
		prev = v->last_chain;
		expect = v->last_seq + 1;
	} else if (rotate) {
		/* A file that opens with audit_rotate verifies alone: the link
		 * is inside this record's MAC. */
		prev = pc ? pc : aud_chain_zero;
		expect = has_ps ? ps + 1 : 1;
	} else {
		prev = aud_chain_zero;
		expect = 1;
		if (l.seq != 1)
			return problem(v, "%s:%llu: the chain does not start here: seq %llu "
				       "(a chain starts at seq 1 or with an audit_rotate record); "
				       "the records or files before it are missing", v->file,
				       (unsigned long long)v->lineno, (unsigned long long)l.seq);
	}
	ok = mac_ok(v, prev, p, &l);
	if (ok < 0)
		return problem(v, "%s:%llu: HMAC failed (OpenSSL)", v->file,
			       (unsigned long long)v->lineno);
	if (l.seq != expect) {
		if (v->have && v->lineno == 1 && v->prev_file)
			return problem(v, "%s:1: does not follow %s: it starts at seq %llu but "
				       "%s ends at seq %llu: a file between them is missing, or "
				       "the files are out of order", v->file, v->prev_file,
				       (unsigned long long)l.seq, v->prev_file,
				       (unsigned long long)v->last_seq);
		if (l.seq > expect)
			return problem(v, "%s:%llu: seq %llu where %llu was expected: %llu "
				       "record(s) missing before this line (removed, or lines "
				       "reordered)%s", v->file, (unsigned long long)v->lineno,
				       (unsigned long long)l.seq, (unsigned long long)expect,
				       (unsigned long long)(l.seq - expect),
				       ok ? "" : "; chain mismatch");
		return problem(v, "%s:%llu: seq %llu where %llu was expected: a record "
			       "repeated, inserted or out of order%s", v->file,
			       (unsigned long long)v->lineno, (unsigned long long)l.seq,
			       (unsigned long long)expect, ok ? "" : "; chain mismatch");
	}
	if (!ok) {
		if (!res->records)
			return problem(v, "%s:%llu: chain mismatch: wrong key, or the first "
				       "record was changed", v->file, (unsigned long long)v->lineno);
		return problem(v, "%s:%llu: chain mismatch: the record was changed or forged",
			       v->file, (unsigned long long)v->lineno);
	}
	if (rotate && memmem(p, len, "\"reason\":\"anchor_mismatch\"", 26)) {
		if (!v->opts->accept_recovered)
			return problem(v, "%s:%llu: the writer found records missing when it "
				       "started: its anchor was ahead of the file (records removed "
				       "while the gateway was stopped?); pass --accept-recovered "
				       "to accept this on-record gap", v->file,
				       (unsigned long long)v->lineno);
		res->recovered++;
	}
	if (v->torn) {
		res->torn++;
		v->torn = 0;
	}
	if (aud_line_u64(p, len, "lost_before", &tb) == 0 && tb) {
		if (!res->lost)
			snprintf(res->note, sizeof(res->note), "%s:%llu", v->file,
				 (unsigned long long)v->lineno);
		res->lost += tb;
	}
	if (v->has_anchor && l.seq == v->anchor.seq) {
		if (memcmp(l.chain, v->anchor.chain, AUD_CHAIN_HEX))
			return problem(v, "%s:%llu: seq %llu differs from the anchor (chain %s, "
				       "anchor %s): the chain was rewritten from here", v->file,
				       (unsigned long long)v->lineno, (unsigned long long)l.seq,
				       short_chain(l.chain, c1), short_chain(v->anchor.chain, c2));
		v->anchor_seen = 1;
	}
	if (!res->records)
		res->first_seq = l.seq;
	res->records++;
	v->have = 1;
	v->last_seq = l.seq;
	memcpy(v->last_chain, l.chain, AUD_CHAIN_HEX);
	return 0;
}

/* 0 go on, 1 problem, negative I/O error (where set). */
static int verify_file(struct vstate *v, char *buf)
{
	size_t have = 0;
	uint64_t total = 0;
	int fd, rc = 0;

	v->lineno = 0;
	fd = open(v->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(v->res->where, sizeof(v->res->where), "%s: cannot open: %s",
			 v->file, strerror(errno));
		return SG_EIO;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (;;) {
		ssize_t n = read(fd, buf + have, BLOCK - have);
		char *p, *end, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(v->res->where, sizeof(v->res->where), "%s: cannot read: %s",
				 v->file, strerror(errno));
			rc = SG_EIO;
			goto out;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		have += (size_t)n;
		p = buf;
		end = buf + have;
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			v->lineno++;
			rc = verify_line(v, p, (size_t)(nl - p));
			if (rc)
				goto out;
			p = nl + 1;
		}
		have = (size_t)(end - p);
		if (have == BLOCK) {
			rc = problem(v, "%s:%llu: a line over %u bytes: not an audit record",
				     v->file, (unsigned long long)v->lineno + 1, BLOCK);
			goto out;
		}
		memmove(buf, p, have);
	}
	if (total == 0) {
		rc = problem(v, "%s: empty: no records", v->file);
		goto out;
	}
	if (have) {
		/* The last line has no '\n': cut mid-record. The next file may
		 * still say the writer recovered from it. */
		v->lineno++;
		if (v->torn) {
			rc = torn_report(v, 0);
			goto out;
		}
		v->torn = 1;
		v->torn_file = v->file;
		v->torn_line = v->lineno;
		v->torn_len = have;
		v->torn_eof = 1;
	}
out:
	close(fd);
	return rc;
}

static int load_anchor(struct vstate *v, const char *path)
{
	char buf[AUD_HEAD_MAX];
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return problem(v, "%s: cannot open the anchor: %s: without it a removed "
			       "last file or tail cannot be detected", path, strerror(errno));
	n = read(fd, buf, sizeof(buf));
	close(fd);
	rc = n > 0 ? aud_head_parse(v->mac, buf, (size_t)n, &v->anchor) : SG_EINVAL;
	if (rc == SG_ERROR)
		return problem(v, "%s: anchor MAC mismatch: wrong key, or the anchor was edited",
			       path);
	if (rc < 0)
		return problem(v, "%s: not an audit anchor", path);
	v->has_anchor = 1;
	return 0;
}

int aud_verify_files_ex(const char *const *files, size_t n, const struct aud_key *key,
			const struct aud_verify_opts *opts, struct aud_verify_result *res)
{
	static const struct aud_verify_opts none;
	struct vstate v;
	char err[256];
	char *buf = NULL;
	size_t i;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	memset(&v, 0, sizeof(v));
	v.opts = opts ? opts : &none;
	v.res = res;
	v.mac = aud_mac_new(key, err, sizeof(err));
	if (!v.mac) {
		snprintf(res->where, sizeof(res->where), "%s", err);
		return SG_ERROR;
	}
	buf = malloc(BLOCK);
	if (!buf) {
		snprintf(res->where, sizeof(res->where), "out of memory");
		rc = SG_ENOMEM;
		goto out;
	}
	if (!n) {
		rc = problem(&v, "no files to verify");
		goto out;
	}
	if (v.opts->anchor && (rc = load_anchor(&v, v.opts->anchor)))
		goto out;
	for (i = 0; i < n; i++) {
		v.file = files[i];
		rc = verify_file(&v, buf);
		if (rc)
			goto out;
		v.prev_file = files[i];
	}
	if (v.torn) {
		rc = torn_report(&v, 0);
		goto out;
	}
	if (v.has_anchor && !v.anchor_seen) {
		if (v.last_seq < v.anchor.seq)
			rc = problem(&v, "%s:%llu: the chain ends at seq %llu but the anchor %s "
				     "says it reached seq %llu (in %s): the newest file or its "
				     "last %llu record(s) are missing", v.file,
				     (unsigned long long)v.lineno + 1,
				     (unsigned long long)v.last_seq, v.opts->anchor,
				     (unsigned long long)v.anchor.seq, v.anchor.file,
				     (unsigned long long)(v.anchor.seq - v.last_seq));
		else
			rc = problem(&v, "%s: the anchor's seq %llu is before the first record "
				     "given (seq %llu): give the older files too", v.opts->anchor,
				     (unsigned long long)v.anchor.seq,
				     (unsigned long long)res->first_seq);
		goto out;
	}
	res->anchor_ok = v.has_anchor;
	res->last_seq = v.last_seq;
	memcpy(res->last_chain, v.last_chain, AUD_CHAIN_HEX);
	res->last_chain[AUD_CHAIN_HEX] = '\0';
	res->ok = 1;
out:
	if (rc == 1) {
		res->last_seq = v.last_seq;
		res->ok = 0;
	}
	free(buf);
	aud_mac_free(v.mac);
	return rc;
}

int aud_verify_files(const char *const *files, size_t n, const struct aud_key *key,
		     struct aud_verify_result *res)
{
	return aud_verify_files_ex(files, n, key, NULL, res);
}

/* ---------------------------------------------------------- command line */

static int usage(void)
{
	fprintf(stderr,
		"usage: sandgate audit verify [-c CONFIG | --key SPEC] [--anchor FILE]\n"
		"                             [--accept-recovered] [FILE...]\n"
		"  -c CONFIG           take audit.key and audit.path from the configuration;\n"
		"                      checks the anchor PATH.head, and without FILEs verifies\n"
		"                      PATH.N ... PATH.1 PATH (the rotated files, oldest first)\n"
		"  --key SPEC          file:PATH or env:NAME\n"
		"  --anchor FILE       check the end of the chain against this anchor\n"
		"  --accept-recovered  accept torn lines and gaps the writer itself announced\n"
		"exit: 0 chain ok, 1 a problem (FILE:LINE: why), 2 usage\n");
	return 2;
}

/* The rotated files of path, oldest first, then path: PATH.N..PATH.1 PATH.
 * Every number up to the highest found is listed, so a missing middle
 * file shows up as "cannot open". */
static int rotated_files(const char *path, char ***out, size_t *n)
{
	char dir[PATH_MAX], **v;
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	size_t blen = strlen(base), i;
	long max = 0;
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1,
		 slash ? path : ".");
	d = opendir(dir);
	if (d) {
		while ((de = readdir(d))) {
			char *e;
			long k;

			if (strncmp(de->d_name, base, blen) || de->d_name[blen] != '.')
				continue;
			k = strtol(de->d_name + blen + 1, &e, 10);
			if (*e || k <= 0 || k > 1000000 || de->d_name[blen + 1] == '0')
				continue;
			max = SG_MAX(max, k);
		}
		closedir(d);
	}
	v = calloc((size_t)max + 1, sizeof(*v));
	if (!v)
		return SG_ENOMEM;
	for (i = 0; i < (size_t)max; i++) {
		size_t sz = strlen(path) + 24;

		v[i] = malloc(sz);
		if (!v[i])
			goto oom;
		snprintf(v[i], sz, "%s.%ld", path, max - (long)i);
	}
	v[max] = strdup(path);
	if (!v[max])
		goto oom;
	*out = v;
	*n = (size_t)max + 1;
	return 0;
oom:
	for (i = 0; i <= (size_t)max; i++)
		free(v[i]);
	free(v);
	return SG_ENOMEM;
}

int aud_cmd_verify(int argc, char **argv)
{
	const char *config = NULL, *keyspec = NULL, *anchor = NULL;
	struct aud_verify_opts opts = { 0 };
	struct aud_verify_result res;
	struct sg_config *cfg = NULL;
	struct aud_key key = { 0 };
	char err[512], head[PATH_MAX], **found = NULL;
	const char *const *files;
	size_t nfiles, nfound = 0, i;
	int rc = 1, first = -1;

	for (i = 0; i < (size_t)argc; i++) {
		const char *a = argv[i];

		if ((!strcmp(a, "-c") || !strcmp(a, "--config")) && i + 1 < (size_t)argc) {
			config = argv[++i];
		} else if (!strcmp(a, "--key") && i + 1 < (size_t)argc) {
			keyspec = argv[++i];
		} else if (!strcmp(a, "--anchor") && i + 1 < (size_t)argc) {
			anchor = argv[++i];
		} else if (!strcmp(a, "--accept-recovered")) {
			opts.accept_recovered = 1;
		} else if (!strcmp(a, "--")) {
			first = (int)i + 1;
			break;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "sandgate audit verify: unknown option \"%s\"\n", a);
			return usage();
		} else {
			first = (int)i;
			break;
		}
	}
	if (config && keyspec) {
		fprintf(stderr, "sandgate audit verify: -c and --key exclude each other\n");
		return usage();
	}
	if (!config && !keyspec) {
		fprintf(stderr, "sandgate audit verify: a key is needed: -c CONFIG or --key SPEC\n");
		return usage();
	}
	if (!config && first < 0) {
		fprintf(stderr, "sandgate audit verify: no FILE given\n");
		return usage();
	}
	files = first >= 0 ? (const char *const *)argv + first : NULL;
	nfiles = first >= 0 ? (size_t)(argc - first) : 0;
	if (config) {
		if (pol_config_load(config, &cfg, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		if (!cfg->audit_key || !cfg->audit_path || !strcmp(cfg->audit_path, "-")) {
			fprintf(stderr, "%s: %s: nothing to verify against\n", config,
				!cfg->audit_key ? "audit.key is not set (records carry no chain)" :
				"audit.path is not a file");
			goto out;
		}
		keyspec = cfg->audit_key;
		if (!anchor) {
			snprintf(head, sizeof(head), "%s" AUD_HEAD_SUFFIX, cfg->audit_path);
			anchor = head;
		}
		if (!files) {
			if (rotated_files(cfg->audit_path, &found, &nfound) < 0) {
				fprintf(stderr, "sandgate audit verify: out of memory\n");
				goto out;
			}
			files = (const char *const *)found;
			nfiles = nfound;
		}
	}
	opts.anchor = anchor;
	if (aud_key_load(keyspec, &key, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	rc = aud_verify_files_ex(files, nfiles, &key, &opts, &res);
	aud_key_free(&key);
	if (rc == 0) {
		for (i = 0; i < nfiles; i++)
			printf("%s%s", i ? " " : "", files[i]);
		printf(": %llu records, chain ok", (unsigned long long)res.records);
		if (res.anchor_ok)
			printf(", anchor ok");
		if (res.lost)
			printf(", %llu records declared lost by the writer (first at %s)",
			       (unsigned long long)res.lost, res.note);
		if (res.torn || res.recovered)
			printf(", %llu torn write(s) and %llu start-up gap(s) accepted",
			       (unsigned long long)res.torn, (unsigned long long)res.recovered);
		printf("\n");
	} else {
		fprintf(stderr, "%s\n", res.where);
		rc = 1;
	}
out:
	for (i = 0; i < nfound; i++)
		free(found[i]);
	free(found);
	pol_config_free(cfg);
	return rc;
}
