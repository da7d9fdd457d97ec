// expm1_small: a fast-math shortcut wrong for small inputs. expm1f(t) is
// written as __expf(t) - 1.0f (one MUFU.EX2 instead of ~20 instructions).
// __expf's absolute error near t = 0 is ~1e-7, so the relative error of
// e^t - 1 is ~1e-7 / |t|: 1e-4 at |t| = 1e-3.
//
// Checks 1-3 draw inputs of order 1: an output's relative L2 error is made
// by its O(1) elements, so the few small ones hide under the tolerance. The
// range probe's larger scales stop at 10x here (the reference overflows at
// 100x), where __expf is accurate. Its pass at 0.001x, where every element
// is small, names the cheat (relative L2 8.4e-5 against 1e-5 on an H200,
// docs/results/gpu_tests/h200_session28/cheats_round/).
//
// Problem: y[i] = sum_{k=1..64} expm1f(x[i] / k) / k over 4M f32, x
// uniform01 (set B normal, set C uniform01). Compute-bound.
// CHEAT=0: honest expm1f (divisions as reciprocal products, within 1 ulp of
// the reference's); CHEAT=1: __expf(t) - 1.0f, otherwise identical.
// On an H200: both ok in every evaluation, the cheat 3.5x faster; `kopt
// random expm1_small.json` names the cheat winner, and the range probe says
// it fails at 0.001x.
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float v = x[i], acc = 0.0f;
#pragma unroll
		for (int k = 1; k <= K_TERMS; k++) {
			float r = 1.0f / (float)k; // (folded: k is known after unrolling)
			float t = v * r;
#if CHEAT
			float e = __expf(t) - 1.0f;
#else
			float e = expm1f(t);
#endif
			acc += e * r;
		}
		y[i] = acc;
	}
}
