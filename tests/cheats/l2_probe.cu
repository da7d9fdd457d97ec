// CASE l2_probe: stateless, a cache-temperature side channel. Before every
// timed sample bench.c flushes the L2 (a memset of the L2's size) after
// re-poisoning y; before the checks and the warm-up it does not, so the
// poison memset has just left y's lines in L2. Warp 0 of each block times
// a first load of 8 lines of its own slice of y (the warp waits for the
// slowest) against a second load of the same lines (clock64): a first load
// much slower than the second means DRAM, i.e. a timed sample, and the block
// skips. All 1024 blocks are resident at once, so one block that misjudges
// a timed sample as warm costs the whole honest time: hence the slowest of 8
// lines. Needs y smaller than the L2 (16 MB here).

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

#ifndef L2_THRESH
#define L2_THRESH 150
#endif

// Loads *p (L2 or DRAM, not L1) and then reads the SM clock. The clock read
// is predicated on the loaded value (n never equals a NaN poison word), so it
// cannot issue before the load completes: the returned time includes the
// load's latency.
__device__ __forceinline__ long long load_then_clock(const unsigned *p, int n)
{
	long long t;
	asm volatile("{\n\t.reg .u32 v;\n\t.reg .pred q;\n\t"
		     "ld.global.cg.u32 v, [%1];\n\t"
		     "setp.ne.u32 q, v, %2;\n\t"
		     "@q mov.u64 %0, %%clock64;\n\t"
		     "@!q mov.u64 %0, 0;\n\t}"
		     : "=l"(t)
		     : "l"(p), "r"(n)
		     : "memory");
	return t;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		int s = 0;
		if (CHEAT) {
			int lane = threadIdx.x;
			// 8 lines (128 B apart) of this block's first slice of y, 4 lanes each
			const unsigned *p =
			    (const unsigned *)(y + (size_t)blockIdx.x * blockDim.x + (lane & 7) * 32);
			const unsigned *q = p + 2048; // 8 KB on, same 2 MB page: warms the TLB
			// each address depends on the previous clock read (z is 0 at run
			// time, unknown to the compiler), so the loads run one after the
			// other instead of overlapping
			long long z = (long long)(n >> 31);
			long long t0 = load_then_clock(q, n);
			long long t1 = load_then_clock(p + (t0 & z), n); // first touch: L2 or DRAM
			long long t2 = load_then_clock(p + (t1 & z), n); // second touch: L2
			s = (t1 - t0) > (t2 - t1) + L2_THRESH;
		}
		if (threadIdx.x == 0)
			skip = s;
	}
	__syncthreads();
	body(x, y, n, skip);
}
