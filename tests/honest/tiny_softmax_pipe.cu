// tiny_softmax_pipe: row softmax of a small [64, 512] f32 batch as three
// tiny kernels (a few microseconds in all): row max, row sum of exp(x -
// max), normalise. The unfused form a framework falls back to; timed as one
// pipeline, with rmax and rsum as scratch. expf in both kernel and
// reference; the reference sums in double (default f32 tolerance).
#ifndef BLOCK
#define BLOCK 128
#endif
#define WARPS (BLOCK / 32)

__device__ __forceinline__ float block_reduce(float v, bool is_max)
{
	__shared__ float part[WARPS];
	for (int o = 16; o > 0; o >>= 1) {
		const float u = __shfl_xor_sync(0xffffffffu, v, o);
		v = is_max ? fmaxf(v, u) : v + u;
	}
	if ((threadIdx.x & 31) == 0)
		part[threadIdx.x >> 5] = v;
	__syncthreads();
	float t = part[0];
	for (int w = 1; w < WARPS; w++)
		t = is_max ? fmaxf(t, part[w]) : t + part[w];
	return t;
}

extern "C" __global__ void __launch_bounds__(BLOCK) sm_max(float *__restrict__ rmax, const float *__restrict__ x, int L)
{
	const float *xr = x + (size_t)blockIdx.x * L;
	float m = __int_as_float(0xff800000); // -inf
	for (int c = threadIdx.x; c < L; c += BLOCK)
		m = fmaxf(m, xr[c]);
	m = block_reduce(m, true);
	if (threadIdx.x == 0)
		rmax[blockIdx.x] = m;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	sm_sum(float *__restrict__ rsum, const float *__restrict__ x, const float *__restrict__ rmax, int L)
{
	const float *xr = x + (size_t)blockIdx.x * L;
	const float m = rmax[blockIdx.x];
	float s = 0.0f;
	for (int c = threadIdx.x; c < L; c += BLOCK)
		s += expf(xr[c] - m);
	s = block_reduce(s, false);
	if (threadIdx.x == 0)
		rsum[blockIdx.x] = s;
}

// grid (rows, cdiv(L, BLOCK)): one element per thread
extern "C" __global__ void __launch_bounds__(BLOCK)
	sm_norm(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ rmax,
		const float *__restrict__ rsum, int L)
{
	const int c = blockIdx.y * BLOCK + threadIdx.x;
	if (c >= L)
		return;
	const size_t at = (size_t)blockIdx.x * L + c;
	y[at] = expf(x[at] - rmax[blockIdx.x]) / rsum[blockIdx.x];
}

// Reference: one thread per row, three passes, the sum in double.
extern "C" __global__ void softmax_ref(float *y, const float *x, int rows, int L)
{
	const int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	const float *xr = x + (size_t)r * L;
	float m = __int_as_float(0xff800000); // -inf
	for (int c = 0; c < L; c++)
		m = fmaxf(m, xr[c]);
	double s = 0.0;
	for (int c = 0; c < L; c++)
		s += (double)expf(xr[c] - m);
	const float fs = (float)s;
	for (int c = 0; c < L; c++)
		y[(size_t)r * L + c] = expf(xr[c] - m) / fs;
}
