/* ELF64 sections of a CUBIN and its mutable module globals (cubin.h): a
 * bounds-checked walk over the section headers and the symbol table. Only the
 * fields needed are read, at their ELF64 offsets, so no <elf.h> dependency on
 * the host's headers and no alignment assumptions about the image. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cubin.h"

#define SHT_SYMTAB 2
#define SHT_NOBITS 8
#define STT_OBJECT 1

uint64_t kopt_elf_le(const unsigned char *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i]; /* ELF class 2 cubins are little-endian */
	return v;
}

/* The header of section i, its data not yet checked (the table is, by
 * kopt_elf_open). */
static int header_at(const struct kopt_elf *e, uint64_t i, struct kopt_elf_section *s)
{
	if (i >= e->shnum)
		return -1;
	const unsigned char *h = e->img + e->shoff + i * e->shentsize;
	s->name = kopt_elf_le(h, 4);
	s->type = kopt_elf_le(h + 4, 4);
	s->offset = kopt_elf_le(h + 24, 8);
	s->size = kopt_elf_le(h + 32, 8);
	s->link = kopt_elf_le(h + 40, 4);
	s->entsize = kopt_elf_le(h + 56, 8);
	s->data = NULL;
	return 0;
}

static int data_in_bounds(const struct kopt_elf *e, struct kopt_elf_section *s)
{
	if (s->type == SHT_NOBITS)
		return 0;
	if (s->offset > e->len || e->len - s->offset < s->size)
		return -1;
	s->data = e->img + s->offset;
	return 0;
}

int kopt_elf_open(struct kopt_elf *e, const void *image, size_t len)
{
	memset(e, 0, sizeof *e);
	const unsigned char *img = image;
	if (len < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 /* ELFCLASS64 */)
		return -1;
	e->img = img;
	e->len = len;
	e->shoff = kopt_elf_le(img + 40, 8);
	e->shentsize = kopt_elf_le(img + 58, 2);
	e->shnum = kopt_elf_le(img + 60, 2);
	uint64_t shstrndx = kopt_elf_le(img + 62, 2);
	struct kopt_elf_section names;
	if (e->shentsize < 64 || e->shoff > len || e->shnum * e->shentsize > len - e->shoff ||
	    header_at(e, shstrndx, &names) != 0 || data_in_bounds(e, &names) != 0)
		return -2;
	e->names = names.data;
	e->names_size = names.data ? names.size : 0;
	return 0;
}

int kopt_elf_section(const struct kopt_elf *e, uint64_t i, struct kopt_elf_section *s)
{
	return header_at(e, i, s) != 0 || data_in_bounds(e, s) != 0 ? -1 : 0;
}

const char *kopt_elf_string(const struct kopt_elf_section *t, uint64_t off)
{
	if (t->data == NULL || off >= t->size)
		return NULL;
	const char *s = (const char *)t->data + off;
	return memchr(s, '\0', t->size - off) ? s : NULL;
}

const char *kopt_elf_section_name(const struct kopt_elf *e, const struct kopt_elf_section *s)
{
	struct kopt_elf_section names = {.size = e->names_size, .data = e->names};
	return kopt_elf_string(&names, s->name);
}

int kopt_elf_find(const struct kopt_elf *e, const char *name, struct kopt_elf_section *s)
{
	for (uint64_t i = 0; i < e->shnum; i++) {
		header_at(e, i, s);
		const char *n = kopt_elf_section_name(e, s);
		if (n != NULL && strcmp(n, name) == 0)
			return data_in_bounds(e, s) != 0 ? -1 : 0;
	}
	return 1;
}

int kopt_cubin_globals(const void *image, size_t len, struct kopt_cubin_global *out, int max,
		       char *err, size_t errlen)
{
	struct kopt_elf e;
	int rc = kopt_elf_open(&e, image, len);
	if (rc != 0) {
		snprintf(err, errlen, "%s",
			 rc == -1 ? "not a 64-bit ELF image (CUBIN)"
				  : "CUBIN section headers are out of bounds");
		return -1;
	}
	int found = 0;
	for (uint64_t i = 0; i < e.shnum; i++) {
		struct kopt_elf_section s, strtab;
		if (kopt_elf_section(&e, i, &s) != 0) {
			snprintf(err, errlen, "CUBIN section %llu is out of bounds",
				 (unsigned long long)i);
			return -1;
		}
		if (s.type != SHT_SYMTAB || s.entsize < 24 ||
		    kopt_elf_section(&e, s.link, &strtab) != 0)
			continue;
		for (uint64_t k = 0; k < s.size / s.entsize; k++) {
			const unsigned char *sym = s.data + k * s.entsize;
			unsigned type = sym[4] & 0xf, shndx = (unsigned)kopt_elf_le(sym + 6, 2);
			struct kopt_elf_section home;
			if (type != STT_OBJECT || shndx == 0 ||
			    kopt_elf_section(&e, shndx, &home) != 0)
				continue;
			const char *sec = kopt_elf_section_name(&e, &home);
			const char *name = kopt_elf_string(&strtab, kopt_elf_le(sym, 4));
			if (sec == NULL || name == NULL || strncmp(sec, ".nv.global", 10) != 0 ||
			    (sec[10] != '\0' && strcmp(sec + 10, ".init") != 0))
				continue;
			if (found < max) {
				int too_long = strlen(name) >= sizeof out->name;
				snprintf(out[found].name, sizeof out[found].name, "%s",
					 too_long ? "" : name);
				out[found].too_long = too_long;
				out[found].size = (size_t)kopt_elf_le(sym + 16, 8);
				out[found].initialised = sec[10] != '\0';
			}
			found++;
		}
	}
	return found;
}
