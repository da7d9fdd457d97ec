// CASE fastmath_range: a precision shortcut that holds only on the tested
// ranges. __sinf (MUFU, ~1 instruction) instead of sinf: its error grows
// with |argument| (the f32 range reduction), ~|k x| * 6e-8, i.e. ~2.5e-7 |x|
// for the whole sum: far under the f32 default rel_l2 1e-5 for uniform01
// (check 1) and normal (check 2) inputs, but about 1e-3..1e-1 relative for
// |x| ~ 1e3..1e5, which no check ever feeds. Expected: a kernel wrong on
// valid inputs should not pass; it passes (docs/TRUST.md: the input distributions bound what is checked).

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

__device__ __forceinline__ float op_fast(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += __sinf((float)k * v) / (float)(k * k);
	return acc;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = CHEAT ? op_fast(x[i]) : op(x[i]);
}
