/* Host-side data and correctness math for GPU evaluation: element types,
 * fp16/bf16 conversion, seeded input generation, NaN poison patterns, and the
 * comparison of a candidate's output against the reference's (relative L2
 * error, max-abs error, NaN/Inf and unwritten counts), all in double.
 * No CUDA here: everything is testable on a machine without a GPU. */
#ifndef KOPT_CHECK_H
#define KOPT_CHECK_H

#include <stddef.h>
#include <stdint.h>

enum kopt_dtype {
	KOPT_F32,
	KOPT_F16,
	KOPT_BF16,
	KOPT_F64,
	KOPT_I32,
	KOPT_I64,
	KOPT_U32,
	KOPT_I8,
	KOPT_U8,
	KOPT_I16,
	KOPT_U16,
	KOPT_U64,
	KOPT_DTYPE_COUNT
};

/* Input distributions. Floats: NORMAL N(0,1), UNIFORM [-1,1], UNIFORM01 [0,1).
 * Integers: NORMAL round(N(0,16)), UNIFORM [-64,64] ([0,64] if unsigned),
 * UNIFORM01 {0,1}. ARANGE i (wrapped to the type), CONSTANT `value`. */
enum kopt_dist {
	KOPT_DIST_NORMAL,
	KOPT_DIST_UNIFORM,
	KOPT_DIST_UNIFORM01,
	KOPT_DIST_CONSTANT,
	KOPT_DIST_ARANGE,
	KOPT_DIST_COUNT,
	/* check 2's stand-in for a float constant c (never a spec's name): c,
	 * with about one element in 2048 (at least one) moved off it */
	KOPT_DIST_NEAR = KOPT_DIST_COUNT,
	/* the same for a float arange: element i is i but for a few moved off */
	KOPT_DIST_NEAR_ARANGE
};

/* -1 when unknown. Names: "f32" "f16" "bf16" "f64" "i32" "i64" "u32" "i8" "u8"
 * "i16" "u16" "u64". */
int kopt_dtype_parse(const char *name);
const char *kopt_dtype_name(enum kopt_dtype t);
size_t kopt_dtype_size(enum kopt_dtype t);
int kopt_dtype_is_float(enum kopt_dtype t);

/* "normal" "uniform" "uniform01" "constant" "arange", plus "zeros"/"ones"
 * (constant 0/1: *value is set). -1 when unknown. */
int kopt_dist_parse(const char *name, double *value);
const char *kopt_dist_name(enum kopt_dist d);
/* The distribution of the second correctness trial: another one with a
 * different range, so a kernel right only on [0,1) (or only on signed data)
 * fails it. A float constant gets a few elements moved off it
 * (KOPT_DIST_NEAR), so a kernel that assumes the constant, or samples the
 * input to find it and stops reading, fails too, unless the spec marks it
 * `fixed`; so does a float arange
 * (KOPT_DIST_NEAR_ARANGE); integer constants (flags, sizes) and integer
 * aranges (indices) keep their own. */
enum kopt_dist kopt_dist_alternate(enum kopt_dist d, enum kopt_dtype t, int fixed);

uint16_t kopt_f32_to_f16(float f); /* round to nearest even, with overflow to inf */
float kopt_f16_to_f32(uint16_t h);
uint16_t kopt_f32_to_bf16(float f); /* round to nearest even; NaN stays NaN */
float kopt_bf16_to_f32(uint16_t h);

/* Element i of a typed array as double. */
double kopt_check_load(enum kopt_dtype t, const void *data, size_t i);
/* Stores v into element i (rounded / saturated to the type). */
void kopt_check_store(enum kopt_dtype t, void *data, size_t i, double v);

/* Fills n elements; the stream is a pure function of (seed, stream id). */
void kopt_check_fill(enum kopt_dtype t, void *data, size_t n, enum kopt_dist d, double value,
		     uint64_t seed, uint64_t stream);
/* The same, with the normal, uniform and uniform01 draws multiplied by
 * `scale` before they are rounded (and, for integers, clamped) to the type
 * (the range probe's inputs: the same draws, larger). Other distributions
 * ignore it. */
void kopt_check_fill_scaled(enum kopt_dtype t, void *data, size_t n, enum kopt_dist d, double value,
			    double scale, uint64_t seed, uint64_t stream);
/* The same with the scale on some elements only: one in `every` (by a hash
 * of the index) and one chosen element; every = UINT64_MAX: that element
 * alone; 0: all of them (kopt_check_fill_scaled). */
void kopt_check_fill_sparse(enum kopt_dtype t, void *data, size_t n, enum kopt_dist d, double value,
			    double scale, uint64_t every, uint64_t seed, uint64_t stream);

