/*
 * aud_bench.c - audit writer and verify throughput (tests/bench/audit_bench.sh).
 *
 *   aud_bench DIR [RECORDS]
 * Writes RECORDS (default 300000) typical connection records through the
 * real writer thread with the chain and fsync: batch into DIR/bench.jsonl,
 * timing from the first submit until the writer has written the last one;
 * then verifies the file and reports MB/s. Prints a small table. Not a test:
 * it asserts nothing beyond "the file verifies".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sg.h"
#include "audit/aud.h"
#include "audit/aud_verify.h"
#include "sg_poison.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	long n = argc > 2 ? atol(argv[2]) : 300000, i;
	char path[512], err[256];
	struct aud_config ac = { .path = path, .fsync_mode = AUD_FSYNC_BATCH,
				 .key_spec = "env:SG_BENCH_AUDIT_KEY" };
	struct aud_verify_result res;
	const char *files[1] = { path };
	struct aud_writer *a;
	struct aud_key key;
	struct aud_rec r;
	struct stat st;
	double t0, t1, t2, t3;
	int rc;

	setenv("SG_BENCH_AUDIT_KEY", "bench-key-0123456789abcdef0123456789", 1);
	snprintf(path, sizeof(path), "%s/bench.jsonl", dir);
	unlink(path);
	a = aud_open(&ac, err, sizeof(err));
	if (!a) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	t0 = now_s();
	for (i = 0; i < n; i++) {
		/* the shape of a real CONNECT record (gateway/conn.c) */
		aud_rec_begin(&r, "connection");
		aud_rec_decision(&r, "agent-*", "allow", "rule_allow", "openai");
		sg_json_str(&r.j, "src", "10.200.0.2:49464");
		sg_json_str(&r.j, "dst_host", "api.openai.com");
		sg_json_str(&r.j, "dst_ip", "162.159.140.245");
		sg_json_int(&r.j, "dst_port", 443);
		sg_json_str(&r.j, "sni", "api.openai.com");
		sg_json_str(&r.j, "alpn", "h2,http/1.1");
		sg_json_str(&r.j, "tls", "passthrough");
		sg_json_int(&r.j, "bytes_up", 746 + i % 1000);
		sg_json_int(&r.j, "bytes_down", 15250 + i % 7777);
		sg_json_int(&r.j, "duration_ms", 48 + i % 100);
		while (aud_rec_submit(a, &r) < 0)
			usleep(1000);   /* never: queue_max is far above what we queue */
	}
	t1 = now_s();
	while (aud_written(a) < (uint64_t)n)
		usleep(200);
	t2 = now_s();
	aud_close(a);
	if (stat(path, &st) < 0)
		return 1;
	if (aud_key_load("env:SG_BENCH_AUDIT_KEY", &key, err, sizeof(err)) < 0)
		return 1;
	t3 = now_s();
	rc = aud_verify_files(files, 1, &key, &res);
	t3 = now_s() - t3;
	aud_key_free(&key);
	if (rc != 0) {
		fprintf(stderr, "verify: %s\n", res.where);
		return 1;
	}
	printf("%-34s %12s %12s\n", "audit (chain, fsync: batch)", "value", "goal");
	printf("%-34s %12.0f %12s\n", "writer records/s", (double)n / (t2 - t0), ">= 200000");
	printf("%-34s %12.0f %12s\n", "  submit records/s (producer)", (double)n / (t1 - t0), "");
	printf("%-34s %12.0f %12s\n", "  mean record bytes", (double)st.st_size / (double)n, "");
	printf("%-34s %12.1f %12s\n", "verify MB/s", (double)st.st_size / 1e6 / t3, ">= 100");
	printf("%-34s %12.0f %12s\n", "  verify records/s", (double)res.records / t3, "");
	unlink(path);
	snprintf(path, sizeof(path), "%s/bench.jsonl.head", dir);
	unlink(path);
	return 0;
}
