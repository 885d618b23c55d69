/* libFuzzer target for lib/sg_jsonp.c: the control API body parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_jsonp.h"

#define CHECK(x) do { if (!(x)) abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sg_jsonp_tok t[256];
	const char *s = (const char *)data;
	size_t off = 0;
	int n = sg_jsonp_parse(s, size, t, 256, &off), i;
	char buf[512];

	CHECK(n > 0 || n == SG_ERROR || n == SG_ENOMEM);
	if (n <= 0) {
		CHECK(n == SG_ENOMEM || off <= size);
		return 0;
	}
	for (i = 0; i < n; i++) {
		CHECK(t[i].start <= t[i].end && t[i].end <= size);
		CHECK(t[i].next > (size_t)i && t[i].next <= (size_t)n);
		if (t[i].type == SG_JSON_STRING) {
			int k = sg_jsonp_str(s, &t[i], buf, sizeof(buf));

			CHECK(k == SG_ERROR || k == SG_ENOMEM || (k >= 0 && (size_t)k < sizeof(buf)));
		}
	}
	CHECK(t[0].next == (size_t)n);
	return 0;
}
