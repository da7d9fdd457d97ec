/* Outputs a kernel could write without computing the problem (zeros, one
 * value, a copy of an input, the reference in a narrower float type), tried
 * against the reference's output with the spec's tolerance. One that passes
 * in both checks means the spec cannot tell that kernel from an honest one:
 * kopt says so when a run starts (docs/TRUST.md, "Specs a trivial kernel
 * passes"). Host math only, like numerics.h. */
#ifndef KOPT_WORKER_NUMERICS_TRIVIAL_H
#define KOPT_WORKER_NUMERICS_TRIVIAL_H

#include <stddef.h>

#include "worker/numerics.h"

/* An input array a kernel could copy into the output. */
struct kopt_trivial_source {
	const char *name;
	enum kopt_dtype type;
	const void *data;
	size_t count;
};

/* Appends to out (a NUL-terminated list of words separated by spaces,
 * outlen bytes in all) one word per trivial output that passes the
 * comparison with the n elements of ref (type t) within the tolerances
 * (kopt_check_verdict's rules): "PREFIX:zeros", "PREFIX:constant:VALUE",
 * "PREFIX:copy:NAME" (a source of n elements, converted to t) and
 * "PREFIX:round:f32|f16|bf16" (a float output rounded to a narrower type).
 * Returns the number of words appended, or -1 when out of host memory. A
 * word that does not fit is left out. */
int kopt_trivial_probe(enum kopt_dtype t, const void *ref, size_t n,
		       const struct kopt_trivial_source *src, int nsrc, double tol_rel_l2,
		       double tol_max_abs, const char *prefix, char *out, size_t outlen);

/* Keeps in a only the words that b holds too (both lists as above). */
void kopt_trivial_intersect(char *a, const char *b);

#endif
