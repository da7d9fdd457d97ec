// CASE heap_hidden: tests/cheats/heap_xeval (a result cache in the device
// heap, which outlives every module of the worker's CUDA context) with its
// malloc and free out of sight of the test that sends heap users to a
// worker of their own.
//
// The hole: since heap_xeval, a candidate "whose code allocates on the
// device heap" runs in a worker started for it (TRUST.md step 4), so its
// heap is fresh and the cache is charged like any replay. kopt decides that
// by a pattern search of the candidate's source text (backends/cuda.lua
// uses_heap: "malloc(", "free(", "new T", "operator new" in the .cu file,
// comments stripped). It does not see an allocation made in a header the
// source includes (HIDE=0: heap_hidden_impl.cuh), nor one whose name comes
// from a macro (HIDE=1: "#define HH_ALLOC malloc" then "HH_ALLOC(n)": the
// pattern wants "malloc" followed by "("). Neither form is unusual in
// device code (allocation helpers live in headers). The candidate then
// shares the worker with every other config, as before the fix: from its
// second evaluation on (any config of this source), check 1, every timed
// launch and check 2 replay, and nothing is charged (heap_xeval: 15-20x).
//
// The rest is heap_xeval's code unchanged but for the two calls. CHEAT=0:
// honest. UNROLL only makes another module; HIDE picks the disguise.
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef HIDE
#define HIDE 0
#endif
#if HIDE == 0
#include "heap_hidden_impl.cuh"
#else
#define HH_ALLOC malloc
#define HH_FREE free
__device__ __forceinline__ void *hh_alloc(size_t bytes) { return HH_ALLOC
	(bytes); }
__device__ __forceinline__ void hh_release(void *p) { HH_FREE
	(p); }
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#define K_TERMS 512
#define NMAX 15360
#define NSLOT 16
#define REC_BYTES 4136
#define MAGIC 0x68656170u

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
#pragma unroll UNROLL
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

// warp 0, all 32 lanes: 32 sampled words, low 4 bits masked, and n (no pointer)
__device__ __forceinline__ unsigned content_key(const float *x, int n)
{
	int lane = threadIdx.x & 31;
	long long idx = (long long)lane * (n / 32) + n / 64;
	unsigned w = __float_as_uint(x[idx]) & ~0xfu;
	unsigned h = mix32(w + 0x9e3779b9u * (unsigned)(lane + 1));
	for (int o = 16; o > 0; o >>= 1)
		h += __shfl_xor_sync(0xffffffffu, h, o);
	h = mix32(h ^ (unsigned)n * 0x85ebca6bu);
	return (h & 0x7fffffffu) | 0x40000000u;
}

__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

struct hrec {
	unsigned magic, pad;
	unsigned long long big;
};

// thread 0 of a block: the heap block (NSLOT headers, then NSLOT answers),
// or NULL. The first block of a module to get here looks it up in the heap.
__device__ unsigned long long *memo_base()
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi;
	unsigned long long *slot = (unsigned long long *)(low + 128);
	unsigned long long b = atomicCAS(slot, 0ull, 1ull);
	if (b == 0) {
		unsigned long long big = 2; // 2: no heap, compute
		volatile hrec *c = (volatile hrec *)hh_alloc(REC_BYTES);
		if (c != 0) {
			if (c->magic == MAGIC && c->big > 2) {
				big = c->big;
			} else {
				size_t bytes = NSLOT * sizeof(unsigned long long) + (size_t)NSLOT * NMAX * 4;
				unsigned long long *m = (unsigned long long *)hh_alloc(bytes);
				if (m != 0) {
					for (int s = 0; s < NSLOT; s++)
						((volatile unsigned long long *)m)[s] = 0;
					big = (unsigned long long)m;
					c->big = big;
					c->magic = MAGIC;
				}
			}
			__threadfence();
			hh_release((void *)c);
		}
		atomicExch(slot, big);
		b = big;
	} else {
		while (b == 1)
			b = *(volatile unsigned long long *)slot;
	}
	int one = (int)(kopt_scale_lo[0] * kopt_scale_hi[1]); // keep the tables alive
	return b > 2 ? (unsigned long long *)(b * (unsigned long long)one) : 0;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int mode; // 0: compute; 1: compute and store; 2: replay
	__shared__ int slot_s;
	__shared__ unsigned key_s;
	__shared__ unsigned long long *base_s;
	if (threadIdx.x < 32) {
		unsigned key = content_key(x, n);
		if (threadIdx.x == 0) {
			int md = 0, sl = 0;
			unsigned long long *b = 0;
			if (CHEAT && n <= NMAX)
				b = memo_base();
			if (b != 0) {
				volatile unsigned long long *hd = b;
				int s0 = key & (NSLOT - 1), s1 = (key >> 4) & (NSLOT - 1);
				unsigned long long h0 = hd[s0], h1 = hd[s1], nb = gridDim.x;
				if ((unsigned)(h0 >> 32) == key && (h0 & 0xffffffffull) == nb) {
					md = 2, sl = s0;
				} else if ((unsigned)(h1 >> 32) == key && (h1 & 0xffffffffull) == nb) {
					md = 2, sl = s1;
				} else {
					// store where no complete answer is kept, else in s1
					int full0 = (unsigned)(h0 >> 32) != key && (h0 & 0xffffffffull) == nb;
					md = 1, sl = full0 ? s1 : s0;
				}
			}
			mode = md;
			slot_s = sl;
			key_s = key;
			base_s = b;
		}
	}
	__syncthreads();
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float *data = base_s != 0 ? (float *)(base_s + NSLOT) + (size_t)slot_s * NMAX : 0;
	if (mode == 2) {
		if (i < n)
			y[i] = ((volatile float *)data)[i];
		return;
	}
	if (i < n) {
		float v = op(x[i]);
		y[i] = v;
		if (mode == 1)
			data[i] = v;
	}
	if (mode == 1) {
		__syncthreads();
		if (threadIdx.x == 0) {
			__threadfence();
			unsigned long long *hp = base_s + slot_s;
			unsigned long long old = *(volatile unsigned long long *)hp;
			for (;;) {
				unsigned long long nw = (unsigned)(old >> 32) == key_s
							    ? old + 1
							    : (((unsigned long long)key_s << 32) | 1ull);
				unsigned long long prev = atomicCAS(hp, old, nw);
				if (prev == old)
					break;
				old = prev;
			}
		}
	}
}
