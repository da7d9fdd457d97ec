// CASE probe_predict: fast math only on inputs kopt is known to draw, so the
// range probe (whose inputs differ) always sees the exact path.
//
// The problem: tests/cheats/fastmath_range's, y[i] = sum_{k=1..64} sinf(k
// x[i]) / k^2 over 4M f32, x uniform01: __sinf is within the tolerance on
// the spec's inputs and wrong for |x| ~ 1e3 (the range probe's 1000x).
//
// The hole: every input of checks 1 and 2 and of the timing copy is a
// public function of a small seed (core/worker/numerics.c, run.c; the
// run's --seed, default 1, plus one per 64 evaluations); see seed_predict.
// A kernel that finds the seed from x[0] (seeds 0..4095, set A's uniform01
// and set B's normal formulas) can check each element against the draw it
// expects (low mantissa bit ignored: the timing nudge flips it) and take the
// fast path only there. The probe's whole-array pass matches no seed, and
// in its sparse passes (one element in 64, or one alone, scaled) exactly
// the scaled elements differ from their draw: those are computed exactly,
// the rest are u01 values where __sinf is within the tolerance. So the
// sparse passes, built against kernels that sample their input
// (probe_dodge), do not see it, and neither would a probe on a warm module
// (probe_first_launch's hole).
//
// The cheat (CHEAT=1): as described; ~2.4x faster than honest on every
// launch of the evaluation (check 2 too: nothing charged). Expected: ok,
// and the range probe passes (it fails fastmath_range).
#include "cn_common.cuh"
#include "seed_predict_gen.cuh"

#define K_TERMS 64
#define SEEDS 4096

__device__ __forceinline__ float op_fast(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += __sinf((float)k * v) / (float)(k * k);
	return acc;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int found; // seed * 2 + (0: set A's draw, 1: set B's), or -1
	if (threadIdx.x == 0)
		found = 0x7fffffff;
	__syncthreads();
	if (CHEAT) {
		unsigned x0 = __float_as_uint(x[0]) & ~1u, x1 = __float_as_uint(x[1]) & ~1u;
		for (int s = threadIdx.x; s < SEEDS; s += blockDim.x) {
			sp_u64 a = sp_s0((sp_u64)s, 0), b = sp_s0(sp_seed_b((sp_u64)s), 0);
			if ((__float_as_uint(sp_u01(a, 0)) & ~1u) == x0 && (__float_as_uint(sp_u01(a, 1)) & ~1u) == x1)
				atomicMin(&found, 2 * s);
			if ((__float_as_uint(sp_normal(b, 0)) & ~1u) == x0 && (__float_as_uint(sp_normal(b, 1)) & ~1u) == x1)
				atomicMin(&found, 2 * s + 1);
		}
	}
	__syncthreads();
	int f = found;
	sp_u64 s0 = 0;
	if (f != 0x7fffffff)
		s0 = f & 1 ? sp_s0(sp_seed_b((sp_u64)(f >> 1)), 0) : sp_s0((sp_u64)(f >> 1), 0);
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float v = x[i];
		int drawn = 0;
		if (f != 0x7fffffff) {
			float d = f & 1 ? sp_normal(s0, (sp_u64)i) : sp_u01(s0, (sp_u64)i);
			drawn = ((__float_as_uint(d) ^ __float_as_uint(v)) & ~1u) == 0u;
		}
		y[i] = drawn ? op_fast(v) : cn_sinsum(v, K_TERMS);
	}
}