/* A 32-bit word to memset (cuMemsetD32) over an output buffer such that every
 * element of type t reads as NaN (floats; the payload and sign change with
 * `nonce`) or as a nonce-dependent pattern (integers). */
uint32_t kopt_check_poison_word(enum kopt_dtype t, uint64_t nonce);
/* Whether element i still holds the poison written with `word`. */
int kopt_check_is_poison(enum kopt_dtype t, const void *data, size_t i, uint32_t word);

struct kopt_check_result {
	size_t count;	  /* elements compared */
	size_t nonfinite; /* NaN or Inf in the candidate's output */
	size_t unwritten; /* elements still holding the poison */
	size_t first_bad; /* index of the first nonfinite/unwritten element, or count */
	double max_abs;	  /* max |out - ref| over finite elements */
	double rel_l2;	  /* ||out - ref|| / ||ref|| (plain ||out - ref|| if ref is 0) */
	double ref_norm;
	size_t worst_at;   /* index of the largest |out - ref| (the first one, on ties) */
	double worst_got;  /* out there */
	double worst_want; /* ref there */
	/* 64-bit integer outputs: the worst element's own values (a double
	 * cannot hold them), for the messages; worst_int 1 signed, 2 unsigned */
	int worst_int;
	uint64_t worst_got_bits, worst_want_bits;
};

/* Compares n elements. `poison` is the word the output was poisoned with
 * (kopt_check_poison_word); pass has_poison = 0 for outputs never poisoned. */
void kopt_check_compare(enum kopt_dtype t, const void *out, const void *ref, size_t n,
			uint32_t poison, int has_poison, struct kopt_check_result *res);

/* Copies the box [lo, hi) of an nd-dimensional array (dims outermost
 * first, elements of elem bytes, row-major) into dst, contiguous; returns
 * the number of elements copied. The box must lie inside dims. */
size_t kopt_check_gather(size_t elem, const void *src, void *dst, int nd, const size_t *dims,
			 const size_t *lo, const size_t *hi);

/* The copies that pack the same box on the device (compare_dev.c): the
 * innermost three dims (1 where the box has fewer) by one 3D copy of
 * `depth` slices of `rows` rows of `width` bytes, from `src` bytes into the
 * array (pitch `pitch` bytes a row, `height` rows a slice) to `dst` bytes
 * into the packed box, one such copy per index of the outer dims, in
 * kopt_check_gather's order. Fills at most max copies and returns how many
 * the box needs (0 for an empty box). */
struct kopt_box_copy {
	size_t src, dst;	     /* byte offsets of the copy's first element */
	size_t pitch, height;	     /* the array's row bytes and slice rows */
	size_t width, rows, depth; /* the copied block: bytes, rows, slices */
};
size_t kopt_box_copies(size_t elem, int nd, const size_t *dims, const size_t *lo, const size_t *hi,
		       struct kopt_box_copy *out, size_t max);

/* The index in the whole array of the k-th element kopt_check_gather copies
 * from the box [lo, hi) (k past the box's end: the whole array's count), so
 * a message about a region names the element as the spec's indices do. */
size_t kopt_check_region_index(int nd, const size_t *dims, const size_t *lo, const size_t *hi,
			       size_t k);

/* For an output that starts as a copy of an input (init): the elements the
 * reference changed and the candidate left bit for bit as they started.
 * Such an element was not written (or was written with its old value where
 * the reference computed another): either way the candidate is wrong there.
 * *first gets the index of the first one (n when none). */
size_t kopt_check_stale(enum kopt_dtype t, const void *out, const void *ref, const void *init,
			size_t n, size_t *first);

/* Default tolerances by output type, used when the spec gives none:
 * rel_l2 f32 1e-5, f16 2e-3, bf16 1e-2, f64 1e-12, integers exact (0).
 * "tf32" is recognised by kopt_check_tolerance_named (5e-4). */
double kopt_check_default_rel_l2(enum kopt_dtype t);
/* rel_l2 tolerance for a precision name ("f32", "tf32", "f16", "bf16",
 * "f64"), or a negative number when unknown. */
double kopt_check_tolerance_named(const char *precision);

/* Formats one sentence on why `res` fails the tolerances, into msg; returns 1
 * when it fails, 0 when it passes. max_abs_tol < 0: no absolute bound from
 * the spec; then the worst element's error must stay within
 * KOPT_CHECK_ELEMENT_FACTOR * rel_l2_tol of its reference value's magnitude
 * (or of the reference's RMS, when larger). */
#define KOPT_CHECK_ELEMENT_FACTOR 20
int kopt_check_verdict(const struct kopt_check_result *res, double rel_l2_tol, double max_abs_tol,
		       const char *what, char *msg, size_t msglen);

#endif
