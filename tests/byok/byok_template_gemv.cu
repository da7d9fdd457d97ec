// byok_template_gemv: y = A x for a 4099 x 1531 f32 matrix (neither a
// multiple of a tile), a row-major GEMV with one warp per RPW rows.
//
// The kernel is a function template in a namespace, instantiated by the
// spec's entry "gemv::rows_per_warp<ACC, BLOCK, RPW>": a type parameter
// (the accumulator, float or double, from a string knob) and two int
// parameters. Each warp loads x[k] once per step and applies it to its RPW
// rows; lanes accumulate strided partial sums that a shuffle tree combines.
#include <cuda_runtime.h>

namespace gemv {

template <typename T>
__device__ __forceinline__ T warp_sum(T v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	return v;
}

template <typename Acc, int NT, int R>
__global__ void __launch_bounds__(NT)
	rows_per_warp(const float *__restrict__ A, const float *__restrict__ x, float *__restrict__ y, int M, int K)
{
	static_assert(NT % 32 == 0, "whole warps");
	const int lane = threadIdx.x & 31;
	const int warp = blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
	const int row0 = warp * R;
	if (row0 >= M)
		return;
	Acc acc[R];
#pragma unroll
	for (int r = 0; r < R; r++)
		acc[r] = Acc(0);
	for (int k = lane; k < K; k += 32) {
		const Acc xv = Acc(__ldg(x + k));
#pragma unroll
		for (int r = 0; r < R; r++)
			if (row0 + r < M)
				acc[r] += Acc(A[(size_t)(row0 + r) * K + k]) * xv;
	}
#pragma unroll
	for (int r = 0; r < R; r++) {
		const Acc s = warp_sum(acc[r]);
		if (lane == 0 && row0 + r < M)
			y[row0 + r] = float(s);
	}
}

} // namespace gemv

// Reference: one thread per row, sequential sum in double.
extern "C" __global__ void gemv_ref(const float *A, const float *x, float *y, int M, int K)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= M)
		return;
	double s = 0.0;
	for (int k = 0; k < K; k++)
		s += (double)A[(size_t)i * K + k] * x[k];
	y[i] = (float)s;
}
