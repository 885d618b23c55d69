/*
 * aud_chain.c - keys, the HMAC-SHA256 chain, the line layout and the
 * anchor (contracts in aud_verify.h and aud_chain.h).
 *
 * Key material is read with read(2) into buffers we wipe, never through
 * stdio (its buffers would keep a copy), and never formatted into a
 * message: errors name the SPEC (a path or a variable name), not bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "sg.h"
#include "sg_json.h"
#include "audit/aud_chain.h"
#include "sg_poison.h"

/* A key file larger than this is not a key (someone pointed at a log). */
#define KEY_FILE_MAX 4096

const char aud_chain_zero[AUD_CHAIN_HEX + 1] =
	"0000000000000000000000000000000000000000000000000000000000000000";

static const char head_prefix[] = "sandgate-audit-head:";

/* ---------------------------------------------------------------- keys */

static int key_take(struct aud_key *out, const uint8_t *p, size_t n,
		    const char *spec, char *err, size_t errsz)
{
	/* One trailing newline is an editor's, not the key's:
	 * `openssl rand -hex 32 > audit.key` must work as written. */
	if (n && p[n - 1] == '\n')
		n--;
	if (n && p[n - 1] == '\r')
		n--;
	if (n < AUD_KEY_MIN) {
		snprintf(err, errsz, "audit key %s: too short (%zu bytes; at least %d, "
			 "e.g. openssl rand -hex 32)", spec, n, AUD_KEY_MIN);
		return SG_EINVAL;
	}
	out->bytes = malloc(n);
	if (!out->bytes) {
		snprintf(err, errsz, "audit key %s: out of memory", spec);
		return SG_ENOMEM;
	}
	memcpy(out->bytes, p, n);
	out->len = n;
	return 0;
}

static int key_file(const char *path, const char *spec, struct aud_key *out,
		    char *err, size_t errsz)
{
	uint8_t buf[KEY_FILE_MAX + 1];
	size_t len = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errsz, "audit key %s: cannot open: %s", spec, strerror(errno));
		return SG_EIO;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errsz, "audit key %s: cannot read: %s", spec,
				 strerror(errno));
			rc = SG_EIO;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf)) {
			snprintf(err, errsz, "audit key %s: larger than %d bytes: not a key file",
				 spec, KEY_FILE_MAX);
			rc = SG_EINVAL;
			goto out;
		}
	}
	rc = key_take(out, buf, len, spec, err, errsz);
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return rc;
}

int aud_key_load(const char *spec, struct aud_key *out, char *err, size_t errsz)
{
	out->bytes = NULL;
	out->len = 0;
	if (!spec || !*spec) {
		snprintf(err, errsz, "audit key: empty SPEC (file:PATH or env:NAME)");
		return SG_EINVAL;
	}
	if (!strncmp(spec, "file:", 5) && spec[5])
		return key_file(spec + 5, spec, out, err, errsz);
	if (!strncmp(spec, "env:", 4) && spec[4]) {
		const char *v = getenv(spec + 4);

		if (!v) {
			snprintf(err, errsz, "audit key %s: the variable is not set", spec);
			return SG_EINVAL;
		}
		return key_take(out, (const uint8_t *)v, strlen(v), spec, err, errsz);
	}
	if (!strncmp(spec, "vault:", 6)) {
		snprintf(err, errsz, "audit key %s: vault keys arrive with the vault; "
			 "use file:PATH or env:NAME", spec);
		return SG_EINVAL;
	}
	snprintf(err, errsz, "audit key \"%s\": expected file:PATH, env:NAME or vault:NAME",
		 spec);
	return SG_EINVAL;
}

void aud_key_free(struct aud_key *k)
{
	if (!k || !k->bytes)
		return;
	OPENSSL_cleanse(k->bytes, k->len);
	free(k->bytes);
	k->bytes = NULL;
	k->len = 0;
}

/* ----------------------------------------------------------------- MACs */

struct aud_mac {
	EVP_MAC *mac;           /* owned */
	EVP_MAC_CTX *ctx;       /* owned; keyed once */
};

struct aud_mac *aud_mac_new(const struct aud_key *key, char *err, size_t errsz)
{
	struct aud_mac *m = calloc(1, sizeof(*m));
	OSSL_PARAM params[2];

	if (!m)
		goto fail;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						     (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	m->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!m->mac || !(m->ctx = EVP_MAC_CTX_new(m->mac)) ||
	    !EVP_MAC_init(m->ctx, key->bytes, key->len, params))
		goto fail;
	return m;
fail:
	snprintf(err, errsz, "audit: cannot set up HMAC-SHA256 (OpenSSL)");
	aud_mac_free(m);
	return NULL;
}

