// CASE eighth_gap: coarser on the timed launches that are only compared
// grossly, and just inside the tolerance (not exact) on the one compared
// last, so that the rule against "less exact when timed" never fires.
//
// The problem: y[i] = sum_{k=1..64} sinf(k x[i]) / k^2 over 4M f32, x
// uniform01, with a spec tolerance of rel. L2 1e-2 (an approximate kernel's
// spec; per-element bound 20x that). Truncating the sum is a legitimate
// trade there: T terms give rel. L2 7.1e-3 at T=24 (u01; 6.2e-3 normal),
// 2.0e-2 at T=12 (~1.8e-2 at 13), 3.5e-2 at T=8, measured on the CPU. CHEAT=2 is that
// honest shortcut: 24 terms everywhere, ok, ~2.7x faster than 64.
//
// The hole: each timed launch but the last is compared only grossly
// (compare_dev.c: rel. L2 above max(4 x tol, 1e-3), here 4e-2), and
// less_exact_when_timed fails a kernel only when 2 in 5 of those launches
// are above max(8 x the LAST launch's error, tol). The rule assumes the last
// launch is exact when the kernel is cheating (tail_exact_tf32, cap_last,
// CHEAT=3 here: caught). A kernel whose last launch is itself at ~0.7 tol
// raises the bar to ~5.7 tol, above the gross bar: the other timed launches
// may then be off by up to 4 tol.
//
// The cheat (CHEAT=1): 24 terms on every launch that may be compared at the
// tolerance (check 1, the warm-up, check 2, check 3: the first launch on new
// inputs; and every batch tail, timed k % 4 == 3, which the last timed
// launch always is), TC=13 terms (rel. L2 ~1.8e-2, under the gross bar 4e-2
// and under 8 x 7.1e-3) on the other 3 in 4 timed launches: the median is
// the 13-term time, ~1.8x faster than the fastest kernel within the
// tolerance (CHEAT=2), ~4.5x the honest one. Check 2 runs 24 terms, under
// the charge's 2x the median + 10 us. TC=8 (3.5e-2, still under both bars)
// is a control: 3x faster than check 2, so it is charged. The launch count lives in a
// __constant__ array written through a generic pointer (any storage kopt
// cannot list would do: the hole here is the bar, not the storage).
// CHEAT=3: the same with the tails exact (64 terms): the rule sees it.
#include "cn_common.cuh"

#ifndef TC
#define TC 13
#endif
#define TL 24

__constant__ __align__(16) unsigned long long kopt_eighth_rec[2];

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int terms;
	if (threadIdx.x < 32) {
		unsigned key = CHEAT == 1 || CHEAT == 3 ? cn_key(x, n, 1) : 0u;
		if (threadIdx.x == 0) {
			int t = CHEAT == 0 ? 64 : TL;
			if (CHEAT == 1 || CHEAT == 3) {
				unsigned P = cn_launch_id(y + (size_t)blockIdx.x * blockDim.x);
				unsigned pos = cn_batch_pos(
				    (volatile unsigned long long *)cn_generic(kopt_eighth_rec), P, key);
				int tail_or_new = pos == CN_FIRST || (pos & 3u) == 3u;
				t = tail_or_new ? (CHEAT == 3 && pos != CN_FIRST ? 64 : TL) : TC;
			}
			terms = t;
		}
	}
	__syncthreads();
	int stride = gridDim.x * blockDim.x, t = terms;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = cn_sinsum(x[i], t);
}
