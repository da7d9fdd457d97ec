// The sin-sum vehicle shared by the cheat cases of tests/cheats/ (included
// by each case after its own description).
// Problem: y[i] = op(x[i]) = sum_{k=1..64} sinf(k x) / k^2 over n floats,
// x ~ uniform01 in check 1 and the timing copy, normal in check 2.
// Honest cost ~0.3 ms on an H100 (accurate sinf is ~40 instructions); a
// cheat's "skip" launch writes y = x instead (a plain copy, ~12 us: above the
// speed-of-light floor of the spec's declared 8 N bytes, so lightspeed.lua
// does not flag it). CHEAT=0 is the honest kernel, CHEAT=1 the cheat.
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64

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

// Warp 0, all 32 lanes: a 31-bit key of (the input pointer, 32 sampled input
// words with their low 4 bits masked). kopt's timing nudge flips bit 0 of one
// word per sample, so every timed launch gets the same key; check 2's set B
// (other seed, other distribution) gets another.
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

// This launch's poison word: the first element of this block's own slice of
// y, read before the block writes anything (no other block writes it). kopt
// re-poisons y with a new NaN pattern before every launch, so it names the
// launch.
__device__ __forceinline__ unsigned launch_id(const float *y)
{
	return *(volatile const unsigned *)(y + (size_t)blockIdx.x * blockDim.x);
}

// Thread 0: one 64-bit record {poison, key, skip}. A block that finds this
// launch's poison follows the decision already taken; otherwise it skips when
// the previous launch had the same key (same buffers, same inputs: a timed
// repeat) and computes when not (check 1: fresh module or first use; check 2:
// new inputs). Every block of a launch decides the same way without atomics:
// before the first write they all see the same old record, after it they
// follow it.
__device__ __forceinline__ int decide(unsigned long long *rec, unsigned P, unsigned key)
{
	unsigned long long cur = *(volatile unsigned long long *)rec;
	unsigned rp = (unsigned)(cur >> 32), rk = (unsigned)(cur >> 1) & 0x7fffffffu;
	if (rk != 0 && rp == P)
		return (int)(cur & 1);
	int d = rk == key;
	*(volatile unsigned long long *)rec =
	    ((unsigned long long)P << 32) | ((unsigned long long)key << 1) | (unsigned long long)d;
	return d;
}

// The grid-stride body: compute, or (skip) write a cheap copy of x.
__device__ __forceinline__ void body(const float *x, float *y, int n, int skip)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = skip ? x[i] : op(x[i]);
}
