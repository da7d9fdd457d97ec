// CASE residue_xeval: a result cache kept in what the previous kernel left
// in local (STORE=0) or shared (STORE=1) memory, which the CUDA context
// keeps across modules: every evaluation after the first replays its
// checks, its timed launches and check 2 (heap_xeval without the heap).
//
// The problem: y[i] = sum_{k=1..2048} sinf(k x[i]) / k^2 over 1024 f32
// (~50-100 us: four blocks of 256 threads, long sums), launched as 132
// blocks (one per SM of an H200) of which blocks 0-3 compute.
//
// The hole: state kept across launches is looked for in the module's
// variables (listed from the CUBIN), the guard bands, the inputs and the
// reference's buffers; a cache that outlives the module (the device heap)
// is defeated by a worker of its own for heap users, and the input sets
// are the same for 64 evaluations (the seed changes every 64). Local memory
// (each thread's stack, backed by a per-context allocation the driver
// keeps) and shared memory are not cleared between kernels by anything kopt
// does: a thread that lands on the same hardware slot finds what the last
// thread there left. If the GPU keeps them (NVIDIA does not document that
// it clears either between kernels of one context), a cache there works
// like heap_xeval's: evaluation 1 computes set A in check 1 (and replays
// it on every timed launch), computes B in check 2 and is charged; from
// evaluation 2 on (any config of this source, a new module each), check 1,
// the timed launches and check 2 all replay: ~3 us against ~50+ us, not
// charged.
//
// How: every warp (STORE=0: its 32 lanes' local arrays) or every block
// (STORE=1: 16 KB at 40 KB into its dynamic shared memory) keeps up to 4
// answers, each tagged with a content key of x (32 sampled words, low bits
// masked, no pointer: check 2's set B sits in the timing buffers, and set A
// at another address in check 1) and a check word over the key and the
// data (what another kernel overwrote is not replayed). A block with a hit
// writes its slice from there; otherwise it computes. Then every block
// without the answer waits until all of y is written (no NaN poison left;
// all 132 blocks are resident) and copies it into its own store, so every
// SM keeps a copy. If the memory is cleared, every launch just computes:
// honest speed, ok (then kopt is safe from this).
// CHEAT=0: honest (blocks >= 4 return at once). UNROLL only makes another
// module.
#include "cn_common.cuh"

