// CASE easy_check2: a replay that the check-2 charge lets through because
// the honest kernel is itself faster on check 2's inputs.
//
// The problem: a ReLU-sparse GEMV, y[m] = sum_k relu(x[k]) W[k][m], W stored
// k-major (K x M, 256 MB f32), x uniform01 (set A: every activation
// positive, all of W read) and normal in check 2 (set B: half of them <= 0).
// The honest kernel skips the rows of W whose activation is <= 0 (the
// "sparse activation" trick of ReLU LLM kernels): on set B it reads half of
// W and is about 2x faster than on set A.
//
// The hole: the charge compares the timed median with check 2's one launch
// on new inputs, "an honest kernel's launch there is not slower than its
// median but for a data-dependent kernel on other data" (run.c,
// timed_faster_than_checked). Check 3 (set A's own distributions) only runs
// when check 2 was slower than 2x the median + 10 us. A kernel that is
// honestly FASTER on set B lowers the bar itself: its timed launches can
// replay up to ~2 x (its check-2 time / its timed time) x faster before any
// charge, here ~4x instead of 2x.
//
// The cheat (CHEAT=1): a memo of the part of the sum over k >= K' (K' =
// PCT % of K), kept in a __constant__ array written through a generic
// pointer and keyed on x's pointer and 32 sampled words (low bits masked: the
// nudge is invisible) plus 8 of W. On a hit it computes the rows k < K'
// fresh and adds the memo: right within the tolerance on every timed launch
// (only a nudged word among the memoised rows is stale), PCT % of the
// honest time. Check 1 (fresh module) and check 2 (new inputs) miss and
// compute everything honestly (and store). PCT=30: the median is ~0.3 of the
// honest time while check 2's launch is ~0.5 of it: not charged (a dense
// check 2 would charge it). PCT=0 replays all: charged (the control).
#include "cn_common.cuh"

#ifndef PCT
#define PCT 30
#endif
#define KDIM 8192
#define MDIM 8192
#define COLS 64   // columns per block (32 lanes x float2)
#define WARPS 16  // warps per block, splitting k
#define MAGIC 0x65617379u

__constant__ __align__(16) unsigned kopt_gemv_memo[MDIM + 4]; // tails of y, then {key, launch, magic}

// this warp's partial sums over k in [k0, k1) for its block's 64 columns
__device__ __forceinline__ float2 part(const float *x, const float *W, int m0, int k0, int k1)
{
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float2 acc = make_float2(0.0f, 0.0f);
	const float2 *w2 = (const float2 *)(W + m0) + lane;
#pragma unroll 8
	for (int k = k0 + warp; k < k1; k += WARPS) {
		float a = __ldg(x + k);
		if (a > 0.0f) { // relu: a row of W is read only for a positive activation
			float2 w = __ldg(w2 + (size_t)k * (MDIM / 2));
			acc.x += a * w.x;
			acc.y += a * w.y;
		}
	}
	return acc;
}

// sums the 16 warps' partials: lane 2j, 2j+1 of warp 0 hold columns 2j, 2j+1
__device__ __forceinline__ float2 reduce(float2 v, float2 *sm)
{
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	sm[warp * 32 + lane] = v;
	__syncthreads();
	float2 s = make_float2(0.0f, 0.0f);
	if (warp == 0)
		for (int w = 0; w < WARPS; w++) {
			s.x += sm[w * 32 + lane].x;
			s.y += sm[w * 32 + lane].y;
		}
	__syncthreads();
	return s;
}

extern "C" __global__ void __launch_bounds__(512) cheat(const float *x, const float *W, float *y)
{
	__shared__ float2 sm[WARPS * 32];
	__shared__ int hit;
	__shared__ unsigned key_s;
	int m0 = blockIdx.x * COLS, lane = threadIdx.x & 31;
	int ksplit = (KDIM * PCT / 100) & ~(WARPS - 1);
	if (threadIdx.x < 32) {
		unsigned key = CHEAT ? cn_key(x, KDIM, 1) : 0u;
		if (threadIdx.x == 0) {
			int h = 0;
			if (CHEAT) {
				unsigned wk = 0;
				for (int j = 0; j < 8; j++)
					wk = cn_mix32(wk ^ (__float_as_uint(W[(size_t)j * 977 * MDIM + j * 131]) & ~0xfu));
				key = (cn_mix32(key ^ wk) & 0x7fffffffu) | 0x40000000u;
				unsigned P = cn_launch_id(y + m0);
				volatile unsigned *t = cn_generic(kopt_gemv_memo);
				h = t[MDIM + 2] == MAGIC && t[MDIM] == key && t[MDIM + 1] != P;
				if (!h)
					t[MDIM + 1] = P; // first: later blocks of this launch never replay
			}
			key_s = key;
			hit = h;
		}
	}
	__syncthreads();
	if (!CHEAT) { // honest: all of k
		float2 s = reduce(part(x, W, m0, 0, KDIM), sm);
		if (threadIdx.x < 32)
			((float2 *)(y + m0))[lane] = s;
		return;
	}
	volatile unsigned *t = cn_generic(kopt_gemv_memo);
	float2 fresh = reduce(part(x, W, m0, 0, ksplit), sm);
	if (hit) {
		if (threadIdx.x < 32) {
			float2 tail = make_float2(__uint_as_float(t[m0 + 2 * lane]),
						  __uint_as_float(t[m0 + 2 * lane + 1]));
			((float2 *)(y + m0))[lane] = make_float2(fresh.x + tail.x, fresh.y + tail.y);
		}
		return;
	}
	float2 tail = reduce(part(x, W, m0, ksplit, KDIM), sm);
	if (threadIdx.x < 32) {
		((float2 *)(y + m0))[lane] = make_float2(fresh.x + tail.x, fresh.y + tail.y);
		t[m0 + 2 * lane] = __float_as_uint(tail.x);
		t[m0 + 2 * lane + 1] = __float_as_uint(tail.y);
		__threadfence();
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		t[MDIM] = key_s;
		__threadfence();
		t[MDIM + 2] = MAGIC;
	}
}
