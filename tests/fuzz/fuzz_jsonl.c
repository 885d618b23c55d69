/*
 * fuzz_jsonl.c - libFuzzer target for the audit line scanner and record
 * view (audit/aud_jsonl.c).
 *
 * Beyond "no crash under ASan/UBSan" it checks what query and report rely
 * on: every view lies inside the line; the iterator, aud_jsonl_check and
 * aud_jsonl_find agree; a string the scanner accepted always decodes,
 * within raw length + 1 bytes, to valid UTF-8 (NUL allowed); array walks
 * end; the record view never needs more scratch than len + 1; cleaned
 * text holds no control byte. The same bytes also drive the time parser
 * and, split at the first NUL into pattern and subject, the glob (whose
 * cost must stay O(pattern x subject)). Seeds: tests/fuzz/corpus/fuzz_jsonl/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "audit/aud_jsonl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Not assert(): the checks must hold in NDEBUG builds too. */
#define CHECK(x) do { if (!(x)) abort(); } while (0)

static int inside(const void *p, size_t n, const void *base, size_t len)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;

	return p != NULL && a >= b && n <= len && a - b <= len - n;
}

/* Valid UTF-8, where a NUL byte counts as valid (it came from \u0000). */
static int utf8_ok(const unsigned char *p, size_t n)
{
	size_t i = 0, k, len;

	while (i < n) {
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		len = p[i] >= 0xf0 ? 4 : p[i] >= 0xe0 ? 3 : p[i] >= 0xc2 ? 2 : 0;
		if (!len || p[i] > 0xf4 || n - i < len)
			return 0;
		for (k = 1; k < len; k++)
			if ((p[i + k] & 0xc0) != 0x80)
				return 0;
		i += len;
	}
	return 1;
}

static void check_string(const struct aud_jval *v, const uint8_t *data, size_t size,
			 char *buf)
{
	int n, again;

	CHECK(v->type == AUD_J_STRING);
	CHECK(inside(v->p, v->n, data, size));
	/* the quotes around the view are in the line too */
	CHECK((const uint8_t *)v->p > data && v->p[-1] == '"' && v->p[v->n] == '"');
	CHECK(v->esc == (memchr(v->p, '\\', v->n) != NULL));
	n = aud_jsonl_str(v, buf, v->n + 1);
	CHECK(n >= 0 && (size_t)n <= v->n && buf[n] == '\0');
	CHECK(utf8_ok((const unsigned char *)buf, (size_t)n));
	if (!v->esc)
		CHECK((size_t)n == v->n && !memcmp(buf, v->p, v->n));
	CHECK(aud_jsonl_str(v, buf, v->n) == SG_EINVAL || v->n == 0);
	again = aud_jsonl_str(v, buf, v->n + 1);
	CHECK(again == n);
}

static void check_value(const struct aud_jval *v, const uint8_t *data, size_t size,
			char *buf)
{
	struct aud_jval e;
	size_t off = 0, count = 0;
	int rc;
	int64_t i64;

	switch (v->type) {
	case AUD_J_STRING:
		check_string(v, data, size, buf);
		break;
	case AUD_J_ARRAY:
		CHECK(inside(v->p, v->n, data, size));
		CHECK(v->n >= 2 && v->p[0] == '[' && v->p[v->n - 1] == ']');
		while ((rc = aud_jsonl_arr_next(v, &off, &e)) == 1) {
			CHECK(inside(e.p, e.n, v->p, v->n));
			check_string(&e, data, size, buf);
			CHECK(++count <= v->n);
		}
		CHECK(rc == 0);     /* the scanner accepted it: the walk must too */
		break;
	case AUD_J_NUMBER:
		CHECK(inside(v->p, v->n, data, size) && v->n > 0);
		if (aud_jsonl_int(v, &i64) == 0)
			CHECK(memchr(v->p, '.', v->n) == NULL);
		break;
	case AUD_J_TRUE:
	case AUD_J_FALSE:
	case AUD_J_NULL:
		CHECK(inside(v->p, v->n, data, size));
		break;
	default:
		CHECK(0);
	}
}

static void check_clean(const char *s, size_t n, char *out, size_t cap)
{
	size_t i, cols;

	cols = aud_text_clean(s, n, 40, out, cap);
	CHECK(cols <= 40);
	CHECK(strlen(out) < cap);
	for (i = 0; out[i]; i++)
		CHECK((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
	CHECK(utf8_ok((const unsigned char *)out, strlen(out)));
}

static void check_record(const uint8_t *data, size_t size, int valid)
{
	struct aud_recv r;
	const char *why = NULL;
	char *scratch = malloc(size + 1), out[256];
	int rc;

	if (!scratch)
		return;
	rc = aud_recv_parse((const char *)data, size, &r, scratch, size + 1, &why);
	CHECK(rc == 0 || rc == SG_ERROR);
	if (rc == 0) {
		CHECK(valid);
		CHECK(r.event.p && r.ts.p);
		CHECK(inside(r.event.p, r.event.n, scratch, size + 1));
		if (r.dst_host.p)
			check_clean(r.dst_host.p, r.dst_host.n, out, sizeof(out));
		if (r.path.p)
			check_clean(r.path.p, r.path.n, out, sizeof(out));
		(void)aud_recv_has_secret(&r, "openai");
	} else {
		CHECK(why != NULL);
		/* the scratch buffer is always big enough: never the reason */
		CHECK(strcmp(why, "record larger than the scratch buffer") != 0);
	}
	free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aud_jsonl_it it;
	struct aud_jval k, v, f;
	char *buf, keybuf[64];
	const uint8_t *nul;
	int rc, members = 0, kn;
	int64_t us;

	if (size > AUD_JSONL_LINE_MAX)
		return 0;
	buf = malloc(size + 1);
	if (!buf)
		return 0;
	aud_jsonl_it_init(&it, (const char *)data, size);
	while ((rc = aud_jsonl_it_next(&it, &k, &v)) == 1) {
		members++;
		check_string(&k, data, size, buf);
		check_value(&v, data, size, buf);
		/* find agrees with the walk: same value, or the key is duplicated */
		if (k.n + 1 <= sizeof(keybuf) &&
		    (kn = aud_jsonl_str(&k, keybuf, sizeof(keybuf))) >= 0 &&
		    memchr(keybuf, '\0', (size_t)kn) == NULL) {
			int frc = aud_jsonl_find((const char *)data, size, keybuf, &f);

			CHECK(frc == 0 || frc == SG_ERROR);
			if (frc == 0)
				CHECK(f.p == v.p && f.n == v.n && f.type == v.type);
		}
	}
	CHECK(rc == 0 || rc == SG_ERROR);
	CHECK(aud_jsonl_it_next(&it, &k, &v) == rc);    /* sticky end / error */
	CHECK(aud_jsonl_check((const char *)data, size) == rc);
	if (rc == 0)
		CHECK(members > 0 || memchr(data, '}', size) != NULL);
	check_record(data, size, rc == 0);

	/* the same bytes as a time, and as pattern NUL subject for the glob */
	(void)aud_time_parse((const char *)data, size, &us);
	nul = memchr(data, '\0', size);
	if (nul) {
		const char *pat = (const char *)data;
		const char *s = (const char *)nul + 1;
		size_t n = size - (size_t)(nul - data) - 1;

		(void)aud_glob(pat, s, n, 0);
		(void)aud_glob(pat, s, n, 1);
	}
	free(buf);
	return 0;
}
