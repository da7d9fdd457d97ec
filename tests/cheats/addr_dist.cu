// CASE addr_dist: stateless. The timing copy of the inputs (scratch_dev) is
// allocated in setup_args (data.c) right before the output y and the
// reference's copy of y, so during timing and check 2 x lies about one
// guarded allocation (gsz) away from y, while check 1's set-A input is
// allocated later (kopt_worker_get_set), at least two allocations away. Check 2 is told apart from
// timing by the distribution: the timing copy is set A (uniform01, never
// negative), check 2 is set B (normal: negatives among any 32 samples).
// Skip = x adjacent to y and no negative sample. No state at all: the
// module-variable check, the nudge and check 2 have nothing to find.

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

#define KOPT_FRONT (64ull << 10)
#define KOPT_GRANULE (2ull << 20)

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		int lane = threadIdx.x;
		float v = x[(long long)lane * (n / 32) + n / 64];
		int neg = __any_sync(0xffffffffu, v < 0.0f);
		unsigned long long bytes = ((unsigned long long)n * 4 + 3) & ~3ull;
		unsigned long long total = KOPT_FRONT + bytes + KOPT_FRONT;
		unsigned long long gsz = (total + KOPT_GRANULE - 1) / KOPT_GRANULE * KOPT_GRANULE;
		unsigned long long px = (unsigned long long)x, py = (unsigned long long)y;
		unsigned long long dist = px > py ? px - py : py - px;
		if (lane == 0)
			skip = CHEAT ? (dist != 0 && dist < gsz + gsz / 2 && !neg) : 0;
	}
	__syncthreads();
	body(x, y, n, skip);
}
