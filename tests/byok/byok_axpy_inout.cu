// byok_axpy_inout: an in/out buffer. y starts as a copy of y0 (the spec's
// "init": "copy:y0"; y0 itself is no kernel parameter) and the kernel
// updates its first m elements in place, y[i] = alpha * x[i] + y[i]; the
// elements from m to n are left as they started, as the reference leaves
// them. VEC floats per access (float2 / float4 with a scalar tail);
// GRID_STRIDE=1 launches a fixed grid that loops, 0 one thread per pack.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef GRID_STRIDE
#define GRID_STRIDE 0
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
	axpy_inout(float *__restrict__ y, const float *__restrict__ x, float alpha, int m)
{
	const long long npack = m / VEC;
	const long long first = (long long)blockIdx.x * BLOCK + threadIdx.x;
	const long long step = GRID_STRIDE ? (long long)gridDim.x * BLOCK : npack + 1;
	for (long long p = first; p < npack; p += step) {
		if (VEC == 4) {
			float4 xv = reinterpret_cast<const float4 *>(x)[p];
			float4 yv = reinterpret_cast<float4 *>(y)[p];
			yv.x = fmaf(alpha, xv.x, yv.x);
			yv.y = fmaf(alpha, xv.y, yv.y);
			yv.z = fmaf(alpha, xv.z, yv.z);
			yv.w = fmaf(alpha, xv.w, yv.w);
			reinterpret_cast<float4 *>(y)[p] = yv;
		} else if (VEC == 2) {
			float2 xv = reinterpret_cast<const float2 *>(x)[p];
			float2 yv = reinterpret_cast<float2 *>(y)[p];
			yv.x = fmaf(alpha, xv.x, yv.x);
			yv.y = fmaf(alpha, xv.y, yv.y);
			reinterpret_cast<float2 *>(y)[p] = yv;
		} else {
			y[p] = fmaf(alpha, x[p], y[p]);
		}
	}
	// the m % VEC elements after the last whole pack
	if (VEC > 1 && first < m % VEC) {
		const long long i = npack * VEC + first;
		y[i] = fmaf(alpha, x[i], y[i]);
	}
}

// Reference: one thread per updated element.
extern "C" __global__ void axpy_inout_ref(float *y, const float *x, float alpha, int m)
{
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < m)
		y[i] = fmaf(alpha, x[i], y[i]);
}
