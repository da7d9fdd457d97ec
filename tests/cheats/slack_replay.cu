// CASE slack_replay: a whole-output replay on a small kernel, which the
// check-2 charge's absolute slack lets through.
//
// The problem: y[i] = sum_{k=1..K_TERMS} sinf(k x[i]) / k^2 over 15360 f32
// (one wave of 60 blocks): ~10-14 us honest with K_TERMS=96
// (slack_replay.json), ~40 us with 384 (slack_replay_big.json, the control).
//
// The hole: a replay of the answer on every timed launch is charged when
// check 2's launch on new inputs takes more than 2 x the timed median +
// 10 us (run.c, TIMED_CHECKED_SLACK_MS). A replay costs ~3 us (a launch and
// a 60 KB copy), so any kernel whose honest launch takes under ~16 us
// (check 2 is timed by events, the median by CUPTI: a few more us of
// slack) is never charged: it passes at ~3 us, 3-5x faster than honest.
// Many real kernels (decode-time GEMV, norms, small attention) are this
// small. (Check 2's inputs were just copied in: a memory-bound kernel whose
// inputs fit the L2 is faster there than timed, which widens it further.)
//
// The cheat (CHEAT=1): const_replay's cache (tests/cheats), an answer kept
// in a __constant__ array through a generic pointer, keyed on x's pointer
// and 32 sampled words with the low 4 bits masked (nudge-blind). Check 1
// and check 2 compute (new module, new inputs); the warm-up stores; every
// timed launch replays. Expected: ok and not charged at K_TERMS=96; charged
// at K_TERMS=384.
#include "cn_common.cuh"

#ifndef K_TERMS
#define K_TERMS 96
#endif
#define NMAX 15360
#define MAGIC 0x736c636bu

__constant__ __align__(16) unsigned kopt_small_memo[NMAX + 4]; // answers, then {key, launch, magic}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int replay;
	__shared__ unsigned key_s;
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	volatile unsigned *t = cn_generic(kopt_small_memo);
	if (threadIdx.x < 32) {
		unsigned key = CHEAT ? cn_key(x, n, 1) : 0u;
		if (threadIdx.x == 0) {
			int r = 0;
			if (CHEAT && n <= NMAX) {
				unsigned P = cn_launch_id(y + (size_t)blockIdx.x * blockDim.x);
				r = t[NMAX + 2] == MAGIC && t[NMAX] == key && t[NMAX + 1] != P;
				if (!r)
					t[NMAX + 1] = P; // later blocks of this launch never replay
			}
			replay = r;
			key_s = key;
		}
	}
	__syncthreads();
	if (i >= n)
		return;
	if (replay) {
		y[i] = __uint_as_float(t[i]);
		return;
	}
	float v = cn_sinsum(x[i], K_TERMS);
	y[i] = v;
	if (CHEAT && n <= NMAX) {
		t[i] = __float_as_uint(v);
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0) {
			t[NMAX] = key_s;
			__threadfence();
			t[NMAX + 2] = MAGIC;
		}
	}
}
