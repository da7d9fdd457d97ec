// CASE batch_tail: compute only the launches whose output can be compared.
// Idea: of all timed launches, kopt compares the output of the last one only
// (run.c check_timed_output), and bench.c always queues the samples in
// batches of BATCH_MAX = 4 (when the warm-up took <= 2 ms; the loop ends only
// after a whole batch, and max_samples = 100 is a multiple of 4), so the
// last timed launch is always the 4th of its batch, i.e. timed launch
// number k with k % 4 == 3. The kernel counts its launches in the module
// (after the warm-up, with the same masked-input key: the nudge flips bit
// 0 only) and skips work (writes y = x) on timed launches k % 4 != 3.
// CHEAT=1 skips k % 4 in {1, 2} (half the samples: the median lands between
// the two), CHEAT=2 skips k % 4 in {0, 1, 2} (three quarters: the median is
// the skip time). Check 1 runs on a fresh module (no record: compute), check
// 2 has new inputs (another key: compute). The counter lives in the
// alignment padding after a checked module variable (global_padding's
// hole, which the module-variable check does not cover); any storage would
// do, the point is which launches are ever compared.
// Once it passed (H200: CHEAT=2 26x faster, CHEAT=1 1.9x), when only the
// last timed output was compared. Now every timed launch's output is
// compared on the device, outside the timed window (compare_dev.c,
// kopt_worker_samples_*): a skipped launch's y = x is wrong there.
#include "sinsum_prelude.cuh"

__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

// record: launch id P (32) | key (20) | count (11) | skip (1)
extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n) & 0xfffffu; // 20 bits, low input bits masked
		if (threadIdx.x == 0) {
			int s = 0;
			if (CHEAT) {
				char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
				char *low = lo < hi ? lo : hi;
				unsigned long long *rec = (unsigned long long *)(low + 128);
				unsigned P = launch_id(y);
				unsigned long long old = *(volatile unsigned long long *)rec;
				for (;;) {
					if (old != 0 && (unsigned)(old >> 32) == P) { // decided already
						s = (int)(old & 1);
						break;
					}
					unsigned okey = (unsigned)(old >> 12) & 0xfffffu;
					unsigned cnt = (unsigned)(old >> 1) & 0x7ffu;
					// first launch of the module or new inputs: the warm-up
					// (or a check) computes, and the next launch is timed k = 0
					cnt = (old == 0 || okey != key) ? 0x7ffu : ((cnt + 1) & 0x7ffu);
					unsigned k = cnt & 3u;
					int d = cnt != 0x7ffu && (CHEAT == 2 ? k != 3u : (k == 1u || k == 2u));
					unsigned long long nw = ((unsigned long long)P << 32) |
								((unsigned long long)key << 12) |
								((unsigned long long)cnt << 1) | (unsigned long long)d;
					unsigned long long prev = atomicCAS(rec, old, nw);
					if (prev == old) {
						s = d;
						break;
					}
					old = prev;
				}
				s *= (int)(kopt_scale_lo[0] * kopt_scale_hi[1]); // keep the tables alive
			}
			skip = s;
		}
	}
	__syncthreads();
	body(x, y, n, skip);
}
