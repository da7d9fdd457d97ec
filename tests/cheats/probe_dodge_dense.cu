// CASE probe_dodge_dense: tests/cheats/probe_dodge (__sinf instead of sinf,
// within f32's tolerance for |x| of a few units, wrong for |x| ~ 1e3) with
// the accurate path taken when any of SAMPLES sampled inputs is large,
// instead of 32.
//
// The hole: the range probe's new sparse pass (range_probe.lua; worker:
// numerics.c scale_at(), one element in SPARSE_EVERY = 64 scaled, at places
// drawn from a hash of the index) caught probe_dodge because 32 samples
// miss every scaled element with probability (63/64)^32 = 0.60. With 1024
// samples that probability is (63/64)^1024 = 1e-7 (4096: 1e-28): the
// sparse pass, like the dense one, meets the accurate kernel. Sampling
// costs warp 0 of each block 32 (128) loads of words the L2 holds: nothing
// against 64 sinf per element. Checks 1 and 2 take the fast path where no
// sample reaches 2 (uniform01: always; normal: almost never, and then the
// accurate path; both within the tolerance, as fastmath_range passes them).
// Wrong for a user: any array whose large values are rarer than about 1 in
// 1000 (outliers, heavy tails, sentinels) takes the fast path and gets
// those elements wrong by 1e-3 to 1e-1 relative. The probe never draws
// a mixture sparser than 1 in 64.
// CHEAT=0: honest (sinf).
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef SAMPLES
#define SAMPLES 1024
#endif
#define K_TERMS 64
#define SMALL 2.0f

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

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
	if (threadIdx.x < 32) {
		int f = 0;
		if (CHEAT) {
			// the same SAMPLES places in every block, spread over x: one
			// decision per launch
			int lane = threadIdx.x;
			long long step = n / SAMPLES;
			float m = 0.0f;
			for (int j = lane; j < SAMPLES; j += 32)
				m = fmaxf(m, fabsf(x[(long long)j * step + (j * 7919) % (step > 1 ? step : 1)]));
			for (int o = 16; o > 0; o >>= 1)
				m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
			f = m < SMALL;
		}
		if (threadIdx.x == 0)
			fast = f;
	}
	__syncthreads();
	int stride = gridDim.x * blockDim.x;
	if (fast) {
		for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
			y[i] = op_fast(x[i]);
	} else {
		for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
			y[i] = op(x[i]);
	}
}

// Reference: one thread per element, accurate sinf.
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
