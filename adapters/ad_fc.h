/*
 * ad_fc.h - a Firecracker client for the microvm backend: the guest kernel
 * in the form Firecracker boots, and the API calls that configure and start
 * one microVM.
 *
 * Owns nothing between calls: each call opens and closes its own files,
 * sockets and child processes. Strings of struct ad_fc_vm are borrowed.
 * Both functions block (the CLI's contract, ad.h), each bounded in time,
 * and return 0 or a negative SG_* code with one line in err saying why
 * (no trailing newline; nothing printed).
 */
#ifndef AD_FC_H
#define AD_FC_H

#include <stddef.h>
#include <sys/types.h>

/* What PUT /boot-source, /machine-config, /network-interfaces/eth0 and
 * /drives/ws carry (field names of Firecracker's swagger/firecracker.yaml). */
struct ad_fc_vm {
	const char *kernel;     /* kernel_image_path: an ELF vmlinux (x86_64) */
	const char *initrd;     /* initrd_path */
	const char *boot_args;
	const char *tap;        /* host_dev_name of eth0 */
	const char *drive;      /* path_on_host of the drive "ws" (rw, not root), or NULL */
	int vcpus;              /* vcpu_count: 1 or even, at most 32 */
	int mem_mib;            /* mem_size_mib */
	pid_t pid;              /* the firecracker process, or 0: stop waiting for its
				 * socket once it has exited (not reaped here) */
};

/* Extract the ELF vmlinux from a bzImage into out_elf (as the kernel's
 * scripts/extract-vmlinux does: find a compression magic, decompress from
 * there with the Debian tool, keep the first ELF). An out_elf that is an
 * ELF and not older than vmlinuz is reused; a new one appears by rename,
 * so concurrent runs see the old file or the whole new one. */
int ad_fc_vmlinux(const char *vmlinuz, const char *out_elf, char *err, size_t errsz);

/* Wait up to timeout_ms for api_sock to accept, then configure the VM and
 * send InstanceStart, within the same timeout. Any answer that is not 2xx
 * fails: err gets the request, the HTTP status and Firecracker's
 * fault_message. */
int ad_fc_configure(const char *api_sock, const struct ad_fc_vm *vm, int timeout_ms, char *err,
		    size_t errsz);

#endif
