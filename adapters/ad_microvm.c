/*
 * ad_microvm.c - the microvm backend (QEMU -M microvm on a tap; Firecracker
 * where its binary exists). Not implemented in this build: the backend is
 * registered so `--backend microvm` fails with a reason instead of a usage
 * error, and the network layer already provides its tap (AD_LINK_TAP).
 */
#include <stdio.h>

#include "sg.h"
#include "adapters/ad.h"
#include "sg_poison.h"

static int vm_available(const struct ad_spec *s, char *why, size_t whysz)
{
	SG_UNUSED(s);
	ad_fmt(why, whysz, "the microvm backend is not implemented in this build yet");
	return SG_EINVAL;
}

static int vm_start(struct ad_sbx *s)
{
	SG_UNUSED(s);
	return SG_EINVAL;
}

static void vm_cleanup(struct ad_sbx *s)
{
	SG_UNUSED(s);
}

const struct ad_backend ad_backend_microvm = {
	.name = "microvm",
	.link = AD_LINK_TAP,
	.available = vm_available,
	.start = vm_start,
	.cleanup = vm_cleanup,
};
