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
#include "gateway/serve.h"
#include "policy/pol.h"
#include "sg_poison.h"

static int usage(FILE *f)
{
	fprintf(f,
		"usage: sandgate serve -c FILE [--check] [--log-level LEVEL]\n"
		"       sandgate policy check FILE\n"
		"       sandgate version\n"
		"\n"
		"serve   run the gateway (SIGHUP reloads, SIGTERM drains, SIGUSR1 reopens the audit file)\n"
		"policy  check validates a configuration file and exits 0 (valid) or 1\n");
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

static int cmd_policy(int argc, char **argv)
{
	struct sg_config *cfg = NULL;
	char err[512];

	if (argc != 2 || strcmp(argv[0], "check")) {
		fprintf(stderr, "sandgate policy: usage: sandgate policy check FILE\n");
		return 2;
	}
	if (pol_config_load(argv[1], &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	printf("%s: ok\n", argv[1]);
	pol_config_free(cfg);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

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
	else {
		fprintf(stderr, "sandgate: unknown command \"%s\"\n", argv[1]);
		rc = usage(stderr);
	}
	ares_library_cleanup();
	return rc;
}
