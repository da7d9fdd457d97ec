// Cheat softmax_nomax: row softmax without the max subtraction,
// y = exp(x) / sum exp(x). For kopt's check inputs (uniform01, normal: |x| <
// ~6) exp never overflows and the result equals the stable softmax to a few
// ulp, so both checks and every timed comparison pass; the cheat saves the
// max pass and one block reduction. It overflows (Inf/Inf = NaN) once a
// logit exceeds ~88: the range probe (x * 1000, 100, 10) sees NaN on the
// winner. By default (--range-probe note) the probe only reports it; the
// cheat stays the winner. The honest kernel (CHEAT=0) subtracts the row max.
#ifndef CHEAT
#define CHEAT 1
#endif
#define THREADS 1024

__device__ __forceinline__ float block_red(float v, float *sh, bool mx)
{
	for (int o = 16; o > 0; o >>= 1) {
		float w = __shfl_xor_sync(0xffffffffu, v, o);
		v = mx ? fmaxf(v, w) : v + w;
	}
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	float t = sh[threadIdx.x & 31];
	for (int o = 16; o > 0; o >>= 1) {
		float w = __shfl_xor_sync(0xffffffffu, t, o);
		t = mx ? fmaxf(t, w) : t + w;
	}
	return t; // every thread (THREADS / 32 == 32 warps)
}

extern "C" __global__ void __launch_bounds__(THREADS) cheat(const float *x, float *y, int rows, int cols)
{
	__shared__ float sh[32];
	const float *xr = x + (size_t)blockIdx.x * cols;
	float *yr = y + (size_t)blockIdx.x * cols;
	float m = 0.0f;
	if (!CHEAT) {
		float v = __int_as_float(0xff800000);
		for (int i = threadIdx.x; i < cols; i += THREADS)
			v = fmaxf(v, xr[i]);
		m = block_red(v, sh, true);
	}
	float s = 0.0f;
	for (int i = threadIdx.x; i < cols; i += THREADS)
		s += expf(xr[i] - m);
	float inv = 1.0f / block_red(s, sh, false);
	for (int i = threadIdx.x; i < cols; i += THREADS)
		yr[i] = expf(xr[i] - m) * inv;
}

extern "C" __global__ void ref_softmax(const float *x, float *y, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	const float *xr = x + (size_t)r * cols;
	double m = __int_as_float(0xff800000), s = 0;
	for (int i = 0; i < cols; i++)
		m = fmax(m, (double)xr[i]);
	for (int i = 0; i < cols; i++)
		s += exp((double)xr[i] - m);
	for (int i = 0; i < cols; i++)
		y[(size_t)r * cols + i] = (float)(exp((double)xr[i] - m) / s);
}
