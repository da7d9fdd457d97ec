#ifndef KOPT_EMBEDDED_H
#define KOPT_EMBEDDED_H
#include <stddef.h>

/* The built-in Lua sources, by path relative to the source tree
 * ("lua/kopt/engine.lua", "strategies/random.lua"); NULL-terminated. */
struct kopt_embedded_file {
	const char *path;
	const char *text;
	size_t len;
};

extern const struct kopt_embedded_file kopt_embedded_files[];

#endif
