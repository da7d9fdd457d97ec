// CASE global_padding: state kept in the alignment padding between two
// module variables that kopt lists and checks. data.c compares only each
// symbol's own bytes (cuModuleGetGlobal's size: 8 bytes here), not the
// 248 bytes of section padding that __align__(256) leaves after the lower
// one, so the record there is never seen. The two tables are read, never
// written: the listed variables keep their load-time bytes.

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0) {
			char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
			char *low = lo < hi ? lo : hi; // padding follows the lower one
			unsigned long long *rec = (unsigned long long *)(low + 128);
			int s = CHEAT ? decide(rec, launch_id(y), key) : 0;
			// keep the tables alive (they multiply by one)
			skip = s * (int)(kopt_scale_lo[0] * kopt_scale_hi[1]);
		}
	}
	__syncthreads();
	body(x, y, n, skip);
}
