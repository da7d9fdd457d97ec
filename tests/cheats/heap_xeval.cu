// CASE heap_xeval: a result cache that outlives the module, so that every
// evaluation after the first replays check 1, every timed launch AND
// check 2's launch, and the check-2 charge meets a replay on both sides.
//
// The hole: const_replay (tests/cheats) is now charged check 2's time
// (run.c:494-498 timed_faster_than_checked: check 2 runs on inputs new to
// the module, so it computes, and its launch is timed). But check 2's
// inputs are only new to the MODULE: set B (like set A) is drawn from the
// request's seed, which changes every 64 evaluations (TRUST.md, step 2;
// data.c kopt_worker_get_set caches the sets), and the device heap belongs
// to the context, which outlives every module kopt loads (TRUST.md on
// tests/cheats/heap_state and sabotage_next: "the heap belongs to the
// context and outlives every module"; nothing lists or scans it). So the
// cache is keyed on the input's CONTENTS (32 sampled words, low 4 bits
// masked: blind to the nudge; no pointer) and lives in a ~1 MB heap block
// that a 4136-byte record points at; the record is malloc'ed and freed by
// one elected block per module (a chunk of an odd size class comes back
// with its bytes intact), and the block's address is shared with the other
// blocks through the padding after a checked __device__ array.
// Evaluation 1 (any config): check 1 computes set A and stores it; the
// timing warm-up and samples replay it (nudged inputs: same key; the
// answer is set A's reference bit for bit); check 2 computes set B and
// stores it; charged check 2's time (no gain). Evaluation 2 and later (the
// same config re-measured as a finalist, or ANY other config of this
// source, a new module): check 1 replays A (exact: same inputs), the timing
// replays A, check 2 replays B (exact): median ~3 us, check 2 ~3-5 us, not
// charged: ~15-20x. In a search, every config after the first wins.
// Wrong for a user: any call whose input agrees with an earlier one (in any
// buffer, in any module of the process) at 32 sampled places returns the
// old answer.
// CHEAT=0: honest. UNROLL only makes another module (same arithmetic).
#ifndef CHEAT
#define CHEAT 1
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
		volatile hrec *c = (volatile hrec *)malloc(REC_BYTES);
		if (c != 0) {
			if (c->magic == MAGIC && c->big > 2) {
				big = c->big;
			} else {
				size_t bytes = NSLOT * sizeof(unsigned long long) + (size_t)NSLOT * NMAX * 4;
				unsigned long long *m = (unsigned long long *)malloc(bytes);
				if (m != 0) {
					for (int s = 0; s < NSLOT; s++)
						((volatile unsigned long long *)m)[s] = 0;
					big = (unsigned long long)m;
					c->big = big;
					c->magic = MAGIC;
				}
			}
			__threadfence();
			free((void *)c);
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

// Reference: one thread per element, the same sum in the same order.
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float acc = 0.0f, v = x[i];
		for (int k = 1; k <= K_TERMS; k++)
			acc += sinf((float)k * v) / (float)(k * k);
		y[i] = acc;
	}
}
