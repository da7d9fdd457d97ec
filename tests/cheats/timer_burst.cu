// CASE timer_burst: %globaltimer. Timed samples are queued back to back
// (batches of 4 behind one blocking kernel, ~30-40 us from one end to the
// next start), while check 1 and check 2 follow host work (guard scans,
// hashes, copies, set B) and the warm-up follows nothing. A launch that
// starts less than WINDOW_NS after the previous launch of this module ended
// skips. The end time and the decision record live in a __device__ variable
// with a name of 138 characters (as in longname_global): if that hole is
// closed this case is caught by the module-variable check, so it isolates
// the detection trick, not the storage.

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

#ifndef WINDOW_NS
#define WINDOW_NS 100000ull
#endif
extern "C" __device__ __align__(16) unsigned long long t_kopt_tile_scratch_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa[2];

__device__ __forceinline__ unsigned long long now_ns(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	unsigned long long *rec = &t_kopt_tile_scratch_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa[0], *last_end = &t_kopt_tile_scratch_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa[1];
	if (threadIdx.x == 0) {
		int s = 0;
		if (CHEAT) {
			unsigned P = launch_id(y);
			unsigned long long cur = *(volatile unsigned long long *)rec;
			if (cur != 0 && (unsigned)(cur >> 32) == P) {
				s = (int)(cur & 1);
			} else {
				unsigned long long e = *(volatile unsigned long long *)last_end;
				s = e != 0 && now_ns() - e < WINDOW_NS;
				*(volatile unsigned long long *)rec =
				    ((unsigned long long)P << 32) | 2ull | (unsigned long long)s;
			}
		}
		skip = s;
	}
	__syncthreads();
	body(x, y, n, skip);
	__syncthreads();
	if (CHEAT && threadIdx.x == 0)
		atomicMax(last_end, now_ns());
}