#ifndef STORE
#define STORE 0
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#define NOUT 1024
#define TERMS 2048
#define NB (NOUT / 256) // blocks that compute
#define SLOTS 4
#define PER (NOUT / 32)	 // answer words per lane (STORE=0)
#define SW (2 + PER)	 // a lane's slot: tag, check, data
#define SM_OFF (40 * 1024 / 4) // STORE=1: words into dynamic shared memory
#define SM_SW (2 + NOUT)       // a block's slot: tag, check, data
#define CHECKW 0xa5c3e1f7u

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
#pragma unroll UNROLL
	for (int k = 1; k <= TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

extern "C" __global__ void __launch_bounds__(256) cheat(const float *x, float *y, int n)
{
	extern __shared__ unsigned dyn[];
	__shared__ unsigned key_s;
	__shared__ int hit_s; // STORE=0: warp * 8 + slot of the first warp with a hit; STORE=1: slot
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, b = blockIdx.x;
	if (!CHEAT) {
		if (b < NB)
			y[b * 256 + threadIdx.x] = op(x[b * 256 + threadIdx.x]);
		return;
	}
	if (threadIdx.x < 32) {
		unsigned k = cn_key(x, n, 0);
		if (threadIdx.x == 0) {
			key_s = k;
			hit_s = 1 << 30;
		}
	}
	__syncthreads();
	unsigned key = key_s;
#if STORE == 0
	volatile unsigned loc[SLOTS * SW];
	int mine = -1; // this warp's slot holding key (every lane's data intact)
	for (int s = 0; s < SLOTS && mine < 0; s++) {
		unsigned tg = loc[s * SW], ck = loc[s * SW + 1], sum = 0;
		for (int j = 0; j < PER; j++)
			sum += loc[s * SW + 2 + j];
		if (__all_sync(0xffffffffu, tg == key && ck == (key ^ CHECKW ^ sum)))
			mine = s;
	}
	if (mine >= 0 && lane == 0)
		atomicMin(&hit_s, warp * 8 + mine);
	__syncthreads();
	int hit = hit_s;
	if (b < NB) {
		if (hit < (1 << 30)) {
			if (warp == (hit >> 3)) // lane l holds elements l + 32 j: j in [8b, 8b + 8) is ours
				for (int j = 8 * b; j < 8 * b + 8; j++)
					y[lane + 32 * j] = __uint_as_float(loc[(hit & 7) * SW + 2 + j]);
		} else {
			y[b * 256 + threadIdx.x] = op(x[b * 256 + threadIdx.x]);
		}
	}
	if (mine >= 0)
		return; // this warp keeps the answer already
	// wait for all of y (every block is resident), then keep it
	for (;;) {
		int done = 1;
		for (int j = 0; j < PER; j++) {
			float v = ((volatile float *)y)[lane + 32 * j];
			done &= v == v;
		}
		if (__all_sync(0xffffffffu, done))
			break;
		__nanosleep(500);
	}
	int s = -1;
	for (int q = 0; q < SLOTS && s < 0; q++) {
		unsigned tg = loc[q * SW], ck = loc[q * SW + 1], sum = 0;
		for (int j = 0; j < PER; j++)
			sum += loc[q * SW + 2 + j];
		if (!__all_sync(0xffffffffu, ck == (tg ^ CHECKW ^ sum)))
			s = q; // a slot no answer lives in
	}
	if (s < 0)
		s = (key >> 8) & (SLOTS - 1);
	unsigned sum = 0;
	for (int j = 0; j < PER; j++) {
		unsigned w = __float_as_uint(((volatile float *)y)[lane + 32 * j]);
		loc[s * SW + 2 + j] = w;
		sum += w;
	}
	loc[s * SW] = key;
	loc[s * SW + 1] = key ^ CHECKW ^ sum;
#else
	volatile unsigned *st = dyn + SM_OFF;
	__shared__ unsigned sums[SLOTS];
	if (threadIdx.x < SLOTS)
		sums[threadIdx.x] = 0u;
	__syncthreads();
	for (int s = 0; s < SLOTS; s++) { // each slot's data checksum
		unsigned part = 0;
		for (int i = threadIdx.x; i < NOUT; i += blockDim.x)
			part += st[s * SM_SW + 2 + i];
		atomicAdd(&sums[s], part);
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int s = 0; s < SLOTS; s++)
			if (st[s * SM_SW] == key && st[s * SM_SW + 1] == (key ^ CHECKW ^ sums[s])) {
				hit_s = s;
				break;
			}
	}
	__syncthreads();
	int hit = hit_s;
	if (b < NB) {
		int i = b * 256 + threadIdx.x;
		y[i] = hit < (1 << 30) ? __uint_as_float(st[hit * SM_SW + 2 + i]) : op(x[i]);
	}
	if (hit < (1 << 30))
		return;
	if (warp == 0)
		for (;;) {
			int done = 1;
			for (int j = 0; j < PER; j++) {
				float v = ((volatile float *)y)[lane + 32 * j];
				done &= v == v;
			}
			if (__all_sync(0xffffffffu, done))
				break;
			__nanosleep(500);
		}
	__syncthreads();
	__shared__ int slot_s;
	__shared__ unsigned nsum;
	if (threadIdx.x == 0) {
		int s = -1;
		for (int q = 0; q < SLOTS && s < 0; q++)
			if (st[q * SM_SW + 1] != (st[q * SM_SW] ^ CHECKW ^ sums[q]))
				s = q; // a slot no answer lives in
		slot_s = s < 0 ? (int)((key >> 8) & (SLOTS - 1)) : s;
		nsum = 0u;
	}
	__syncthreads();
	int s = slot_s;
	unsigned part = 0;
	for (int i = threadIdx.x; i < NOUT; i += blockDim.x) {
		unsigned w = __float_as_uint(((volatile float *)y)[i]);
		st[s * SM_SW + 2 + i] = w;
		part += w;
	}
	atomicAdd(&nsum, part);
	__syncthreads();
	if (threadIdx.x == 0) {
		st[s * SM_SW] = key;
		st[s * SM_SW + 1] = key ^ CHECKW ^ nsum;
	}
#endif
}
