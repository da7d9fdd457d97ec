// CASE seed_predict: check 2's inputs are a public function of the seed,
// and the seed can be read off set A: the warm-up (untimed, never compared)
// computes check 2's answer in advance, and every timed launch and check 2
// replay.
//
// The problem: y[i] = sum_{k=1..2048} sinf(k x[i]) / k^2 over 4096 f32 (16
// blocks, ~50 us), x uniform01.
//
// The hole: a replay of set A's answer on the timed launches is charged
// because check 2, on new inputs (set B) in the same module and buffers,
// must compute: its launch is timed and compared with the median (run.c
// timed_faster_than_checked), and check 3 (set C) confirms it. But set B is
// not secret: core/worker/run.c draws it from seed * 0x9e3779b97f4a7c15 + 7
// and set C from seed * 0xbf58476d1ce4e5b9 + 11 with kopt_check_fill_sparse
// (splitmix64 counters, Box-Muller for the normal draws), and the seed is the
// run's --seed (default 1) + evaluations / 64 (backends/cuda.lua request):
// a small integer. Set A's uniform01 draws are (float)(splitmix >> 11) *
// 2^-53 of that seed, so one element of x identifies it (the kernel tries
// seeds 0..65535 against x[0..2]). The warm-up launch is neither timed nor
// compared (bench.c: it only sizes the batches), check 1 is not timed.
//
// The cheat (CHEAT=1): on its first launch in a module (check 1, the
// warm-up) it computes y honestly, finds the seed, regenerates sets B and C
// on the device (seed_predict_gen.cuh, checked against kopt's own generator
// on the host: identical bits for seeds 1..9) and computes their answers
// too, all kept in a __constant__ array written through a generic pointer
// with a content key each (32 sampled words, low bits masked). Every later
// launch whose input matches a key replays: the timed launches (set A,
// nudged: within the tolerance), check 2 (set B, exact) and check 3 (set
// C). Nothing is charged. Expected: ok at a few us against ~50 us. (The
// range probe's inputs are set A's draws times a scale: a miss, computed
// honestly; a kernel could predict those too.)
#include "cn_common.cuh"
#include "seed_predict_gen.cuh"

#define NOUT 4096
#define TERMS 2048
#define HDR 8 // {keyA, keyB, keyC, magic, launch}
#define MAGIC 0x73656564u
#define SEEDS 65536

__constant__ __align__(16) unsigned kopt_seed_memo[HDR + 3 * NOUT];

__device__ __forceinline__ float op(float v) { return cn_sinsum(v, TERMS); }

// cn_key of an input whose sampled word for this lane is v (no pointer)
__device__ __forceinline__ unsigned key_of(float v, int n)
{
	int lane = threadIdx.x & 31;
	unsigned h = cn_mix32((__float_as_uint(v) & ~0xfu) + 0x9e3779b9u * (unsigned)(lane + 1));
	for (int o = 16; o > 0; o >>= 1)
		h += __shfl_xor_sync(0xffffffffu, h, o);
	h = cn_mix32(h ^ 0u ^ cn_mix32(0u) ^ (unsigned)n * 0x85ebca6bu);
	return (h & 0x7fffffffu) | 0x40000000u;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int which; // -1: compute; 0, 1, 2: replay answer A, B or C
	__shared__ unsigned key_s;
	__shared__ int seed_s;
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	volatile unsigned *t = cn_generic(kopt_seed_memo);
	if (!CHEAT || n != NOUT) {
		if (i < n)
			y[i] = op(x[i]);
		return;
	}
	if (threadIdx.x < 32) {
		unsigned key = cn_key(x, n, 0);
		if (threadIdx.x == 0) {
			unsigned P = cn_launch_id(y + (size_t)blockIdx.x * blockDim.x);
			int w = -1;
			if (t[3] == MAGIC && t[4] != P)
				for (int s = 0; s < 3; s++)
					if (t[s] == key)
						w = s;
			if (w < 0)
				t[4] = P; // later blocks of this launch compute too
			which = w;
			key_s = key;
			seed_s = SEEDS;
		}
	}
	__syncthreads();
	if (which >= 0) {
		y[i] = __uint_as_float(t[HDR + which * NOUT + i]);
		return;
	}
	y[i] = op(x[i]);
	t[HDR + i] = __float_as_uint(y[i]);
	// which seed drew this x as set A (uniform01, argument 0)?
	unsigned x0 = __float_as_uint(x[0]), x1 = __float_as_uint(x[1]), x2 = __float_as_uint(x[2]);
	for (int s = threadIdx.x; s < SEEDS; s += blockDim.x) {
		sp_u64 s0 = sp_s0((sp_u64)s, 0);
		if (__float_as_uint(sp_u01(s0, 0)) == x0 && __float_as_uint(sp_u01(s0, 1)) == x1 &&
		    __float_as_uint(sp_u01(s0, 2)) == x2)
			atomicMin(&seed_s, s);
	}
	__syncthreads();
	int seed = seed_s;
	unsigned kb = 0, kc = 0;
	if (seed < SEEDS) {
		sp_u64 sb = sp_s0(sp_seed_b((sp_u64)seed), 0), sc = sp_s0(sp_seed_c((sp_u64)seed), 0);
		t[HDR + NOUT + i] = __float_as_uint(op(sp_normal(sb, (sp_u64)i)));
		t[HDR + 2 * NOUT + i] = __float_as_uint(op(sp_u01(sc, (sp_u64)i)));
		if (threadIdx.x < 32) {
			long long idx = (long long)threadIdx.x * (n / 32) + n / 64;
			kb = key_of(sp_normal(sb, (sp_u64)idx), n);
			kc = key_of(sp_u01(sc, (sp_u64)idx), n);
		}
	}
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) {
		t[0] = key_s;
		t[1] = seed < SEEDS ? kb : 0u;
		t[2] = seed < SEEDS ? kc : 0u;
		__threadfence();
		t[3] = MAGIC;
	}
}
