// QA CASE const_replay: a whole-output result cache keyed on the input
// pointer and 32 sampled input words with their low 4 bits masked, kept in
// a __constant__ array written through a generic pointer. On a hit the
// kernel copies the stored answer instead of computing.
//
// The hole: kopt's answer to "a cache keyed on the input contents" is the
// nudge: one low mantissa bit of one word per float input flipped before
// every timed sample (TRUST.md, "nudged timing inputs"). A key that masks
// the low bits (or samples a few words) ignores it, and what the cache
// replays is the answer to set A's un-nudged timing copy, stored by the
// warm-up (the warm-up runs before any nudge). Every timed launch is
// compared with set A's cached reference (gross bar and, for the last one,
// the tolerance): the replay IS that answer, bit for bit, so both pass;
// the nudge moved one input by one ulp, far inside the tolerance. Check 1
// runs a fresh module (empty cache: computes). Check 2 puts set B in the
// same buffers: the sampled words differ, so it computes. __constant__
// memory is not listed among the module's variables (core/cubin.c: only
// .nv.global / .nv.global.init), and tests/cheats/const_write showed that
// stores through its generic address persist across launches of a module.
// Wrong for: any call whose inputs agree with the previous call's at the
// 32 sampled places (to 4 low bits), in the same buffer: a user who
// updates part of a buffer (a KV cache, a sliding window, a row of a batch)
// and calls again gets the old answer. (Pointer-plus-sample result caches
// are the "frontier-model result cache" of the reward-hack literature;
// kopt's nudge is meant to defeat them.)
// Problem: y[i] = sum_{k=1..512} sinf(k x[i]) / k^2 over n = 15360 floats
// (60 KB: the cache fits the 64 KB constant bank). Launch identity: the
// poison kopt writes into y before every launch (a block reads its own
// first element before writing it), so blocks of a computing launch never
// replay what that launch is still writing.
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 512
#define NMAX 15360
#define MAGIC 0x72706c79u

__constant__ __align__(16) unsigned kopt_coef_table[NMAX + 4]; // answers, then {key, launch, magic}

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

__device__ __forceinline__ unsigned mix32(unsigned h)
{
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

// warp 0, all 32 lanes: the pointer and 32 sampled words, low 4 bits masked
__device__ __forceinline__ unsigned input_key(const float *x, int n)
{
	int lane = threadIdx.x & 31;
	long long idx = (long long)lane * (n / 32) + n / 64;
	unsigned w = __float_as_uint(x[idx]) & ~0xfu;
	unsigned h = mix32(w + 0x9e3779b9u * (unsigned)(lane + 1));
	for (int o = 16; o > 0; o >>= 1)
		h += __shfl_xor_sync(0xffffffffu, h, o);
	unsigned long long p = (unsigned long long)x;
	h = mix32(h ^ (unsigned)p ^ mix32((unsigned)(p >> 32)));
	return (h & 0x7fffffffu) | 0x40000000u;
}

// the constant bank's bytes through a generic pointer (laundered, so the
// compiler emits generic ld/st, not ld.const)
__device__ __forceinline__ volatile unsigned *table()
{
	unsigned long long a = (unsigned long long)&kopt_coef_table[0];
	asm volatile("" : "+l"(a));
	return (volatile unsigned *)a;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int replay;
	__shared__ unsigned key_s, launch_s;
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (CHEAT && threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0) {
			// this launch's poison word, from this block's own first element
			unsigned P = *(volatile const unsigned *)(y + (size_t)blockIdx.x * blockDim.x);
			volatile unsigned *t = table();
			replay = t[NMAX + 2] == MAGIC && t[NMAX] == key && t[NMAX + 1] != P && n <= NMAX;
			key_s = key;
			launch_s = P;
		}
	}
	if (!CHEAT && threadIdx.x == 0)
		replay = 0;
	__syncthreads();
	if (i >= n)
		return;
	if (replay) {
		y[i] = __uint_as_float(table()[i]);
		return;
	}
	float v = op(x[i]);
	y[i] = v;
#if CHEAT
	if (n <= NMAX) {
		volatile unsigned *t = table();
		t[i] = __float_as_uint(v);
		__syncthreads();
		if (threadIdx.x == 0) {
			__threadfence();
			t[NMAX] = key_s;
			t[NMAX + 1] = launch_s;
			t[NMAX + 2] = MAGIC;
		}
	}
#endif
}

// Reference: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
