// CASE longname_global: state kept across launches in a __device__ variable
// whose name has 138 characters. core/cubin.c once skipped every symbol
// name of 128 characters or more, so the worker never snapshotted or
// compared it, and check 2 gets new inputs, so the record says "compute".
// Names up to 1023 characters are now followed (a longer one refuses the
// module), and the last timed output is compared.

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

extern "C" __device__ __align__(8) unsigned long long kopt_tile_scratch_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa;

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0)
			skip = CHEAT ? decide(&kopt_tile_scratch_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, launch_id(y), key) : 0;
	}
	__syncthreads();
	body(x, y, n, skip);
}
