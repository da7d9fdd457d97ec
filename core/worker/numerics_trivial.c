/* Trivial outputs against the reference (numerics_trivial.h). */
#include "worker/numerics_trivial.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether buf (n elements of t) passes as the output. */
static int passes(enum kopt_dtype t, const void *buf, const void *ref, size_t n, double tol_rel,
		  double tol_abs)
{
	struct kopt_check_result cr;
	char msg[8];
	kopt_check_compare(t, buf, ref, n, 0, 0, &cr);
	return kopt_check_verdict(&cr, tol_rel, tol_abs, "", msg, sizeof msg) == 0;
}

static int append(char *out, size_t outlen, const char *prefix, const char *what, const char *arg)
{
	size_t len = strlen(out);
	int k = snprintf(out + len, outlen - len, "%s%s:%s%s%s", len > 0 ? " " : "", prefix, what,
			 arg != NULL ? ":" : "", arg != NULL ? arg : "");
	if (k < 0 || (size_t)k >= outlen - len) {
		out[len] = '\0'; /* it does not fit: left out */
		return 0;
	}
	return 1;
}

/* v rounded to a narrower float type and back. */
static double round_to(enum kopt_dtype narrow, double v)
{
	switch (narrow) {
	case KOPT_F16:
		return kopt_f16_to_f32(kopt_f32_to_f16((float)v));
	case KOPT_BF16:
		return kopt_bf16_to_f32(kopt_f32_to_bf16((float)v));
	default:
		return (float)v;
	}
}

int kopt_trivial_probe(enum kopt_dtype t, const void *ref, size_t n,
		       const struct kopt_trivial_source *src, int nsrc, double tol_rel_l2,
		       double tol_max_abs, const char *prefix, char *out, size_t outlen)
{
	if (n == 0 || outlen == 0)
		return 0;
	size_t es = kopt_dtype_size(t);
	void *buf = calloc(n, es);
	if (buf == NULL)
		return -1;
	int found = 0;
	/* all zeros (calloc: every type's zero is all zero bits) */
	if (passes(t, buf, ref, n, tol_rel_l2, tol_max_abs))
		found += append(out, outlen, prefix, "zeros", NULL);
	/* one value everywhere, the reference's mean (zeros again when it is
	 * 0). The word carries the value: a kernel can only write a value it
	 * knows, so it counts where both checks find the same one (a row sum
	 * that is always 1), not where each set's own mean passes (a scalar
	 * output always equals its own mean) */
	double mean = 0.0;
	for (size_t i = 0; i < n; i++)
		mean += kopt_check_load(t, ref, i);
	mean /= (double)n;
	kopt_check_store(t, buf, 0, mean);
	double value = kopt_check_load(t, buf, 0);
	if (value != 0.0) {
		for (size_t i = 1; i < n; i++)
			memcpy((char *)buf + i * es, buf, es);
		char text[40];
		snprintf(text, sizeof text, "%.9g", value);
		if (passes(t, buf, ref, n, tol_rel_l2, tol_max_abs))
			found += append(out, outlen, prefix, "constant", text);
	}
	/* a copy of an input of the same length, converted */
	for (int k = 0; k < nsrc; k++) {
		if (src[k].count != n || src[k].data == NULL)
			continue;
		if (src[k].type == t) /* (bit for bit: a double holds no 64-bit integer) */
			memcpy(buf, src[k].data, n * es);
		else
			for (size_t i = 0; i < n; i++)
				kopt_check_store(t, buf, i, kopt_check_load(src[k].type, src[k].data, i));
		if (passes(t, buf, ref, n, tol_rel_l2, tol_max_abs))
			found += append(out, outlen, prefix, "copy", src[k].name);
	}
	/* the reference itself in a narrower float type: the tolerance lets
	 * that precision through, so arithmetic in it may pass too */
	static const enum kopt_dtype narrower[] = {KOPT_F32, KOPT_F16, KOPT_BF16};
	for (size_t k = 0; k < sizeof narrower / sizeof narrower[0]; k++) {
		enum kopt_dtype nt = narrower[k];
		int narrows = (t == KOPT_F64) || (t == KOPT_F32 && nt != KOPT_F32);
		if (!narrows)
			continue;
		size_t changed = 0;
		for (size_t i = 0; i < n; i++) {
			double v = kopt_check_load(t, ref, i), r = round_to(nt, v);
			changed += r != v;
			kopt_check_store(t, buf, i, r);
		}
		/* (a reference the narrower type holds exactly says nothing) */
		if (changed > 0 && passes(t, buf, ref, n, tol_rel_l2, tol_max_abs))
			found += append(out, outlen, prefix, "round", kopt_dtype_name(nt));
	}
	free(buf);
	return found;
}

/* Whether the space-separated list has the word w (wlen bytes). */
static int has_word(const char *list, const char *w, size_t wlen)
{
	for (const char *p = list; *p != '\0';) {
		while (*p == ' ')
			p++;
		size_t len = strcspn(p, " ");
		if (len == wlen && len > 0 && strncmp(p, w, len) == 0)
			return 1;
		p += len;
	}
	return 0;
}

void kopt_trivial_intersect(char *a, const char *b)
{
	char *dst = a;
	for (const char *p = a; *p != '\0';) {
		while (*p == ' ')
			p++;
		size_t len = strcspn(p, " ");
		if (len > 0 && has_word(b, p, len)) {
			if (dst != a)
				*dst++ = ' ';
			memmove(dst, p, len);
			dst += len;
		}
		p += len;
	}
	*dst = '\0';
}
