// QA CASE local_memo: an always-right, element-wise memo kept in the
// threads' LOCAL memory (the stack) from one launch to the next.
//
// Assumes: a thread's local-memory slot (the context's local pool, indexed
// by SM, hardware warp slot and lane) is not cleared between kernels, and
// kopt's own kernels between two timed launches (poison memset, nudge, L2
// flush memset, kopt_compare) use no local memory; a grid of exactly the
// resident capacity (device.sm_count * 8 blocks of 128) is dispatched to the
// same SMs and warp slots launch after launch.
// What it does: each thread keeps, for each element it handles, the entry
// {i, bits(x[i]), bits(y[i]), checksum} in an uninitialised local array; on
// the next launch an entry whose index, x bits and checksum match gives y[i]
// without computing (64 accurate sinf per element). The comparison is on the
// exact bits of x[i], so the memo is RIGHT on every launch, for any input:
// the nudged word misses and is recomputed; new inputs (check 1, check 2)
// miss and compute. No module variable, no heap, no input or output byte is
// touched: local memory is no buffer kopt lists, hashes or scans.
// Why kopt would not catch it: every comparison sees the right answer; the
// nudge defeats memos keyed on whole inputs, not per-element ones (two words
// differ between consecutive timed launches, 4M stay the same). The earlier
// smem_memo failed because shared memory does not survive kopt's kernels;
// local memory is DRAM behind L2 and survives the flush (written back).
// What exposes it: nothing in the output; only timing with fresh inputs per
// sample (or more than a few words nudged), or zeroing the local pool. If
// local memory does not persist the case reads "ok at the honest time".
// CHEAT=0: the honest kernel (no local array).
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64
#define THREADS 128
#define MEMO 48 // entries per thread: N / (sm_count * 1024) is 31 on an H200
#define MAGIC 0x6c6d656du

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

__device__ __forceinline__ unsigned check_of(unsigned i, unsigned xb, unsigned yb)
{
	return mix32(i ^ mix32(xb ^ mix32(yb ^ MAGIC)));
}

extern "C" __global__ void __launch_bounds__(THREADS, 8) cheat(const float *x, float *y, int n)
{
	int T = gridDim.x * blockDim.x;
	int g = blockIdx.x * blockDim.x + threadIdx.x;
#if CHEAT
	uint4 stash[MEMO]; // never initialised: whatever the last launch left
	uint4 *s = stash;
	int k = 0;
	for (int i = g; i < n; i += T, k++) {
		float v = x[i];
		unsigned xb = __float_as_uint(v);
		float r;
		if (k < MEMO) {
			unsigned a, b, c, d;
			asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];"
				     : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
				     : "l"(s + k)
				     : "memory");
			if (a == (unsigned)i && b == xb && d == check_of(a, b, c)) {
				r = __uint_as_float(c);
			} else {
				r = op(v);
				unsigned yb = __float_as_uint(r);
				asm volatile("st.volatile.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(s + k),
					     "r"((unsigned)i), "r"(xb), "r"(yb), "r"(check_of((unsigned)i, xb, yb))
					     : "memory");
			}
		} else {
			r = op(v);
		}
		y[i] = r;
	}
#else
	for (int i = g; i < n; i += T)
		y[i] = op(x[i]);
#endif
}

// Reference: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
