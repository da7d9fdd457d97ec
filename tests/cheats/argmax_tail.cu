// argmax_tail: the suite spec specs/suite/argmax_dim.json (an i32 argmax
// over dim 1 of a 16 x 4096 x 1024 f32 tensor), whose output is exact in
// effect (rel_l2 1e-9 and max_abs 0.5: an index off by one fails). Such an
// integer output was compared on the last timed launch only, which is
// always a batch's tail, so batch_tail's trick passed (1.27x on an H200);
// an integer output whose max-abs tolerance is below 1 is now compared on
// every timed launch (compare_dev.c sample_kind), and the cheat is wrong.
//
// The kernel: the shipped reduce_dim.cu's argmax (a block of 32 x 16
// threads owns 32 consecutive outputs of one b; the 16 rows of threads
// split d; partials meet in shared memory). The cheat (CHEAT=1): on timed
// launches whose position k (tests/cheats' cn_batch_pos, in a __constant__
// record) is not a batch's tail, only the blocks of the first PCT % of the
// columns run; the others leave their outputs as kopt's poison. Every first
// launch on new inputs (check 1, the warm-up, checks 2 and 3) and every tail
// is complete.
// On an H200 every cheating config is wrong; the honest one is ok.
#include "cn_common.cuh"

#ifndef PCT
#define PCT 80
#endif
#define BX 32
#define BY 16
#define UNROLL 4

struct acc_t {
	float v;
	int idx;
};

__device__ __forceinline__ acc_t combine(acc_t a, acc_t b)
{
	if (b.v > a.v || (b.v == a.v && b.idx < a.idx))
		return b;
	return a;
}

__constant__ __align__(16) unsigned long long kopt_am_rec[2];

extern "C" __global__ void __launch_bounds__(BX *BY)
	reduce_dim(const float *__restrict__ x, int *__restrict__ out, int B, int D, int I)
{
	__shared__ acc_t part[BY][BX];
	__shared__ int skip;
	const int b = blockIdx.y;
	const long i0 = (long)blockIdx.x * BX + threadIdx.x;
	if (CHEAT && (long)blockIdx.x * BX >= (long)I * PCT / 100) {
		if (threadIdx.y == 0) {
			unsigned key = cn_key(x, (long long)B * D * I, 1);
			if (threadIdx.x == 0) {
				unsigned P = cn_launch_id(out + (long)b * I + (long)blockIdx.x * BX);
				unsigned pos = cn_batch_pos((volatile unsigned long long *)cn_generic(kopt_am_rec), P, key);
				skip = pos != CN_FIRST && (pos & 3u) != 3u;
			}
		}
		__syncthreads();
		if (skip)
			return; // this block's outputs keep the poison
	}
	const bool active = i0 < I;
	acc_t acc = {__int_as_float(0xff800000u), 0x7fffffff};
	if (active) {
		const float *xb = x + (long)b * D * I + i0;
#pragma unroll UNROLL
		for (int d = threadIdx.y; d < D; d += BY)
			acc = combine(acc, acc_t{xb[(long)d * I], d});
	}
	part[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y != 0 || !active)
		return;
	for (int y = 1; y < BY; y++)
		acc = combine(acc, part[y][threadIdx.x]);
	out[(long)b * I + i0] = acc.idx;
}
