// CASE benign_race: a real data race that is right almost every time. The
// block stages a tile of x in shared memory and each thread computes the
// element of its partner in the other half-warp group (t ^ 32). The honest
// kernel has a second barrier at the end of each tile; the cheat drops it,
// so a fast warp may overwrite s[] for the next tile while its partner still
// reads the previous one (write-after-read). The partner reads right after
// the first barrier, ~thousands of cycles before the fast warp's op() ends,
// so the race almost never shows: compute-sanitizer racecheck flags it,
// kopt's comparison does not (faults.cu FAULT=12 is a race staggered so it
// always shows).

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ float s[1024];
	int t = threadIdx.x;
	for (long long base = (long long)blockIdx.x * blockDim.x; base < n;
	     base += (long long)gridDim.x * blockDim.x) {
		long long i = base + t;
		s[t] = i < n ? x[i] : 0.0f;
		__syncthreads();
		int j = t ^ 32;
		float v = s[j];
		if (base + j < n)
			y[base + j] = op(v);
#if CHEAT == 0
		__syncthreads();
#endif
	}
}
