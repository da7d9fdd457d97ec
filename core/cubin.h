/* What a CUBIN declares at module scope, read from its ELF symbol table
 * without a GPU: the mutable device globals (`__device__` variables, PTX
 * `.global` state) that live in the `.nv.global` (zero-initialised) and
 * `.nv.global.init` (initialised) sections and persist across launches of a
 * loaded module. `__constant__` data (`.nv.constant*`) is read-only to
 * kernels and is not listed. */
#ifndef KOPT_CUBIN_H
#define KOPT_CUBIN_H

#include <stddef.h>
#include <stdint.h>

/* --- ELF64 sections, bounds-checked (also used by compile/nvrtc.c) --------- */

/* An opened image: borrowed, valid as long as the image is. */
struct kopt_elf {
	const unsigned char *img;
	size_t len;
	uint64_t shoff, shentsize, shnum;
	const unsigned char *names; /* the section-name string table, or NULL */
	uint64_t names_size;
};

/* One section header; data points at its bytes inside the image (checked to
 * lie within it), NULL for SHT_NOBITS. */
struct kopt_elf_section {
	uint64_t name, type, offset, size, link, entsize;
	const unsigned char *data;
};

/* Little-endian unsigned of `bytes` bytes at p (CUBINs are little-endian). */
uint64_t kopt_elf_le(const unsigned char *p, int bytes);

/* Opens a 64-bit ELF image: the whole section header table and the section
 * names must lie within it. Returns 0, -1 when the image is not a 64-bit
 * ELF, -2 when its section headers or names are out of bounds. */
int kopt_elf_open(struct kopt_elf *e, const void *image, size_t len);
/* Section i; -1 when i is past the table or its data is out of bounds. */
int kopt_elf_section(const struct kopt_elf *e, uint64_t i, struct kopt_elf_section *s);
/* The NUL-terminated string at off inside string table t, or NULL. */
const char *kopt_elf_string(const struct kopt_elf_section *t, uint64_t off);
/* The section's name, or NULL when it is not a string of the name table. */
const char *kopt_elf_section_name(const struct kopt_elf *e, const struct kopt_elf_section *s);
/* The first section named `name`: 0 and *s, 1 when there is none, -1 when
 * it is there but its data is out of bounds. */
int kopt_elf_find(const struct kopt_elf *e, const char *name, struct kopt_elf_section *s);

/* --- module globals ------------------------------------------------------- */

#define KOPT_GLOBAL_NAME_MAX 1024

struct kopt_cubin_global {
	char name[KOPT_GLOBAL_NAME_MAX]; /* the symbol as cuModuleGetGlobal names it */
	size_t size;	/* bytes */
	int initialised; /* 1: .nv.global.init, 0: .nv.global (zeroed at load) */
	int too_long;	 /* the name does not fit: name is empty, the caller must refuse */
};

/* Fills up to max entries of out with the module's mutable globals and
 * returns how many the module has (which may exceed max), or -1 with err set
 * when the image is not a 64-bit ELF. A name longer than the field is listed
 * with too_long set (never skipped: a variable kopt cannot follow is a place
 * to keep state unseen). */
int kopt_cubin_globals(const void *image, size_t len, struct kopt_cubin_global *out, int max,
		       char *err, size_t errlen);

#endif
