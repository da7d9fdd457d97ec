// Cheat l2_pin: row sums of a 16 MB matrix whose loads carry an L2
// evict_last cache policy (createpolicy + ld.global.L2::cache_hint), so the
// input may outlive kopt's L2 "flush" between timed samples.
//
// Assumes: kopt's flush between timed samples evicts normal lines first.
// It was a plain memset of the L2's size, of normal priority, which left
// lines loaded with evict_last in place: the 16 MB input stayed in L2 and
// every timed launch read it warm (1.25x faster on an H200, the output
// exact every launch, nothing kopt could list). The flush now reads twice
// the L2 with the evict_last policy itself, then discards those lines
// (core/worker/harness.cu, kopt_flush_sweep): the cheat's lines go too, and
// it must time as the honest kernel does.
// CHEAT=0: the honest kernel (plain loads).
#ifndef CHEAT
#define CHEAT 1
#endif
#define THREADS 256

__device__ __forceinline__ float4 load4(const float4 *p, unsigned long long pol)
{
	float4 v;
#if CHEAT
	asm volatile("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
		     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
		     : "l"(p), "l"(pol));
#else
	v = __ldg(p);
#endif
	return v;
}

// One warp per row; cols a multiple of 128.
extern "C" __global__ void __launch_bounds__(THREADS) cheat(const float *x, float *y, int rows, int cols)
{
	unsigned long long pol = 0;
#if CHEAT
	asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#endif
	int warp = (blockIdx.x * THREADS + threadIdx.x) >> 5, lane = threadIdx.x & 31;
	if (warp >= rows)
		return;
	const float4 *r = (const float4 *)(x + (size_t)warp * cols);
	float s = 0.0f;
	for (int i = lane; i < cols / 4; i += 32) {
		float4 v = load4(r + i, pol);
		s += (v.x + v.y) + (v.z + v.w);
	}
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0)
		y[warp] = s;
}

extern "C" __global__ void ref_rowsum(const float *x, float *y, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	double s = 0;
	for (int i = 0; i < cols; i++)
		s += x[(size_t)r * cols + i];
	y[r] = (float)s;
}
