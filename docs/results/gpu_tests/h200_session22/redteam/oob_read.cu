// QA CASE oob_read: reads past the end of its input (up to 508 bytes) with
// unconditional 16-byte vector loads, and masks what it read out there.
// The output is exact; the reads are undefined behaviour a user's buffer
// may not survive (a tight allocation ends at a page: a fault; or the next
// tensor's bytes: harmless only because they are masked).
//
// The hole: kopt catches out-of-range WRITES (guard bands armed with a word
// and scanned: data_guards.c), never reads. And compute-sanitizer cannot
// see these reads either: kopt_worker_alloc_guarded() makes each buffer one
// cuMemAlloc of 64 KiB front band + data + back band up to the 2 MiB
// granule, so a read into a band is inside a live allocation: memcheck's
// bounds are the allocation's, not the argument's (and the band is memset,
// so initcheck is clean too). The default sanitizer tool is racecheck
// anyway (sanitize.lua), which looks at shared memory only.
// Problem: y[r] = sum_j x[r][j]^2 over R = 16383 rows of L = 1001 floats
// (rows are not 16-byte aligned, and R * L is not a multiple of 4). One
// warp per row. Honest: scalar loads. Cheat: each lane loads a float4 at
// align4(row start) + 4 lane + 128 m, for m while the segment starts inside
// the row, with no bounds check; the elements outside [row start, row end)
// are masked. The last row's last segment reaches up to 127 floats past
// x's end, into its back guard band.
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif

extern "C" __global__ void cheat(const float *x, float *y, int R, int L)
{
	int lane = threadIdx.x & 31;
	int row = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
	if (row >= R)
		return;
	long long rs = (long long)row * L, re = rs + L;
	float s = 0.0f;
#if CHEAT
	long long a0 = rs & ~3ll;
	for (long long seg = a0; seg < re; seg += 128) {
		long long e = seg + 4 * lane;
		float4 v = *(const float4 *)(x + e); // no bounds check
		float w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int c = 0; c < 4; c++)
			if (e + c >= rs && e + c < re)
				s = fmaf(w[c], w[c], s);
	}
#else
	for (long long j = rs + lane; j < re; j += 32) {
		float v = x[j];
		s = fmaf(v, v, s);
	}
#endif
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0)
		y[row] = s;
}

// Reference: one thread per row, double accumulation.
extern "C" __global__ void ref_rowsq(const float *x, float *y, int R, int L)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= R)
		return;
	double s = 0;
	for (long long j = (long long)row * L; j < (long long)row * L + L; j++)
		s += (double)x[j] * x[j];
	y[row] = (float)s;
}