void aud_mac_free(struct aud_mac *m)
{
	if (!m)
		return;
	EVP_MAC_CTX_free(m->ctx);       /* wipes its copy of the key */
	EVP_MAC_free(m->mac);
	free(m);
}

int aud_mac_begin(struct aud_mac *m)
{
	/* No key: OpenSSL restarts from the keyed inner state it kept. */
	return EVP_MAC_init(m->ctx, NULL, 0, NULL) ? 0 : SG_ERROR;
}

int aud_mac_update(struct aud_mac *m, const void *p, size_t n)
{
	return EVP_MAC_update(m->ctx, p, n) ? 0 : SG_ERROR;
}

static const char hexdig[] = "0123456789abcdef";

int aud_mac_end_hex(struct aud_mac *m, char out[AUD_CHAIN_HEX + 1])
{
	uint8_t md[32];
	size_t n = 0, i;

	if (!EVP_MAC_final(m->ctx, md, &n, sizeof(md)) || n != sizeof(md))
		return SG_ERROR;
	for (i = 0; i < sizeof(md); i++) {
		out[2 * i] = hexdig[md[i] >> 4];
		out[2 * i + 1] = hexdig[md[i] & 15];
	}
	out[AUD_CHAIN_HEX] = '\0';
	return 0;
}

int aud_chain_compute(struct aud_mac *m, const char *prev, const char *body,
		      size_t len, char out[AUD_CHAIN_HEX + 1])
{
	if (aud_mac_begin(m) || aud_mac_update(m, prev, AUD_CHAIN_HEX) ||
	    aud_mac_update(m, body, len) || aud_mac_update(m, "}", 1))
		return SG_ERROR;
	return aud_mac_end_hex(m, out);
}

/* ---------------------------------------------------------------- lines */

int aud_hex_ok(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

/* Digits at p (at most 20, no leading zero unless "0"); SG_EINVAL if none. */
static int parse_u64(const char *p, const char *end, uint64_t *out, const char **next)
{
	uint64_t v = 0;
	const char *s = p;

	while (p < end && *p >= '0' && *p <= '9') {
		if (p - s >= 19 || (p > s && *s == '0'))
			return SG_EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
		p++;
	}
	if (p == s)
		return SG_EINVAL;
	*out = v;
	*next = p;
	return 0;
}

static int take(const char **p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - *p) < n || memcmp(*p, lit, n))
		return 0;
	*p += n;
	return 1;
}

int aud_line_parse(const char *p, size_t len, struct aud_line *out)
{
	const char *end = p + len, *q = p, *e;

	if (!take(&q, end, "{\"v\":1,\"seq\":") || parse_u64(q, end, &out->seq, &q) ||
	    !take(&q, end, ",\"ts\":\""))
		return SG_EINVAL;
	/* ts holds no escapes (the writer formats it): the next quote ends it */
	e = memchr(q, '"', (size_t)(end - q));
	if (!e)
		return SG_EINVAL;
	q = e + 1;
	if (!take(&q, end, ",\"event\":\""))
		return SG_EINVAL;
	out->event = q;
	while (q < end && ((*q >= 'a' && *q <= 'z') || *q == '_'))
		q++;
	out->event_len = (size_t)(q - out->event);
	if (q == end || *q != '"' || out->event_len == 0)
		return SG_EINVAL;
	if (len >= AUD_CHAIN_SUFFIX_LEN + (size_t)(q - p) &&
	    !memcmp(end - AUD_CHAIN_SUFFIX_LEN, ",\"chain\":\"", 10) &&
	    end[-2] == '"' && end[-1] == '}' &&
	    aud_hex_ok(end - AUD_CHAIN_SUFFIX_LEN + 10, AUD_CHAIN_HEX)) {
		out->chain = end - AUD_CHAIN_SUFFIX_LEN + 10;
		out->body_len = len - AUD_CHAIN_SUFFIX_LEN;
		return 0;
	}
	if (end[-1] != '}')
		return SG_EINVAL;
	out->chain = NULL;
	out->body_len = len - 1;
	return 0;
}

int aud_line_is(const struct aud_line *l, const char *event)
{
	size_t n = strlen(event);

	return l->event_len == n && !memcmp(l->event, event, n);
}

/*
 * "NAME": at the top level. A key written by sg_json cannot be faked
 * inside a string value: there every '"' is escaped, so the sequence
 * ,"NAME": can only be a real key.
 */
static const char *find_key(const char *p, size_t len, const char *name)
{
	char pat[64];
	int n = snprintf(pat, sizeof(pat), ",\"%s\":", name);

	if (n < 0 || (size_t)n >= sizeof(pat))
		return NULL;
	p = memmem(p, len, pat, (size_t)n);
	return p ? p + n : NULL;
}

