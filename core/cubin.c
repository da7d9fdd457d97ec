/* Mutable module globals of a CUBIN (cubin.h): a bounds-checked walk over the
 * ELF64 section headers and the symbol table. Only the fields needed are
 * read, at their ELF64 offsets, so no <elf.h> dependency on the host's
 * headers and no alignment assumptions about the image. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cubin.h"

static uint64_t rd(const unsigned char *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i]; /* ELF class 2 cubins are little-endian */
	return v;
}

struct section {
	uint64_t name, type, offset, size, link, entsize;
};

static int section_at(const unsigned char *img, size_t len, uint64_t shoff, uint64_t shentsize,
		      uint64_t i, struct section *s)
{
	uint64_t off = shoff + i * shentsize;
	if (shentsize < 64 || off > len || len - off < 64)
		return -1;
	const unsigned char *h = img + off;
	s->name = rd(h, 4);
	s->type = rd(h + 4, 4);
	s->offset = rd(h + 24, 8);
	s->size = rd(h + 32, 8);
	s->link = rd(h + 40, 4);
	s->entsize = rd(h + 56, 8);
	if (s->type != 8 /* SHT_NOBITS */ && (s->offset > len || len - s->offset < s->size))
		return -1;
	return 0;
}

/* NUL-terminated string at off inside table t, or NULL. */
static const char *string_at(const unsigned char *img, const struct section *t, uint64_t off)
{
	if (off >= t->size)
		return NULL;
	const char *s = (const char *)img + t->offset + off;
	return memchr(s, '\0', t->size - off) ? s : NULL;
}

int kopt_cubin_globals(const void *image, size_t len, struct kopt_cubin_global *out, int max,
		       char *err, size_t errlen)
{
	const unsigned char *img = image;
	if (len < 64 || memcmp(img, "\177ELF", 4) != 0 || img[4] != 2 /* ELFCLASS64 */) {
		snprintf(err, errlen, "not a 64-bit ELF image (CUBIN)");
		return -1;
	}
	uint64_t shoff = rd(img + 40, 8), shentsize = rd(img + 58, 2), shnum = rd(img + 60, 2),
		 shstrndx = rd(img + 62, 2);
	struct section names, s;
	if (shstrndx >= shnum || section_at(img, len, shoff, shentsize, shstrndx, &names) != 0) {
		snprintf(err, errlen, "CUBIN section headers are out of bounds");
		return -1;
	}
	int found = 0;
	for (uint64_t i = 0; i < shnum; i++) {
		struct section strtab;
		if (section_at(img, len, shoff, shentsize, i, &s) != 0) {
			snprintf(err, errlen, "CUBIN section %llu is out of bounds",
				 (unsigned long long)i);
			return -1;
		}
		if (s.type != 2 /* SHT_SYMTAB */ || s.entsize < 24 || s.link >= shnum ||
		    section_at(img, len, shoff, shentsize, s.link, &strtab) != 0)
			continue;
		for (uint64_t k = 0; k < s.size / s.entsize; k++) {
			const unsigned char *sym = img + s.offset + k * s.entsize;
			unsigned type = sym[4] & 0xf, shndx = (unsigned)rd(sym + 6, 2);
			struct section home;
			if (type != 1 /* STT_OBJECT */ || shndx == 0 || shndx >= shnum ||
			    section_at(img, len, shoff, shentsize, shndx, &home) != 0)
				continue;
			const char *sec = string_at(img, &names, home.name);
			const char *name = string_at(img, &strtab, rd(sym, 4));
			if (sec == NULL || name == NULL || strncmp(sec, ".nv.global", 10) != 0 ||
			    (sec[10] != '\0' && strcmp(sec + 10, ".init") != 0))
				continue;
			if (strlen(name) >= sizeof out->name)
				continue;
			if (found < max) {
				snprintf(out[found].name, sizeof out[found].name, "%s", name);
				out[found].size = (size_t)rd(sym + 16, 8);
				out[found].initialised = sec[10] != '\0';
			}
			found++;
		}
	}
	return found;
}
