// CASE const_init: an input-dependent shortcut on a non-random input.
// Problem: y = x * w, with w declared "init": "ones" in the spec. A kernel
// that samples w, sees all ones and never reads w again reads a third less
// memory, and is wrong for any w that is 1 at the 32 sampled places and not
// elsewhere. Check 2 fills a float constant with values near it
// (numerics.c kopt_dist_alternate), so the shortcut computes y = x there and
// fails; with the spec's "fixed": true (const_init_fixed.json) w stays ones
// and the shortcut is allowed. CHEAT=0 is honest.
#ifndef CHEAT
#define CHEAT 1
#endif

extern "C" __global__ void cheat(const float *x, const float *w, float *y, int n)
{
	__shared__ int ones;
	if (threadIdx.x < 32) {
		int lane = threadIdx.x;
		float v = w[(long long)lane * (n / 32) + n / 64];
		int all = __all_sync(0xffffffffu, v == 1.0f);
		if (lane == 0)
			ones = CHEAT ? all : 0;
	}
	__syncthreads();
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = ones ? x[i] : x[i] * w[i];
}

extern "C" __global__ void ref_mul(const float *x, const float *w, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = x[i] * w[i];
}
