/*
 * pol_test_util.h - shared by the policy unit tests: a temp dir for the
 * configuration files they write (cmocka group setup/teardown), writing a
 * config text to it, and loading it (which must succeed). Included by one
 * .c file per test binary, so the functions are static.
 */
#ifndef POL_TEST_UTIL_H
#define POL_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sg.h"
#include "policy/pol.h"

static char tmpdir[64];
static char cfgpath[128];

static int group_setup(void **state)
{
	SG_UNUSED(state);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sg_unit_pol.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(cfgpath, sizeof(cfgpath), "%s/sandgate.yaml", tmpdir);
	return 0;
}

static int group_teardown(void **state)
{
	SG_UNUSED(state);
	unlink(cfgpath);
	return rmdir(tmpdir);
}

/* Write text as the config file at cfgpath. */
static void write_cfg(const char *text)
{
	FILE *f = fopen(cfgpath, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
	assert_int_equal(fclose(f), 0);
}

/* Write and load text; a load error fails the test with the message. */
static struct sg_config *load_ok(const char *text)
{
	struct sg_config *cfg = NULL;
	char err[512];

	write_cfg(text);
	if (pol_config_load(cfgpath, &cfg, err, sizeof(err)))
		fail_msg("unexpected load error: %s\n%s", err, text);
	return cfg;
}

#endif
