/* What a CUBIN declares at module scope, read from its ELF symbol table
 * without a GPU: the mutable device globals (`__device__` variables, PTX
 * `.global` state) that live in the `.nv.global` (zero-initialised) and
 * `.nv.global.init` (initialised) sections and persist across launches of a
 * loaded module. `__constant__` data (`.nv.constant*`) is read-only to
 * kernels and is not listed. */
#ifndef KOPT_CUBIN_H
#define KOPT_CUBIN_H

#include <stddef.h>

struct kopt_cubin_global {
	char name[128]; /* the symbol as cuModuleGetGlobal names it */
	size_t size;	/* bytes */
	int initialised; /* 1: .nv.global.init, 0: .nv.global (zeroed at load) */
};

/* Fills up to max entries of out with the module's mutable globals and
 * returns how many the module has (which may exceed max), or -1 with err set
 * when the image is not a 64-bit ELF. Names longer than the field are
 * skipped: cuModuleGetGlobal could not be asked for them by this list. */
int kopt_cubin_globals(const void *image, size_t len, struct kopt_cubin_global *out, int max,
		       char *err, size_t errlen);

#endif
