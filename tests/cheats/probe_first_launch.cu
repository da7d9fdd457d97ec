// CASE probe_first_launch: exact on the first launch of each module, fast
// math on every later one: the range probe (and the sanitizer) only ever
// see a module's first launch.
//
// The problem: tests/cheats/fastmath_range's, y[i] = sum_{k=1..64} sinf(k
// x[i]) / k^2 over 4M f32, x uniform01. __sinf (one MUFU instruction)
// instead of sinf is within the f32 tolerance on the spec's inputs (u01,
// and check 2's normal ones) and wrong for |x| ~ 1e3: fastmath_range passes
// every evaluation 2.5x faster, and the range probe on the winner finds it
// (x scaled 1000x: rel. L2 6e-5 against 1e-5).
//
// The hole: the range probe runs "check 1 on those inputs" in a worker of
// its own (cuda.lua check_variants: time = false, verify2 = false), so the
// kernel is launched exactly once in a freshly loaded module, as in every
// check 1; the compute sanitizer runs the same single check 1. A kernel can
// tell that launch apart without looking at the data: it is its module's
// first. The probe's sparse passes (one element in 64, one alone) are aimed
// at kernels that look at the data (probe_dodge); this one never does.
//
// The cheat (CHEAT=1): a flag in a __constant__ array (written through a
// generic pointer; zero in every freshly loaded module) records the first
// launch by its poison word; that launch (all its blocks) uses sinf, every
// later launch of the module __sinf. In an evaluation: check 1 exact, the
// warm-up exact, every timed launch and check 2 fast (both within the
// tolerance on u01 and normal inputs: check 2 is fast too, so nothing is
// charged). Expected: ok, ~2.5x faster than honest, and the range probe
// passes it (it fails fastmath_range).
#include "cn_common.cuh"

#define K_TERMS 64

__constant__ __align__(16) unsigned kopt_first_rec[4];

__device__ __forceinline__ float op_fast(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += __sinf((float)k * v) / (float)(k * k);
	return acc;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int fast;
	if (threadIdx.x == 0) {
		int f = 0;
		if (CHEAT) {
			volatile unsigned *t = cn_generic(kopt_first_rec);
			unsigned P = cn_launch_id(y + (size_t)blockIdx.x * blockDim.x);
			if (t[0] == 0u) {
				t[1] = P; // this is the module's first launch: every block of it is exact
				__threadfence();
				t[0] = 1u;
				f = 0;
			} else {
				f = t[1] != P;
			}
		}
		fast = f;
	}
	__syncthreads();
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = fast ? op_fast(x[i]) : cn_sinsum(x[i], K_TERMS);
}