int aud_line_rotate_link(const char *p, size_t len, int *has_seq, uint64_t *prev_seq,
			 const char **prev_chain)
{
	const char *end = p + len, *v;

	v = find_key(p, len, "prev_seq");
	if (!v)
		return SG_EINVAL;
	if (take(&v, end, "null")) {
		*has_seq = 0;
		*prev_seq = 0;
	} else if (parse_u64(v, end, prev_seq, &v) == 0) {
		*has_seq = 1;
	} else {
		return SG_EINVAL;
	}
	v = find_key(p, len, "prev_chain");
	if (!v)
		return SG_EINVAL;
	if (take(&v, end, "null")) {
		*prev_chain = NULL;
		return 0;
	}
	if (end - v < AUD_CHAIN_HEX + 2 || *v != '"' || v[AUD_CHAIN_HEX + 1] != '"' ||
	    !aud_hex_ok(v + 1, AUD_CHAIN_HEX))
		return SG_EINVAL;
	*prev_chain = v + 1;
	return 0;
}

int aud_line_flag(const char *p, size_t len, const char *name)
{
	const char *v = find_key(p, len, name);

	return v && take(&v, p + len, "true");
}

int aud_line_u64(const char *p, size_t len, const char *name, uint64_t *out)
{
	const char *v = find_key(p, len, name);

	return v ? parse_u64(v, p + len, out, &v) : SG_EINVAL;
}

/* --------------------------------------------------------------- anchor */

int aud_head_format(struct aud_mac *m, const char *file_base, uint64_t seq,
		    const char *chain, char *out, size_t outsz)
{
	char ts[40], name[600], mac[AUD_CHAIN_HEX + 1];
	struct timespec now;
	struct tm tm;
	int n, q;

	q = sg_json_quote(name, sizeof(name), file_base, strlen(file_base));
	if (q < 0)
		return SG_EINVAL;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(out, outsz, "{\"v\":1,\"file\":%s,\"seq\":%llu,\"chain\":\"%s\",\"ts\":\"%s\"",
		     name, (unsigned long long)seq, chain, ts);
	if (n < 0 || (size_t)n + AUD_CHAIN_HEX + 16 > outsz)
		return SG_EINVAL;
	if (aud_mac_begin(m) || aud_mac_update(m, head_prefix, sizeof(head_prefix) - 1) ||
	    aud_mac_update(m, out, (size_t)n) || aud_mac_update(m, "}", 1) ||
	    aud_mac_end_hex(m, mac))
		return SG_ERROR;
	n += snprintf(out + n, outsz - (size_t)n, ",\"mac\":\"%s\"}\n", mac);
	return n;
}

int aud_head_parse(struct aud_mac *m, const char *p, size_t len, struct aud_head *out)
{
	const char *end, *q = p, *f, *fe, *mac;
	char want[AUD_CHAIN_HEX + 1];
	size_t body;

	while (len && (p[len - 1] == '\n' || p[len - 1] == '\r'))
		len--;
	end = p + len;
	/* ,"mac":"HEX"} closes it */
	if (len < 9 + AUD_CHAIN_HEX + 2 + 10)
		return SG_EINVAL;
	mac = end - AUD_CHAIN_HEX - 2;
	if (memcmp(mac - 8, ",\"mac\":\"", 8) || end[-2] != '"' || end[-1] != '}' ||
	    !aud_hex_ok(mac, AUD_CHAIN_HEX))
		return SG_EINVAL;
	body = (size_t)(mac - 8 - p);
	if (!take(&q, end, "{\"v\":1,\"file\":\""))
		return SG_EINVAL;
	f = q;
	fe = memmem(q, (size_t)(end - q), "\",\"seq\":", 8);
	if (!fe || (size_t)(fe - f) >= sizeof(out->file))
		return SG_EINVAL;
	q = fe + 8;
	if (parse_u64(q, end, &out->seq, &q) || !take(&q, end, ",\"chain\":\"") ||
	    end - q < AUD_CHAIN_HEX + 1 || !aud_hex_ok(q, AUD_CHAIN_HEX) ||
	    q[AUD_CHAIN_HEX] != '"')
		return SG_EINVAL;
	memcpy(out->chain, q, AUD_CHAIN_HEX);
	out->chain[AUD_CHAIN_HEX] = '\0';
	memcpy(out->file, f, (size_t)(fe - f));
	out->file[fe - f] = '\0';
	if (aud_mac_begin(m) || aud_mac_update(m, head_prefix, sizeof(head_prefix) - 1) ||
	    aud_mac_update(m, p, body) || aud_mac_update(m, "}", 1) ||
	    aud_mac_end_hex(m, want))
		return SG_ERROR;
	return CRYPTO_memcmp(want, mac, AUD_CHAIN_HEX) ? SG_ERROR : 0;
}
