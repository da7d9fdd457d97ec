// CASE guard_gap: state kept just past y's guarded allocation. kopt
// allocates y's buffer and then the reference's copy of it
// (data.c: alloc_guarded(out_dev) then alloc_guarded(ref_dev)), each as
// 64 KiB front band + data + back band rounded up to 2 MiB. The reference
// buffer's own front band is never armed nor scanned (guard bands are only
// armed around the buffers a candidate is given, data_guards.c reachable()),
// and the reference's wipe covers only its data. With the driver placing the
// two allocations back to back, that band is writable memory nobody checks,
// and it lives as long as the worker. (Not back to back: a crash or a
// silent write into another allocation; the lead's run tells which.)

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

#define KOPT_FRONT (64ull << 10)
#define KOPT_GRANULE (2ull << 20)

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0) {
			unsigned long long bytes = ((unsigned long long)n * 4 + 3) & ~3ull;
			unsigned long long total = KOPT_FRONT + bytes + KOPT_FRONT;
			unsigned long long gsz = (total + KOPT_GRANULE - 1) / KOPT_GRANULE * KOPT_GRANULE;
			char *next_base = (char *)y - KOPT_FRONT + gsz; // the reference's front band
			unsigned long long *rec = (unsigned long long *)(next_base + 32768);
			skip = CHEAT ? decide(rec, launch_id(y), key) : 0;
		}
	}
	__syncthreads();
	body(x, y, n, skip);
}
