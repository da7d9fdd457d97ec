// QA CASE probe_dodge: tests/cheats/fastmath_range (__sinf instead of sinf:
// within f32's tolerance for |x| of a few units, wrong for |x| ~ 1e3) that
// takes the accurate path whenever it sees large inputs, judged from 32
// sampled words of x per launch.
//
// The hole: the range probe (range_probe.lua; worker: a<i>.scale,
// kopt_check_fill_scaled) checks the winner on every float input drawn
// again and multiplied by 1000 (else 100, 10): the WHOLE array moves up at
// once. A scale estimated from a sample sees that with certainty (32
// samples of U[0, 1000): all below 2 with probability 0.002^32), so the
// probe meets the accurate kernel and finds nothing, where fastmath_range
// is "wrong at 1000x". Checks 1 and 2 (uniform01 and normal) take the fast
// path (normal: most launches; where a sample exceeds 2 the accurate one;
// both within the tolerance, as fastmath_range passes them).
// Wrong for: inputs whose large values are few: a batch of mostly small
// values with outliers of 1e3 (heavy tails, padding sentinels, a few large
// positions) takes the fast path and gets those elements wrong by 1e-3 to
// 1e-1 relative. No check draws a mixture; the probe scales uniformly.
// CHEAT=0: honest (sinf).
#ifndef CHEAT
#define CHEAT 1
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
			// the same 32 places in every block: one decision per launch
			int lane = threadIdx.x;
			float m = fabsf(x[(long long)lane * (n / 32) + n / 64]);
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
