// CASE const_write: state kept in a __constant__ array, written through a
// generic pointer. core/cubin.c lists only .nv.global / .nv.global.init
// ("__constant__ data is read-only to kernels and is not listed"); if the
// driver maps the constant bank's backing memory writable, a store through
// its generic address persists across launches of the loaded module and
// nothing compares it. (If the store faults instead, the verdict is crash:
// the verifier wins.) The pointer is laundered through an integer so the
// compiler emits a generic st, not a constant-space access.

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

__constant__ __align__(8) unsigned long long kopt_tuning_table[4];

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0) {
			unsigned long long a = (unsigned long long)&kopt_tuning_table[1];
			asm volatile("" : "+l"(a));
			skip = CHEAT ? decide((unsigned long long *)a, launch_id(y), key) : 0;
		}
	}
	__syncthreads();
	body(x, y, n, skip);
}
