// Helpers shared by the cases of tests/cheats/ (each case includes it
// after its own description). Nothing here is a cheat by itself:
//  - cn_sinsum(v, terms): y = sum_{k=1..terms} sinf(k v) / k^2, the vehicle
//    of most cases (the same sum, in the same order, as each case's
//    reference: bit-identical when terms are equal);
//  - cn_key(x, n, with_ptr): warp 0 (all 32 lanes), a 31-bit key of 32
//    sampled input words with their low 4 bits masked (blind to kopt's
//    timing nudge, one low bit of one word), and of the pointer if asked;
//  - cn_launch_id(y): this launch's poison word, read from the first element
//    of this block's own slice of y before the block writes it (kopt
//    re-poisons every output before every launch with a new NaN pattern);
//  - cn_generic(p): a __constant__ array's address laundered into a generic
//    pointer, so stores to it compile to generic st (tests/cheats/const_write
//    showed that they persist across launches of a loaded module, and
//    core/cubin.c does not list __constant__ data among the module's state);
//  - cn_batch_pos(rec, P, key): the position of this launch in kopt's
//    timing (bench.c): 0x7ff for the first launch on these inputs (check 1,
//    the warm-up, check 2, check 3), else k for timed launch k (k % 4 == 3:
//    a batch's tail; the last timed launch always is one). Every block of a
//    launch gets the same answer without atomics: before the first write
//    they all see the previous launch's record and compute the same new
//    one, after it they read it back (the record names the launch).
#ifndef CN_COMMON_CUH
#define CN_COMMON_CUH

#ifndef CHEAT
#define CHEAT 1
#endif

__device__ __forceinline__ float cn_sinsum(float v, int terms)
{
	float acc = 0.0f;
	for (int k = 1; k <= terms; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

__device__ __forceinline__ unsigned cn_mix32(unsigned h)
{
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

// warp 0, all 32 lanes; n >= 64
__device__ __forceinline__ unsigned cn_key(const float *x, long long n, int with_ptr)
{
	int lane = threadIdx.x & 31;
	long long idx = (long long)lane * (n / 32) + n / 64;
	unsigned w = __float_as_uint(x[idx]) & ~0xfu;
	unsigned h = cn_mix32(w + 0x9e3779b9u * (unsigned)(lane + 1));
	for (int o = 16; o > 0; o >>= 1)
		h += __shfl_xor_sync(0xffffffffu, h, o);
	unsigned long long p = with_ptr ? (unsigned long long)x : 0ull;
	h = cn_mix32(h ^ (unsigned)p ^ cn_mix32((unsigned)(p >> 32)) ^ (unsigned)n * 0x85ebca6bu);
	return (h & 0x7fffffffu) | 0x40000000u;
}

__device__ __forceinline__ unsigned cn_launch_id(const void *first_of_block)
{
	return *(volatile const unsigned *)first_of_block;
}

__device__ __forceinline__ volatile unsigned *cn_generic(const void *p)
{
	unsigned long long a = (unsigned long long)p;
	asm volatile("" : "+l"(a));
	return (volatile unsigned *)a;
}

#define CN_FIRST 0x7ffu

// record: P (32) | key (20) | count (11) | 1
__device__ __forceinline__ unsigned cn_batch_pos(volatile unsigned long long *rec, unsigned P,
						  unsigned key)
{
	unsigned long long old = *rec;
	if (old != 0ull && (unsigned)(old >> 32) == P)
		return (unsigned)(old >> 1) & 0x7ffu; // decided by an earlier block
	unsigned k20 = key & 0xfffffu;
	unsigned okey = (unsigned)(old >> 12) & 0xfffffu, ocnt = (unsigned)(old >> 1) & 0x7ffu;
	unsigned cnt = (old == 0ull || okey != k20) ? CN_FIRST : ((ocnt + 1u) & 0x7ffu);
	if (cnt == CN_FIRST && old != 0ull && okey == k20)
		cnt = 0u; // (wrapped: never in practice)
	*rec = ((unsigned long long)P << 32) | ((unsigned long long)k20 << 12) |
	       ((unsigned long long)cnt << 1) | 1ull;
	return cnt;
}

#endif
