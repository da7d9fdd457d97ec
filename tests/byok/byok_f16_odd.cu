// byok_f16_odd: y = half(x * x * 0.5 - z) over 999999 f16 elements (odd).
// VEC halves per thread: 1 (scalar), 2 (__half2) or 8 (one 16-byte load);
// the last pack of an odd count is handled element by element. The math is
// the same __fmaf_rn in float and one round to half in every path.
#include <cuda_fp16.h>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif
static_assert(VEC == 1 || VEC == 2 || VEC == 8, "VEC is 1, 2 or 8");

__device__ __forceinline__ float op(float x, float z) { return __fmaf_rn(x * 0.5f, x, -z); }

extern "C" __global__ void __launch_bounds__(BLOCK)
	sq_half(const __half *__restrict__ x, const __half *__restrict__ z, __half *__restrict__ y, int n)
{
	const long long p = (long long)blockIdx.x * BLOCK + threadIdx.x; // pack index
	const long long i0 = p * VEC;
	if (i0 >= n)
		return;
	if (VEC > 1 && i0 + VEC <= n) {
		if (VEC == 2) {
			float2 xf = __half22float2(reinterpret_cast<const __half2 *>(x)[p]);
			float2 zf = __half22float2(reinterpret_cast<const __half2 *>(z)[p]);
			reinterpret_cast<__half2 *>(y)[p] = __floats2half2_rn(op(xf.x, zf.x), op(xf.y, zf.y));
		} else {
			uint4 xv = reinterpret_cast<const uint4 *>(x)[p];
			uint4 zv = reinterpret_cast<const uint4 *>(z)[p];
			const __half2 *xh = reinterpret_cast<const __half2 *>(&xv);
			const __half2 *zh = reinterpret_cast<const __half2 *>(&zv);
			uint4 yv;
			__half2 *yh = reinterpret_cast<__half2 *>(&yv);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float2 xf = __half22float2(xh[k]), zf = __half22float2(zh[k]);
				yh[k] = __floats2half2_rn(op(xf.x, zf.x), op(xf.y, zf.y));
			}
			reinterpret_cast<uint4 *>(y)[p] = yv;
		}
		return;
	}
	for (long long i = i0; i < n && i < i0 + VEC; i++)
		y[i] = __float2half_rn(op(__half2float(x[i]), __half2float(z[i])));
}

// Reference: one thread per element.
extern "C" __global__ void sq_half_ref(const __half *x, const __half *z, __half *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __float2half_rn(op(__half2float(x[i]), __half2float(z[i])));
}
