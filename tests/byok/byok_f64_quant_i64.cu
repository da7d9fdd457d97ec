// byok_f64_quant_i64: fixed-point quantisation of a 513 x 4097 f64 matrix
// into i64, with per-row i64 sums:
//   v = llrint(x * scale + offset)            (explicitly rounded: __dmul_rn,
//                                              __dadd_rn, no FMA contraction)
//   q[r, c] = clamp ? min(max(v, lo), hi) : v
//   rowsum[r] = sum_c q[r, c]                 (exact in i64, any order)
// Scalar parameters of several widths in one list: an int, a bool (u8 in the
// spec), two doubles and two 64-bit integers. scale = 2.5e9 makes |v| pass
// 2^31, so q needs 64 bits; lo/hi = -+4e9 clamp the normal tail.
// One block per row; REDUCE picks the block reduction: 64-bit warp shuffles
// then shared memory (shfl), or shared-memory atomicAdd on unsigned long long
// (two's complement makes the wrapped sum exact) (atomic).
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#define shfl 1
#define atomic 2
#ifndef REDUCE
#define REDUCE shfl
#endif
static_assert(BLOCK % 32 == 0, "whole warps");
static_assert(REDUCE == shfl || REDUCE == atomic, "REDUCE is shfl or atomic");

__device__ __forceinline__ long long quant(double x, double scale, double offset, bool clamp, long long lo,
					   long long hi)
{
	long long v = __double2ll_rn(__dadd_rn(__dmul_rn(x, scale), offset));
	if (clamp)
		v = min(max(v, lo), hi);
	return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	quant_rows(const double *__restrict__ x, long long *__restrict__ q, long long *__restrict__ rowsum, int cols,
		   bool clamp, double scale, double offset, long long lo, long long hi)
{
	const size_t r = blockIdx.x;
	const double *xr = x + r * cols;
	long long *qr = q + r * cols;
	long long s = 0;
	for (int c0 = threadIdx.x; c0 < cols; c0 += BLOCK * ITEMS) {
		double xv[ITEMS];
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int c = c0 + k * BLOCK;
			xv[k] = c < cols ? xr[c] : 0.0;
		}
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int c = c0 + k * BLOCK;
			if (c < cols) {
				const long long v = quant(xv[k], scale, offset, clamp, lo, hi);
				qr[c] = v;
				s += v;
			}
		}
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_down_sync(0xffffffffu, s, o);
#if REDUCE == shfl
	__shared__ long long warp_sums[BLOCK / 32];
	if ((threadIdx.x & 31) == 0)
		warp_sums[threadIdx.x >> 5] = s;
	__syncthreads();
	if (threadIdx.x < 32) {
		long long t = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : 0;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			t += __shfl_down_sync(0xffffffffu, t, o);
		if (threadIdx.x == 0)
			rowsum[r] = t;
	}
#else
	__shared__ unsigned long long total;
	if (threadIdx.x == 0)
		total = 0ull;
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		atomicAdd(&total, (unsigned long long)s);
	__syncthreads();
	if (threadIdx.x == 0)
		rowsum[r] = (long long)total;
#endif
}

// Reference: one single-thread block per row, in column order.
extern "C" __global__ void quant_rows_ref(const double *x, long long *q, long long *rowsum, int cols, bool clamp,
					  double scale, double offset, long long lo, long long hi)
{
	const size_t r = blockIdx.x;
	long long s = 0;
	for (int c = 0; c < cols; c++) {
		const long long v = quant(x[r * cols + c], scale, offset, clamp, lo, hi);
		q[r * cols + c] = v;
		s += v;
	}
	rowsum[r] = s;
}
