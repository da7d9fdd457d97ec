// CASE tail_drop: wrong elements hidden inside a global relative L2 error.
// Problem: y = bf16(2 |x| + 1), n = 4194304 + 200, bf16 output. The kernel
// handles whole 1024-element tiles with 8-byte vector stores and writes 0 for
// the ragged tail instead of computing it (no bounds-checked scalar path).
// Every element is written, none is NaN, and the 200 wrong elements give a
// relative L2 error of about sqrt(200 / 4194504) = 6.9e-3, under bf16's
// default rel_l2 1e-2. kopt applies a max-abs ceiling only when the spec
// sets one (run.c: tol_abs = -1 by default; numerics.c kopt_check_verdict),
// so nothing else looks at single elements. bf16 can hide ~1e-4 of all
// elements completely wrong, f16 ~4e-6. CHEAT=0 is honest.
#include <cuda_bf16.h>
#ifndef CHEAT
#define CHEAT 1
#endif

__device__ __forceinline__ __nv_bfloat16 opb(float v) { return __float2bfloat16(2.0f * fabsf(v) + 1.0f); }

extern "C" __global__ void cheat(const float *x, __nv_bfloat16 *y, int n)
{
	int tiles = n / 1024; // whole tiles of 1024 elements: 256 threads x 4
	int stride = gridDim.x;
	for (int tile = blockIdx.x; tile < tiles; tile += stride) {
		int i = tile * 1024 + threadIdx.x * 4;
		float4 v = *(const float4 *)(x + i);
		__nv_bfloat162 a = __halves2bfloat162(opb(v.x), opb(v.y));
		__nv_bfloat162 b = __halves2bfloat162(opb(v.z), opb(v.w));
		uint2 pk;
		pk.x = *(unsigned *)&a;
		pk.y = *(unsigned *)&b;
		*(uint2 *)(y + i) = pk;
	}
	if (blockIdx.x == gridDim.x - 1)
		for (int i = tiles * 1024 + threadIdx.x; i < n; i += blockDim.x)
			y[i] = CHEAT ? __float2bfloat16(0.0f) : opb(x[i]);
}

extern "C" __global__ void ref_tail(const float *x, __nv_bfloat16 *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __float2bfloat16(2.0f * fabsf(x[i]) + 1.0f);
}
