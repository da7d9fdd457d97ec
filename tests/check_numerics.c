/* Check suite for core/check.c: the correctness math of GPU evaluation
 * (dtype conversions, seeded inputs, poison patterns, error norms and
 * verdicts), all on host arrays. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "worker/numerics.h"
#include "worker/numerics_trivial.h"

static float f(uint32_t bits)
{
	float v;
	memcpy(&v, &bits, 4);
	return v;
}

START_TEST(test_f16_round_trip_exhaustive)
{
	/* every finite f16 survives f16 -> f32 -> f16 unchanged; NaNs stay NaN */
	for (uint32_t h = 0; h <= 0xffff; h++) {
		float v = kopt_f16_to_f32((uint16_t)h);
		uint16_t back = kopt_f32_to_f16(v);
		if (isnan(v))
			ck_assert(isnan(kopt_f16_to_f32(back)));
		else
			ck_assert_uint_eq(back, h);
	}
}
END_TEST

START_TEST(test_f16_rounding)
{
	ck_assert_uint_eq(kopt_f32_to_f16(1.0f), 0x3c00);
	ck_assert_uint_eq(kopt_f32_to_f16(-2.0f), 0xc000);
	ck_assert_uint_eq(kopt_f32_to_f16(65504.0f), 0x7bff);
	ck_assert_uint_eq(kopt_f32_to_f16(65520.0f), 0x7c00); /* rounds up to inf */
	ck_assert_uint_eq(kopt_f32_to_f16(1e-8f), 0x0000); /* below half the smallest subnormal */
	ck_assert_uint_eq(kopt_f32_to_f16(5.9604645e-8f), 0x0001); /* smallest subnormal */
	/* 1 + 2^-11 is halfway between 1 and the next f16: ties to even (1.0) */
	ck_assert_uint_eq(kopt_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
	/* 1 + 3*2^-11 is halfway between 0x3c01 and 0x3c02: ties to even (0x3c02) */
	ck_assert_uint_eq(kopt_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
	ck_assert_uint_eq(kopt_f32_to_f16(f(0x7f800000u)), 0x7c00);
	ck_assert(isnan(kopt_f16_to_f32(kopt_f32_to_f16(f(0x7fc00000u)))));
}
END_TEST

START_TEST(test_bf16)
{
	ck_assert_uint_eq(kopt_f32_to_bf16(1.0f), 0x3f80);
	ck_assert_uint_eq(kopt_f32_to_bf16(-3.0f), 0xc040);
	/* 1 + 2^-8 is halfway: ties to even (1.0); 1 + 3*2^-8 rounds up */
	ck_assert_uint_eq(kopt_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
	ck_assert_uint_eq(kopt_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
	ck_assert(isnan(kopt_bf16_to_f32(kopt_f32_to_bf16(f(0x7f800001u)))));
	for (uint32_t h = 0; h <= 0xffff; h++) {
		float v = kopt_bf16_to_f32((uint16_t)h);
		if (!isnan(v))
			ck_assert_uint_eq(kopt_f32_to_bf16(v), h);
	}
}
END_TEST

START_TEST(test_fill_seeded_and_distributions)
{
	enum { N = 100001 };
	float *a = malloc(N * 4), *b = malloc(N * 4), *c = malloc(N * 4);
	kopt_check_fill(KOPT_F32, a, N, KOPT_DIST_NORMAL, 0, 42, 0);
	kopt_check_fill(KOPT_F32, b, N, KOPT_DIST_NORMAL, 0, 42, 0);
	kopt_check_fill(KOPT_F32, c, N, KOPT_DIST_NORMAL, 0, 42, 1);
	ck_assert_mem_eq(a, b, N * 4);
	ck_assert(memcmp(a, c, N * 4) != 0); /* another stream, other numbers */
	double sum = 0, sq = 0;
	for (int i = 0; i < N; i++)
		sum += a[i], sq += (double)a[i] * a[i];
	double mean = sum / N, var = sq / N - mean * mean;
	ck_assert_double_lt(fabs(mean), 0.02);
	ck_assert_double_lt(fabs(var - 1.0), 0.03);

	kopt_check_fill(KOPT_F32, a, N, KOPT_DIST_UNIFORM, 0, 1, 0);
	int neg = 0;
	for (int i = 0; i < N; i++) {
		ck_assert(a[i] >= -1.0f && a[i] <= 1.0f);
		neg += a[i] < 0;
	}
	ck_assert_int_gt(neg, N / 3); /* signed data, really */
	kopt_check_fill(KOPT_F32, a, N, KOPT_DIST_UNIFORM01, 0, 1, 0);
	for (int i = 0; i < N; i++)
		ck_assert(a[i] >= 0.0f && a[i] < 1.0f);
	kopt_check_fill(KOPT_F32, a, N, KOPT_DIST_CONSTANT, 3.5, 1, 0);
	ck_assert(a[0] == 3.5f && a[N - 1] == 3.5f);

	int8_t i8[300];
	kopt_check_fill(KOPT_I8, i8, 300, KOPT_DIST_ARANGE, 0, 1, 0);
	ck_assert_int_eq(i8[5], 5);
	ck_assert_int_eq(i8[200], (int8_t)200);
	uint16_t h[64];
	kopt_check_fill(KOPT_F16, h, 64, KOPT_DIST_UNIFORM, 0, 9, 0);
	for (int i = 0; i < 64; i++)
		ck_assert(fabs(kopt_f16_to_f32(h[i])) <= 1.0f);
	free(a), free(b), free(c);
}
END_TEST

START_TEST(test_fill_scaled)
{
	/* the range probe's inputs: the same draws times the scale, for float
	 * types and the drawn distributions only */
	enum { N = 4097 };
	double *one = malloc(N * 8), *big = malloc(N * 8);
	enum kopt_dist drawn[] = {KOPT_DIST_NORMAL, KOPT_DIST_UNIFORM, KOPT_DIST_UNIFORM01};
	for (int k = 0; k < 3; k++) {
		kopt_check_fill(KOPT_F64, one, N, drawn[k], 0, 7, 3);
		kopt_check_fill_scaled(KOPT_F64, big, N, drawn[k], 0, 1000.0, 7, 3);
		for (int i = 0; i < N; i++)
			ck_assert_double_le(fabs(big[i] - 1000.0 * one[i]), 1e-9 * fabs(big[i]) + 1e-12);
	}
	/* one element in 64 scaled, the rest the plain draw (the range
	 * probe's sparse pass); then one element alone */
	for (int k = 0; k < 3; k++) {
		kopt_check_fill(KOPT_F64, one, N, drawn[k], 0, 7, 3);
		kopt_check_fill_sparse(KOPT_F64, big, N, drawn[k], 0, 1000.0, UINT64_MAX, 7, 3);
		int alone = 0;
		for (int i = 0; i < N; i++)
			alone += big[i] != one[i];
		ck_assert_int_le(alone, 2); /* (a normal pair's partner may round alike) */
		ck_assert_int_ge(alone, 1);
		kopt_check_fill_sparse(KOPT_F64, big, N, drawn[k], 0, 1000.0, 64, 7, 3);
		int scaled = 0, plain = 0;
		for (int i = 0; i < N; i++) {
			if (fabs(big[i] - 1000.0 * one[i]) <= 1e-9 * fabs(big[i]) + 1e-12 && one[i] != 0.0)
				scaled++;
			if (big[i] == one[i])
				plain++;
		}
		ck_assert_int_eq(scaled + plain, N);
		ck_assert_int_gt(scaled, N / 128);
		ck_assert_int_lt(scaled, N / 32);
	}
	float *f = malloc(N * 4);
	kopt_check_fill_scaled(KOPT_F32, f, N, KOPT_DIST_UNIFORM, 0, 100.0, 1, 0);
	float top = 0;
	for (int i = 0; i < N; i++)
		top = fabsf(f[i]) > top ? fabsf(f[i]) : top;
	ck_assert(top > 90.0f && top <= 100.0f);
	/* a constant and an arange keep their values */
	kopt_check_fill_scaled(KOPT_F32, f, N, KOPT_DIST_CONSTANT, 3.5, 1000.0, 1, 0);
	ck_assert(f[0] == 3.5f && f[N - 1] == 3.5f);
	kopt_check_fill_scaled(KOPT_F32, f, N, KOPT_DIST_ARANGE, 0, 1000.0, 1, 0);
	ck_assert(f[7] == 7.0f);
	/* integers: scale 1 is the plain draw; 1000 widens [-64, 64] to
	 * [-64000, 64000] (a kernel that narrowed its integer inputs to int8
	 * passed every check: the probe's integer pass finds it) */
	int32_t *a = malloc(N * 4), *b = malloc(N * 4);
	kopt_check_fill(KOPT_I32, a, N, KOPT_DIST_UNIFORM, 0, 5, 0);
	kopt_check_fill_scaled(KOPT_I32, b, N, KOPT_DIST_UNIFORM, 0, 1.0, 5, 0);
	ck_assert_mem_eq(a, b, N * 4);
	kopt_check_fill_scaled(KOPT_I32, b, N, KOPT_DIST_UNIFORM, 0, 1000.0, 5, 0);
	int32_t lo = 0, hi = 0;
	for (int i = 0; i < N; i++) {
		lo = b[i] < lo ? b[i] : lo;
		hi = b[i] > hi ? b[i] : hi;
	}
	ck_assert(lo >= -64000 && lo < -50000 && hi <= 64000 && hi > 50000);
	int8_t c8[256];
	kopt_check_fill_scaled(KOPT_I8, c8, 256, KOPT_DIST_NORMAL, 0, 1000.0, 5, 0);
	int at_edge = 0;
	for (int i = 0; i < 256; i++)
		at_edge += c8[i] == 127 || c8[i] == -128;
	ck_assert_int_gt(at_edge, 200); /* clamped to the type */
	/* f16 past its range: the largest magnitude (an output that overflows
	 * from there fails the probe's control, the reference against itself) */
	uint16_t h[64];
	kopt_check_fill_scaled(KOPT_F16, h, 64, KOPT_DIST_NORMAL, 0, 1e6, 9, 0);
	int top16 = 0;
	for (int i = 0; i < 64; i++)
		top16 += fabsf(kopt_f16_to_f32(h[i])) >= 65504.0f;
	ck_assert_int_gt(top16, 48);
	free(one), free(big), free(f), free(a), free(b);
}
END_TEST

START_TEST(test_alternate_distribution)
{
	/* the second trial must change the sign range of [0,1) inputs */
	ck_assert_int_eq(kopt_dist_alternate(KOPT_DIST_UNIFORM01, KOPT_F32, 0), KOPT_DIST_NORMAL);
	ck_assert_int_ne(kopt_dist_alternate(KOPT_DIST_NORMAL, KOPT_F32, 0), KOPT_DIST_NORMAL);
	ck_assert_int_eq(kopt_dist_alternate(KOPT_DIST_ARANGE, KOPT_I32, 0), KOPT_DIST_ARANGE);
	ck_assert_int_eq(kopt_dist_alternate(KOPT_DIST_ARANGE, KOPT_F32, 0), KOPT_DIST_NEAR_ARANGE);
	ck_assert_int_eq(kopt_dist_alternate(KOPT_DIST_ARANGE, KOPT_F32, 1), KOPT_DIST_ARANGE);
	/* a float constant varies (a kernel may not assume it), unless fixed;
	 * an integer one (a flag, a size) stays */
	ck_assert_int_eq(kopt_dist_alternate(KOPT_DIST_CONSTANT, KOPT_BF16, 0), KOPT_DIST_NEAR);
	ck_assert_int_eq(kopt_dist_alternate(KOPT_DIST_CONSTANT, KOPT_F32, 1), KOPT_DIST_CONSTANT);
	ck_assert_int_eq(kopt_dist_alternate(KOPT_DIST_CONSTANT, KOPT_I32, 0), KOPT_DIST_CONSTANT);
	/* NEAR: the constant but for a few elements (at least one), moved by
	 * half to all of it, both ways */
	static float near[1 << 16];
	for (int ci = -1; ci <= 2; ci++) {
		double c = ci;
		kopt_check_fill(KOPT_F32, near, 1 << 16, KOPT_DIST_NEAR, c, 5, 0);
		int moved = 0, up = 0;
		for (int i = 0; i < 1 << 16; i++) {
			if (near[i] == (float)c)
				continue;
			moved++;
			double d = c == 0 ? fabs(near[i]) : fabs(near[i] - c) / fabs(c);
			ck_assert(d >= 0.5 && d <= 1.0);
			up += c == 0 ? near[i] > 0 : (near[i] - c) / c > 0;
		}
		ck_assert_int_ge(moved, 16);  /* ~32 expected */
		ck_assert_int_le(moved, 64);
		ck_assert(up > 0 && up < moved);
		kopt_check_fill(KOPT_F32, near, 3, KOPT_DIST_NEAR, c, 5, 0);
		ck_assert(near[0] != (float)c || near[1] != (float)c || near[2] != (float)c);
	}
	/* a float arange: i everywhere but a few elements */
	kopt_check_fill(KOPT_F32, near, 1 << 16, KOPT_DIST_NEAR_ARANGE, 0.0, 5, 0);
	int off = 0;
	for (int i = 0; i < 1 << 16; i++)
		off += near[i] != (float)i;
	ck_assert_int_ge(off, 16);
	ck_assert_int_le(off, 64);
	/* a constant near the type's largest value moves toward zero, never to Inf */
	static uint16_t near16[1 << 14];
	for (int seed = 1; seed <= 20; seed++) {
		kopt_check_fill(KOPT_F16, near16, 1 << 14, KOPT_DIST_NEAR, 40000.0, (uint64_t)seed, 0);
		for (int i = 0; i < 1 << 14; i++)
			ck_assert(isfinite(kopt_f16_to_f32(near16[i])));
	}
	double v = -1;
	ck_assert_int_eq(kopt_dist_parse("ones", &v), KOPT_DIST_CONSTANT);
	ck_assert(v == 1.0);
	ck_assert_int_eq(kopt_dist_parse("bogus", &v), -1);
}
END_TEST

START_TEST(test_poison_is_nan_and_changes)
{
	for (int t = 0; t < KOPT_DTYPE_COUNT; t++) {
		uint32_t w1 = kopt_check_poison_word((enum kopt_dtype)t, 1);
		uint32_t w2 = kopt_check_poison_word((enum kopt_dtype)t, 2);
		ck_assert_uint_ne(w1, w2);
		unsigned char buf[64];
		for (int i = 0; i < 16; i++)
			memcpy(buf + 4 * i, &w1, 4);
		size_t n = 64 / kopt_dtype_size((enum kopt_dtype)t);
		for (size_t i = 0; i < n; i++) {
			ck_assert(kopt_check_is_poison((enum kopt_dtype)t, buf, i, w1));
			ck_assert(!kopt_check_is_poison((enum kopt_dtype)t, buf, i, w2) ||
				  kopt_dtype_size((enum kopt_dtype)t) == 1);
			if (kopt_dtype_is_float((enum kopt_dtype)t))
				ck_assert(isnan(kopt_check_load((enum kopt_dtype)t, buf, i)));
		}
	}
}
END_TEST

/* A byte output takes the poison's byte value honestly one time in 256:
 * such an element equal to the reference's is no unwritten one; a poison
 * byte where the reference differs is. */
START_TEST(test_integer_poison_collisions)
{
	enum kopt_dtype types[2] = {KOPT_U8, KOPT_I8};
	for (int k = 0; k < 2; k++) {
		size_t n = 1 << 16;
		unsigned char *out = malloc(n), *ref = malloc(n);
		uint32_t w = kopt_check_poison_word(types[k], 3);
		for (size_t i = 0; i < n; i++)
			out[i] = ref[i] = (unsigned char)(i * 2654435761u >> 13); /* every byte value */
		struct kopt_check_result cr;
		kopt_check_compare(types[k], out, ref, n, w, 1, &cr);
		ck_assert_uint_eq(cr.unwritten, 0);
		ck_assert(cr.rel_l2 == 0.0);
		/* 100 elements left as poison where the reference is something else */
		size_t left = 0;
		for (size_t i = 0; i < n && left < 100; i += 97) {
			unsigned char pb = (unsigned char)(w >> (8 * (i % 4)));
			if (ref[i] == pb)
				continue;
			out[i] = pb;
			left++;
		}
		kopt_check_compare(types[k], out, ref, n, w, 1, &cr);
		ck_assert_uint_eq(cr.unwritten, left);
		free(out), free(ref);
	}
}
END_TEST

START_TEST(test_compare_exact_and_errors)
{
	enum { N = 1000 };
	float out[N], ref[N];
	for (int i = 0; i < N; i++)
		ref[i] = out[i] = (float)(i % 7) - 3.0f;
	struct kopt_check_result r;
	uint32_t pw = kopt_check_poison_word(KOPT_F32, 5);
	kopt_check_compare(KOPT_F32, out, ref, N, pw, 1, &r);
	ck_assert_uint_eq(r.unwritten, 0);
	ck_assert_uint_eq(r.nonfinite, 0);
	ck_assert(r.rel_l2 == 0.0 && r.max_abs == 0.0);
	char msg[256];
	ck_assert_int_eq(kopt_check_verdict(&r, 1e-5, -1, "t", msg, sizeof msg), 0);

	/* one element off by 0.5: rel_l2 = 0.5 / ||ref|| computed by hand */
	out[10] += 0.5f;
	double refn = 0;
	for (int i = 0; i < N; i++)
		refn += (double)ref[i] * ref[i];
	kopt_check_compare(KOPT_F32, out, ref, N, pw, 1, &r);
	ck_assert_double_eq_tol(r.rel_l2, 0.5 / sqrt(refn), 1e-12);
	ck_assert_double_eq_tol(r.max_abs, 0.5, 1e-12);
	ck_assert_int_eq(kopt_check_verdict(&r, 1e-5, -1, "t", msg, sizeof msg), 1);
	ck_assert(strstr(msg, "relative L2") != NULL);
	/* the message says where the largest error is, and the values there */
	ck_assert_uint_eq(r.worst_at, 10);
	ck_assert(strstr(msg, "at index 10: got 0.5, want 0") != NULL);
	ck_assert_int_eq(kopt_check_verdict(&r, 1.0, 0.25, "t", msg, sizeof msg), 1);
	ck_assert(strstr(msg, "max abs") != NULL);
	ck_assert(strstr(msg, "at index 10") != NULL);

	/* poison left and NaN are named before any norm */
	memcpy(&out[20], &pw, 4);
	out[30] = f(0x7f800000u);
	kopt_check_compare(KOPT_F32, out, ref, N, pw, 1, &r);
	ck_assert_uint_eq(r.unwritten, 1);
	ck_assert_uint_eq(r.nonfinite, 2); /* the poison is a NaN too */
	ck_assert_uint_eq(r.first_bad, 20);
	ck_assert_int_eq(kopt_check_verdict(&r, 1e9, -1, "out", msg, sizeof msg), 1);
	ck_assert(strstr(msg, "never written") != NULL);
	out[20] = ref[20];
	kopt_check_compare(KOPT_F32, out, ref, N, pw, 1, &r);
	ck_assert_int_eq(kopt_check_verdict(&r, 1e9, -1, "out", msg, sizeof msg), 1);
	ck_assert(strstr(msg, "NaN") != NULL);
}
END_TEST

/* A few elements far off inside the relative L2 budget: with no max-abs
 * tolerance, the worst element is held to 20x the tolerance of its own
 * magnitude; rounding-sized errors everywhere pass. */
START_TEST(test_element_bound)
{
	enum { N = 100000 };
	static float out[N], ref[N];
	for (int i = 0; i < N; i++)
		ref[i] = out[i] = 1.0f + (float)(i % 13) * 0.25f;
	struct kopt_check_result r;
	char msg[512];
	/* bf16-sized rounding on every element: passes */
	for (int i = 0; i < N; i++)
		out[i] = ref[i] * (1.0f + ((i & 1) ? 3e-3f : -3e-3f));
	kopt_check_compare(KOPT_F32, out, ref, N, 0, 0, &r);
	ck_assert_int_eq(kopt_check_verdict(&r, 1e-2, -1, "t", msg, sizeof msg), 0);
	/* 20 tail elements zeroed: rel L2 about 0.015 > 1e-2 would fail anyway at
	 * this size, so zero 4 of them: rel L2 under 1e-2, the element bound fails */
	for (int i = 0; i < N; i++)
		out[i] = ref[i];
	for (int i = N - 4; i < N; i++)
		out[i] = 0.0f;
	kopt_check_compare(KOPT_F32, out, ref, N, 0, 0, &r);
	ck_assert(r.rel_l2 < 1e-2);
	ck_assert_int_eq(kopt_check_verdict(&r, 1e-2, -1, "t", msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "though the relative L2 error") != NULL, "%s", msg);
	/* a spec's own max-abs tolerance replaces the element bound */
	ck_assert_int_eq(kopt_check_verdict(&r, 1e-2, 10.0, "t", msg, sizeof msg), 0);
	/* an element near zero is held to the reference's RMS, not to itself */
	for (int i = 0; i < N; i++)
		out[i] = ref[i];
	ref[7] = 0.0f;
	out[7] = 1e-3f;
	kopt_check_compare(KOPT_F32, out, ref, N, 0, 0, &r);
	ck_assert_int_eq(kopt_check_verdict(&r, 1e-2, -1, "t", msg, sizeof msg), 0);
}
END_TEST

START_TEST(test_compare_f16_and_zero_reference)
{
	uint16_t out[4], ref[4];
	for (int i = 0; i < 4; i++) {
		ref[i] = kopt_f32_to_f16(0.0f);
		out[i] = kopt_f32_to_f16(i == 2 ? 0.25f : 0.0f);
	}
	struct kopt_check_result r;
	kopt_check_compare(KOPT_F16, out, ref, 4, 0, 0, &r);
	/* a zero reference: the plain L2 norm of the error */
	ck_assert_double_eq_tol(r.rel_l2, 0.25, 1e-12);
}
END_TEST

START_TEST(test_compare_large_threaded)
{
	/* above the threading threshold: partial sums, counts and the first bad
	 * index must merge to what a plain loop computes */
	size_t n = (3u << 20) + 7;
	float *out = malloc(n * 4), *ref = malloc(n * 4);
	double refn = 0;
	for (size_t i = 0; i < n; i++) {
		ref[i] = out[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
		refn += (double)ref[i] * ref[i];
	}
	out[2500000] += 1.0f;
	double e = (double)out[2500000] - ref[2500000];
	out[2900000] = f(0x7fc00001u);
	out[3000000] = f(0xff800000u);
	struct kopt_check_result r;
	kopt_check_compare(KOPT_F32, out, ref, n, 0, 0, &r);
	ck_assert_uint_eq(r.nonfinite, 2);
	ck_assert_uint_eq(r.first_bad, 2900000);
	ck_assert_double_eq_tol(r.max_abs, fabs(e), 1e-12);
	refn -= (double)ref[2900000] * ref[2900000] + (double)ref[3000000] * ref[3000000];
	ck_assert_double_eq_tol(r.rel_l2, fabs(e) / sqrt(refn), 1e-12);
	free(out);
	free(ref);
}
END_TEST

START_TEST(test_tolerances)
{
	ck_assert(kopt_check_default_rel_l2(KOPT_F32) == 1e-5);
	ck_assert(kopt_check_default_rel_l2(KOPT_F16) == 2e-3);
	ck_assert(kopt_check_default_rel_l2(KOPT_BF16) == 1e-2);
	ck_assert(kopt_check_default_rel_l2(KOPT_I32) == 0.0);
	ck_assert(kopt_check_tolerance_named("tf32") == 5e-4);
	ck_assert(kopt_check_tolerance_named("bf16") == 1e-2);
	ck_assert(kopt_check_tolerance_named("fp8") < 0);
	ck_assert_int_eq(kopt_dtype_parse("bf16"), KOPT_BF16);
	ck_assert_int_eq(kopt_dtype_parse("f128"), -1);
}
END_TEST

/* A region of an output (verify.outputs.X.region): the box's elements in
 * row-major order, the innermost run copied whole; a box element's index in
 * the whole array, for messages. */
START_TEST(test_gather_box)
{
	float a[4 * 5], box[12];
	for (int i = 0; i < 20; i++)
		a[i] = (float)i;
	size_t dims[2] = {4, 5}, lo[2] = {1, 1}, hi[2] = {3, 4};
	ck_assert_uint_eq(kopt_check_gather(sizeof(float), a, box, 2, dims, lo, hi), 6);
	float want[6] = {6, 7, 8, 11, 12, 13};
	for (int i = 0; i < 6; i++)
		ck_assert_float_eq(box[i], want[i]);
	size_t d1[1] = {20}, l1[1] = {0}, h1[1] = {3};
	ck_assert_uint_eq(kopt_check_gather(sizeof(float), a, box, 1, d1, l1, h1), 3);
	ck_assert_float_eq(box[2], 2.0f);
	size_t bad[2] = {3, 3};
	ck_assert_uint_eq(kopt_check_gather(sizeof(float), a, box, 2, dims, bad, hi), 0);
	/* an element of the box named by its index in the whole array: a[i] == i */
	for (size_t k = 0; k < 6; k++)
		ck_assert_uint_eq(kopt_check_region_index(2, dims, lo, hi, k), (size_t)want[k]);
	ck_assert_uint_eq(kopt_check_region_index(2, dims, lo, hi, 6), 20);
}
END_TEST

/* The device's packing of a region (kopt_box_copies, the 3D copies of
 * compare_dev.c), run on the host as cuMemcpy3D moves bytes, gives
 * kopt_check_gather's bytes: random boxes of 1 to 6 dims, elements of 1, 2,
 * 4 and 8 bytes. */
static unsigned box_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

START_TEST(test_box_copies_match_gather)
{
	unsigned seed = 7;
	static unsigned char arr[1 << 16], want[1 << 16], got[1 << 16];
	for (size_t i = 0; i < sizeof arr; i++)
		arr[i] = (unsigned char)(i * 131 + 7);
	struct kopt_box_copy plan[4096];
	for (int trial = 0; trial < 2000; trial++) {
		int nd = 1 + (int)(box_rand(&seed) % 6);
		size_t elem = (size_t)1 << (box_rand(&seed) % 4), dims[8], lo[8], hi[8], total = elem;
		for (int d = 0; d < nd; d++) {
			dims[d] = 1 + box_rand(&seed) % (nd > 3 ? 4 : 9);
			lo[d] = box_rand(&seed) % dims[d];
			hi[d] = lo[d] + 1 + box_rand(&seed) % (dims[d] - lo[d]);
			total *= dims[d];
		}
		if (total > sizeof arr)
			continue;
		size_t n = kopt_check_gather(elem, arr, want, nd, dims, lo, hi);
		size_t copies = kopt_box_copies(elem, nd, dims, lo, hi, plan, 4096);
		ck_assert_uint_gt(copies, 0);
		memset(got, 0, sizeof got);
		for (size_t k = 0; k < copies; k++) /* cuMemcpy3D, by hand */
			for (size_t z = 0; z < plan[k].depth; z++)
				for (size_t y = 0; y < plan[k].rows; y++)
					memcpy(got + plan[k].dst + (z * plan[k].rows + y) * plan[k].width,
					       arr + plan[k].src + (z * plan[k].height + y) * plan[k].pitch,
					       plan[k].width);
		ck_assert_int_eq(memcmp(got, want, n * elem), 0);
		ck_assert_uint_eq(copies * plan[0].width * plan[0].rows * plan[0].depth, n * elem);
	}
	size_t dims[2] = {4, 5}, lo[2] = {2, 1}, hi[2] = {2, 4};
	ck_assert_uint_eq(kopt_box_copies(4, 2, dims, lo, hi, plan, 4096), 0); /* empty */
}
END_TEST

/* An in/out buffer ("init": "copy:X"): an element the reference changed that
 * the candidate left bit for bit as it started is counted; one neither
 * changed, or the candidate wrote, is not. */
START_TEST(test_stale_elements)
{
	float init[5] = {1, 2, 3, 4, 5}, ref[5] = {1, 9, 9, 4, 9}, out[5] = {1, 9, 3, 4, 5};
	size_t first = 0;
	ck_assert_uint_eq(kopt_check_stale(KOPT_F32, out, ref, init, 5, &first), 2);
	ck_assert_uint_eq(first, 2);
	float good[5] = {1, 9, 9, 4, 9.5f};
	ck_assert_uint_eq(kopt_check_stale(KOPT_F32, good, ref, init, 5, &first), 0);
	ck_assert_uint_eq(first, 5);
}
END_TEST

/* i16, u16 and u64: names, sizes, round trips, ranges of the integer
 * distributions, and arange wrapping like the 8-bit types. */
START_TEST(test_short_and_u64_types)
{
	ck_assert_int_eq(kopt_dtype_parse("i16"), KOPT_I16);
	ck_assert_int_eq(kopt_dtype_parse("u16"), KOPT_U16);
	ck_assert_int_eq(kopt_dtype_parse("u64"), KOPT_U64);
	ck_assert_uint_eq(kopt_dtype_size(KOPT_I16), 2);
	ck_assert_uint_eq(kopt_dtype_size(KOPT_U16), 2);
	ck_assert_uint_eq(kopt_dtype_size(KOPT_U64), 8);
	ck_assert_str_eq(kopt_dtype_name(KOPT_U64), "u64");
	ck_assert(!kopt_dtype_is_float(KOPT_I16));
	int16_t s[4];
	uint16_t u[4];
	uint64_t q[4];
	kopt_check_store(KOPT_I16, s, 0, -40000.0); /* saturates */
	kopt_check_store(KOPT_I16, s, 1, -123.0);
	kopt_check_store(KOPT_U16, u, 0, 70000.0);
	kopt_check_store(KOPT_U16, u, 1, -5.0);
	kopt_check_store(KOPT_U64, q, 0, 1e19);
	ck_assert_int_eq(s[0], -32768);
	ck_assert(kopt_check_load(KOPT_I16, s, 1) == -123.0);
	ck_assert_uint_eq(u[0], 65535);
	ck_assert_uint_eq(u[1], 0);
	ck_assert(kopt_check_load(KOPT_U64, q, 0) == 1e19);
	enum { N = 70000 };
	static uint16_t a[N];
	kopt_check_fill(KOPT_U16, a, N, KOPT_DIST_ARANGE, 0, 1, 0);
	ck_assert_uint_eq(a[65535], 65535);
	ck_assert_uint_eq(a[65536], 0);
	static int16_t b[N];
	kopt_check_fill(KOPT_I16, b, N, KOPT_DIST_UNIFORM, 0, 1, 0);
	for (int i = 0; i < N; i++)
		ck_assert(b[i] >= -64 && b[i] <= 64);
	static uint64_t c[N];
	kopt_check_fill(KOPT_U64, c, N, KOPT_DIST_NORMAL, 0, 1, 0);
	for (int i = 0; i < N; i++)
		ck_assert(c[i] < 1000); /* unsigned: negatives clamp to 0 */
}
END_TEST

/* 64-bit integers above 2^53 that differ by one read as the same double:
 * the comparison still sees them differ, so an exact tolerance fails. */
START_TEST(test_compare_wide_integers_exactly)
{
	uint64_t ref[3] = {(1ull << 60) + 1, 7, 1ull << 63}, out[3];
	memcpy(out, ref, sizeof out);
	struct kopt_check_result r;
	char msg[256];
	kopt_check_compare(KOPT_U64, out, ref, 3, 0, 0, &r);
	ck_assert(r.rel_l2 == 0.0);
	out[0] += 1;
	ck_assert((double)out[0] == (double)ref[0]);
	kopt_check_compare(KOPT_U64, out, ref, 3, 0, 0, &r);
	ck_assert(r.max_abs > 0.0);
	ck_assert_uint_eq(r.worst_at, 0);
	ck_assert_int_eq(kopt_check_verdict(&r, 0.0, -1, "t", msg, sizeof msg), 1);
	/* the message shows the kernel's and the reference's own values */
	ck_assert_msg(strstr(msg, "got 1152921504606846978, want 1152921504606846977") != NULL, "%s", msg);
	/* f64: -0.0 and +0.0 differ in their bytes and are equal: no error */
	double dz_out[2] = {-0.0, 1.0}, dz_ref[2] = {0.0, 1.0};
	kopt_check_compare(KOPT_F64, dz_out, dz_ref, 2, 0, 0, &r);
	ck_assert(r.max_abs == 0.0 && r.rel_l2 == 0.0);
	ck_assert_int_eq(kopt_check_verdict(&r, 0.0, 0.0, "t", msg, sizeof msg), 0);
	int64_t iref[2] = {-(1ll << 62) - 3, 1ll << 62}, iout[2];
	memcpy(iout, iref, sizeof iout);
	iout[1] -= 1;
	kopt_check_compare(KOPT_I64, iout, iref, 2, 0, 0, &r);
	ck_assert(r.max_abs > 0.0);
	ck_assert(r.worst_got < r.worst_want); /* moved to the side of the difference */
	ck_assert_int_eq(kopt_check_verdict(&r, 0.0, -1, "t", msg, sizeof msg), 1);
}
END_TEST

/* Trivial outputs against a reference: only those within the tolerance are
 * named, each by its kind; a list that does not fit leaves words out. */
START_TEST(test_trivial_probe)
{
	enum { N = 4096 };
	static float x[N], ref[N];
	kopt_check_fill(KOPT_F32, x, N, KOPT_DIST_NORMAL, 0, 11, 0);
	for (int i = 0; i < N; i++)
		ref[i] = x[i] + 1e-9f * x[i] * x[i] * x[i];
	struct kopt_trivial_source src[2] = {{"x", KOPT_F32, x, N}, {"short", KOPT_F32, x, N / 2}};
	char out[256] = "";
	ck_assert_int_eq(kopt_trivial_probe(KOPT_F32, ref, N, src, 2, 1e-5, -1, "y", out, sizeof out), 1);
	ck_assert_str_eq(out, "y:copy:x");
	/* a loose tolerance lets the reference rounded to f16 and bf16 through */
	out[0] = '\0';
	ck_assert_int_eq(kopt_trivial_probe(KOPT_F32, ref, N, NULL, 0, 1e-2, -1, "y", out, sizeof out), 2);
	ck_assert_str_eq(out, "y:round:f16 y:round:bf16");
	/* a zero reference: zeros pass; a constant one: the constant */
	static float zero[N], three[N];
	for (int i = 0; i < N; i++)
		three[i] = 3.0f;
	out[0] = '\0';
	kopt_trivial_probe(KOPT_F32, zero, N, src, 1, 1e-5, -1, "z", out, sizeof out);
	ck_assert_str_eq(out, "z:zeros");
	out[0] = '\0';
	kopt_trivial_probe(KOPT_F32, three, N, src, 1, 1e-5, -1, "c", out, sizeof out);
	ck_assert_str_eq(out, "c:constant:3");
	/* a one-element output is its own mean: the word names the value, so
	 * two input sets with other sums share no word */
	char one[64] = "", other[64] = "";
	float s1 = 12.5f, s2 = -3.25f;
	kopt_trivial_probe(KOPT_F32, &s1, 1, NULL, 0, 1e-5, -1, "s", one, sizeof one);
	kopt_trivial_probe(KOPT_F32, &s2, 1, NULL, 0, 1e-5, -1, "s", other, sizeof other);
	ck_assert_str_eq(one, "s:constant:12.5");
	kopt_trivial_intersect(one, other);
	ck_assert_str_eq(one, "");
	/* an honest problem: nothing */
	static float sq[N];
	for (int i = 0; i < N; i++)
		sq[i] = x[i] * x[i];
	out[0] = '\0';
	ck_assert_int_eq(kopt_trivial_probe(KOPT_F32, sq, N, src, 2, 1e-5, -1, "y", out, sizeof out), 0);
	ck_assert_str_eq(out, "");
	/* f64 with a 1e-6 tolerance accepts f32 rounding, not f16 */
	static double xd[N];
	for (int i = 0; i < N; i++)
		xd[i] = (double)x[i] * 1.0000001 + 1e-3;
	out[0] = '\0';
	kopt_trivial_probe(KOPT_F64, xd, N, NULL, 0, 1e-6, -1, "d", out, sizeof out);
	ck_assert_str_eq(out, "d:round:f32");
	/* exact integers: a copy converted from another type counts */
	static int32_t iref[N];
	static uint8_t bytes[N];
	for (int i = 0; i < N; i++)
		iref[i] = (int32_t)(bytes[i] = (uint8_t)(i * 7));
	struct kopt_trivial_source b = {"b", KOPT_U8, bytes, N};
	out[0] = '\0';
	kopt_trivial_probe(KOPT_I32, iref, N, &b, 1, 0, -1, "h", out, sizeof out);
	ck_assert_str_eq(out, "h:copy:b");
	iref[N - 1] += 1;
	out[0] = '\0';
	kopt_trivial_probe(KOPT_I32, iref, N, &b, 1, 0, -1, "h", out, sizeof out);
	ck_assert_str_eq(out, "");
	/* words that do not fit are left out, whole */
	char tiny[12] = "";
	kopt_trivial_probe(KOPT_F32, ref, N, src, 1, 1e-2, -1, "y", tiny, sizeof tiny);
	ck_assert_str_eq(tiny, "y:copy:x");
}
END_TEST

START_TEST(test_trivial_intersect)
{
	char a[64] = "y:zeros y:copy:x y:round:f16";
	kopt_trivial_intersect(a, "y:copy:x z:zeros  y:round:f16");
	ck_assert_str_eq(a, "y:copy:x y:round:f16");
	char b[64] = "y:copy:x";
	kopt_trivial_intersect(b, "y:copy:xx");
	ck_assert_str_eq(b, "");
	char c[64] = "";
	kopt_trivial_intersect(c, "y:zeros");
	ck_assert_str_eq(c, "");
}
END_TEST

static Suite *check_suite(void)
{
	Suite *s = suite_create("check");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_f16_round_trip_exhaustive);
	tcase_add_test(tc, test_f16_rounding);
	tcase_add_test(tc, test_bf16);
	tcase_add_test(tc, test_fill_seeded_and_distributions);
	tcase_add_test(tc, test_fill_scaled);
	tcase_add_test(tc, test_alternate_distribution);
	tcase_add_test(tc, test_poison_is_nan_and_changes);
	tcase_add_test(tc, test_integer_poison_collisions);
	tcase_add_test(tc, test_compare_exact_and_errors);
	tcase_add_test(tc, test_element_bound);
	tcase_add_test(tc, test_compare_f16_and_zero_reference);
	tcase_add_test(tc, test_compare_large_threaded);
	tcase_add_test(tc, test_tolerances);
	tcase_add_test(tc, test_gather_box);
	tcase_add_test(tc, test_stale_elements);
	tcase_add_test(tc, test_trivial_probe);
	tcase_add_test(tc, test_short_and_u64_types);
	tcase_add_test(tc, test_compare_wide_integers_exactly);
	tcase_add_test(tc, test_trivial_intersect);
	tcase_add_test(tc, test_box_copies_match_gather);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(check_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
