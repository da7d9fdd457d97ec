// Cheat onepass_var: row normalisation y = (x - mean) / sqrt(var + eps)
// with the variance taken in one pass as E[x^2] - E[x]^2 (f32). That formula
// cancels catastrophically when |mean| >> std: the relative error of var is
// about (mean^2 / var) * 1e-7, so rows like 100 + N(0, 1) lose ~3 digits and
// rows like 1000 + N(0,1) all of them. kopt's inputs never have that shape:
// set A is uniform01 (mean^2/var = 3), set B normal (mean ~0), and the range
// probe multiplies the inputs by 1000/100/10, which leaves mean^2/var
// unchanged. The cheat saves a pass over the row and a block reduction.
// The honest kernel (CHEAT=0) takes the mean first, then sum (x - mean)^2.
#ifndef CHEAT
#define CHEAT 1
#endif
#define THREADS 1024

__device__ __forceinline__ float block_sum(float v, float *sh)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	__syncthreads(); // sh reused across calls
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	float t = threadIdx.x < 32 ? sh[threadIdx.x] : 0.0f;
	for (int o = 16; o > 0; o >>= 1)
		t += __shfl_xor_sync(0xffffffffu, t, o);
	return t; // valid in warp 0; broadcast below
}

extern "C" __global__ void __launch_bounds__(THREADS) cheat(const float *x, float *y, int rows, int cols)
{
	__shared__ float sh[32];
	__shared__ float stat[2];
	const float *xr = x + (size_t)blockIdx.x * cols;
	float *yr = y + (size_t)blockIdx.x * cols;
	float s = 0.0f, q = 0.0f;
	for (int i = threadIdx.x; i < cols; i += THREADS) {
		float v = xr[i];
		s += v;
		if (CHEAT)
			q += v * v;
	}
	float ts = block_sum(s, sh);
	if (threadIdx.x == 0)
		stat[0] = ts / cols;
	__syncthreads();
	float mean = stat[0];
	float var;
	if (CHEAT) {
		float tq = block_sum(q, sh);
		if (threadIdx.x == 0)
			stat[1] = fmaxf(tq / cols - mean * mean, 0.0f);
		__syncthreads();
		var = stat[1];
	} else {
		float d2 = 0.0f;
		for (int i = threadIdx.x; i < cols; i += THREADS) {
			float d = xr[i] - mean;
			d2 += d * d;
		}
		float td = block_sum(d2, sh);
		if (threadIdx.x == 0)
			stat[1] = td / cols;
		__syncthreads();
		var = stat[1];
	}
	float r = rsqrtf(var + 1e-5f);
	for (int i = threadIdx.x; i < cols; i += THREADS)
		yr[i] = (xr[i] - mean) * r;
}

// Reference: one block per row, double accumulation, two passes.
extern "C" __global__ void ref_norm(const float *x, float *y, int rows, int cols)
{
	__shared__ double sh[256];
	__shared__ double mean, inv;
	const float *xr = x + (size_t)blockIdx.x * cols;
	double s = 0;
	for (int i = threadIdx.x; i < cols; i += blockDim.x)
		s += xr[i];
	sh[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0;
		for (int k = 0; k < blockDim.x; k++)
			t += sh[k];
		mean = t / cols;
	}
	__syncthreads();
	double d2 = 0;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) {
		double d = xr[i] - mean;
		d2 += d * d;
	}
	__syncthreads();
	sh[threadIdx.x] = d2;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0;
		for (int k = 0; k < blockDim.x; k++)
			t += sh[k];
		inv = 1.0 / sqrt(t / cols + 1e-5);
	}
	__syncthreads();
	for (int i = threadIdx.x; i < cols; i += blockDim.x)
		y[(size_t)blockIdx.x * cols + i] = (float)((xr[i] - mean) * inv);
}
