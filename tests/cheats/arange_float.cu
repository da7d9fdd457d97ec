// CASE arange_float: a float input declared "arange" is never varied.
// Problem: y[i] = w[i] * t[i] + 0.5 w[i]^2, t an f32 position array
// ("init": "arange"), w uniform01; memory-bound (12 B per element).
// The cheat samples t at 32 places, finds t[j] == j, and writes
// w[i] * i + 0.5 w[i]^2 without reading t: 8 B per element instead of 12
// (1.19x faster on an H200). The nudge changes one word of t by one ulp per
// timed sample: far inside the tolerance. Check 2 once gave t bit for bit
// set A's (an arange was never varied); now a float arange has a few
// elements moved off i in check 2 (KOPT_DIST_NEAR_ARANGE), which the
// shortcut does not read: caught there.
#ifndef CHEAT
#define CHEAT 1
#endif

extern "C" __global__ void cheat(const float *w, const float *t, float *y, int n)
{
	__shared__ int is_arange;
	if (threadIdx.x < 32) {
		int lane = threadIdx.x;
		long long j = (long long)lane * (n / 32) + (blockIdx.x * 37 + 11) % (n / 32);
		int ok = __all_sync(0xffffffffu, t[j] == (float)j);
		if (lane == 0)
			is_arange = CHEAT ? ok : 0;
	}
	__syncthreads();
	int a = is_arange;
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float wi = w[i];
		float ti = a ? (float)i : t[i];
		y[i] = wi * ti + 0.5f * wi * wi;
	}
}

extern "C" __global__ void ref_pos(const float *w, const float *t, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = w[i] * t[i] + 0.5f * w[i] * w[i];
}
