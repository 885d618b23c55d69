/*
 * main.c - the command line (DESIGN.md "Command line").
 * Exit codes: 0 ok, 1 the job failed (invalid, denied, tampered), 2 usage.
 */
#include <ares.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_log.h"
#include "adapters/ad.h"
#include "audit/aud_cmd.h"
#include "gateway/serve.h"
#include "policy/pol.h"
#include "sg_poison.h"

static int usage(FILE *f)
{
	fprintf(f,
		"usage: sandgate serve -c FILE [--check] [--log-level LEVEL]\n"
		"       sandgate policy check FILE\n"
		"       sandgate policy explain -c FILE --sandbox NAME [--json] [--no-resolve] URL|HOST[:PORT]\n"
		"       sandgate audit verify [-c CONFIG | --key SPEC] [--anchor FILE] FILE...\n"
		"       sandgate audit query [filters] FILE...\n"
		"       sandgate audit report [-c CONFIG | --key SPEC] --html OUT FILE...\n"
		"       sandgate run [-c FILE] [--backend container|gvisor|microvm] [--sandbox NAME]\n"
		"                    [--workspace DIR] [--rootfs DIR] [--gateway unix:PATH] -- CMD [ARG...]\n"
		"       sandgate version\n"
		"\n"
		"serve   run the gateway (SIGHUP reloads, SIGTERM drains, SIGUSR1 reopens the audit file)\n"
		"policy  check validates a configuration file and exits 0 (valid, warnings allowed) or 1;\n"
		"        explain shows what the policy decides for a destination: exit 0 allowed, 1 denied\n"
		"run     runs CMD in a fresh sandbox whose only network is sandgate; exits with CMD's status\n"
		"audit   verify checks the hash chain: exit 0 ok, 1 tampered (FILE:LINE: why);\n"
		"        query filters records, report writes an HTML report for reviewers\n");
	return f == stderr ? 2 : 0;
}

static int cmd_serve(int argc, char **argv)
{
	const char *config = NULL;
	int check = 0, i;

	for (i = 0; i < argc; i++) {
		if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) && i + 1 < argc) {
			config = argv[++i];
		} else if (!strcmp(argv[i], "--check")) {
			check = 1;
		} else if (!strcmp(argv[i], "--log-level") && i + 1 < argc) {
			if (sg_log_level_parse(argv[++i], &sg_log_threshold) < 0) {
				fprintf(stderr, "sandgate: --log-level: error|warn|info|debug\n");
				return 2;
			}
		} else {
			fprintf(stderr, "sandgate serve: unexpected argument \"%s\"\n", argv[i]);
			return usage(stderr);
		}
	}
	if (!config) {
		fprintf(stderr, "sandgate serve: -c FILE is required\n");
		return usage(stderr);
	}
	return gw_serve(config, check);
}

/* `policy check` warnings, compiler style, after any error format. */
static void policy_warn(void *arg, int line, int col, const char *msg)
{
	fprintf(stderr, "%s:%d:%d: warning: %s\n", (const char *)arg, line, col, msg);
}

static int cmd_policy_check(int argc, char **argv)
{
	struct sg_config *cfg = NULL;
	char err[512];
	int n;

	if (argc != 1) {
		fprintf(stderr, "sandgate policy: usage: sandgate policy check FILE\n");
		return 2;
	}
	if (pol_config_load(argv[0], &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	n = pol_check(cfg, policy_warn, argv[0]);
	pol_config_free(cfg);
	if (n < 0) {
		fprintf(stderr, "%s: out of memory\n", argv[0]);
		return 1;
	}
	if (n)
		printf("%s: ok (%d warning%s)\n", argv[0], n, n == 1 ? "" : "s");
	else
		printf("%s: ok\n", argv[0]);
	return 0;
}

static int cmd_policy_explain(int argc, char **argv)
{
	struct pol_explain_opts o = { 0 };
	struct sg_config *cfg = NULL;
	const char *config = NULL;
	char err[512];
	int i, rc;

	for (i = 0; i < argc; i++) {
		if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) && i + 1 < argc)
			config = argv[++i];
		else if (!strcmp(argv[i], "--sandbox") && i + 1 < argc)
			o.sandbox = argv[++i];
		else if (!strcmp(argv[i], "--json"))
			o.json = 1;
		else if (!strcmp(argv[i], "--no-resolve"))
			o.no_resolve = 1;
		else if (argv[i][0] != '-' && !o.target)
			o.target = argv[i];
		else
			goto usage;
	}
	if (!config || !o.sandbox || !o.target)
		goto usage;
	if (pol_config_load(config, &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	err[0] = '\0';
	rc = pol_explain(cfg, &o, stdout, err, sizeof(err));
	pol_config_free(cfg);
	if (rc == 0 || rc == 1)
		return rc;
	fprintf(stderr, "sandgate policy explain: %s\n", err);
	return rc == 2 ? 2 : 1;
usage:
	fprintf(stderr, "sandgate policy: usage: sandgate policy explain -c FILE --sandbox NAME "
		"[--json] [--no-resolve] URL|HOST[:PORT]\n");
	return 2;
}

static int cmd_policy(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "check"))
		return cmd_policy_check(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "explain"))
		return cmd_policy_explain(argc - 1, argv + 1);
	fprintf(stderr, "sandgate policy: usage: sandgate policy check|explain ...\n");
	return 2;
}

/* argv[0] is the subcommand word; each gets what follows it (aud_cmd.h). */
static int cmd_audit(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "verify"))
		return aud_cmd_verify(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "query"))
		return aud_cmd_query(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "report"))
		return aud_cmd_report(argc - 1, argv + 1);
	fprintf(stderr, "sandgate audit: usage: sandgate audit verify|query|report ...\n");
	return 2;
}

int main(int argc, char **argv)
{
	int rc;
	const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;

	/* Called as sandgate-cni (a symlink in the CNI bin dir): no args. */
	if (argc > 0 && !strcmp(base ? base + 1 : argv[0], "sandgate-cni"))
		return ad_cni_main(argc, argv);
	if (argc < 2)
		return usage(stderr);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("sandgate %s\n", SG_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return usage(stdout);
	if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS) {
		fprintf(stderr, "sandgate: c-ares initialisation failed\n");
		return 1;
	}
	if (!strcmp(argv[1], "serve"))
		rc = cmd_serve(argc - 2, argv + 2);
	else if (!strcmp(argv[1], "policy"))
		rc = cmd_policy(argc - 2, argv + 2);
	else if (!strcmp(argv[1], "audit"))
		rc = cmd_audit(argc - 2, argv + 2);
	else if (!strcmp(argv[1], "run"))
		rc = ad_run_main(argc - 2, argv + 2);
	else if (!strcmp(argv[1], "cni"))
		rc = ad_cni_main(argc - 2, argv + 2);
	else {
		fprintf(stderr, "sandgate: unknown command \"%s\"\n", argv[1]);
		rc = usage(stderr);
	}
	ares_library_cleanup();
	return rc;
}
