// CASE ref_peek (diagnostic): copies y from where the reference's own copy
// of y would be if the driver placed it right after y's guarded allocation.
// run.c wipes the reference's outputs once copied to the host and runs the
// reference after the candidate, so this should read zeros: must be
// wrong. A crash instead means the allocations are not back to
// back (then guard_gap's address is wrong too).

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

#define KOPT_FRONT (64ull << 10)
#define KOPT_GRANULE (2ull << 20)

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	unsigned long long bytes = ((unsigned long long)n * 4 + 3) & ~3ull;
	unsigned long long total = KOPT_FRONT + bytes + KOPT_FRONT;
	unsigned long long gsz = (total + KOPT_GRANULE - 1) / KOPT_GRANULE * KOPT_GRANULE;
	const float *ref = (const float *)((const char *)y + gsz); // ref data = its base + front
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = CHEAT ? ref[i] : op(x[i]);
}
