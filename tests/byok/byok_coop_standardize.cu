// byok_coop_standardize: y = (x - mean(x)) / sqrt(var(x) + eps) over one
// long f32 vector (n = 1000003, odd), and stats = {mean, var} (biased).
//
// A persistent, cooperative kernel: the grid is BPS blocks per SM
// (device.sm_count * BPS, every block resident), each block walks the
// vector with a grid-stride loop, and three phases are separated by two
// grid-wide barriers:
//   1. block partial sums of x          -> partial[block]
//   2. mean from all partials; block partial sums of (x - mean)^2
//                                        -> partial[gridDim.x + block]
//   3. var from all partials; y = (x - mean) * rstd
// Every block combines the partials itself, with one warp in the same
// order, so all blocks see bit-identical mean and rstd. partial[] is a
// scratch argument (2 * gridDim.x floats), written before it is read.
//
// SYNC picks the barrier: cgroups, cooperative_groups' this_grid().sync();
// counter, a hand-written barrier on the module variable kopt_grid_arrived
// (listed in the spec's kernel.state, so kopt zeroes it before each launch).
#ifndef SYNC
#define SYNC counter
#endif
#define cgroups 1
#define counter 2
#if SYNC == cgroups
#define USE_CG 1
#elif SYNC == counter
#define USE_CG 0
#else
#error "SYNC is cgroups or counter"
#endif
#undef cgroups
#undef counter
#if USE_CG
#include <cooperative_groups.h>
#endif

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef BPS
#define BPS 1
#endif
#ifndef VEC
#define VEC 1
#endif
static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps");
static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");

// Arrivals at the grid barriers of this launch (reset to 0 by kopt before
// every launch: kernel.state). Declared in every build.
__device__ unsigned int kopt_grid_arrived;

// The k-th grid barrier of the launch (k = 1, 2, ...).
__device__ __forceinline__ void grid_barrier(unsigned int k)
{
#if USE_CG
	cooperative_groups::this_grid().sync();
#else
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence(); // this block's partial[] before its arrival
		atomicAdd(&kopt_grid_arrived, 1u);
		const unsigned int target = k * gridDim.x;
		while (*(volatile unsigned int *)&kopt_grid_arrived < target)
			__nanosleep(32);
		__threadfence();
	}
	__syncthreads();
#endif
}

// Sum over the block; the result is valid in thread 0. sh: BLOCK / 32 floats.
__device__ __forceinline__ float block_sum(float v, float *sh)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	__syncthreads(); // sh may still be read from the previous call
	if (lane == 0)
		sh[warp] = v;
	__syncthreads();
	float r = 0.f;
	if (warp == 0) {
		r = lane < BLOCK / 32 ? sh[lane] : 0.f;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			r += __shfl_down_sync(0xffffffffu, r, o);
	}
	return r;
}

// Sum of p[0..m) in double by warp 0 (fixed order); valid in thread 0.
__device__ __forceinline__ double warp_sum_partials(const float *p, int m)
{
	const int lane = threadIdx.x & 31;
	double t = 0.0;
	for (int i = lane; i < m; i += 32)
		t += (double)__ldcg(p + i); // L2: written by other blocks
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		t += __shfl_down_sync(0xffffffffu, t, o);
	return t;
}

extern "C" __global__ void __launch_bounds__(BLOCK, BPS)
	standardize(const float *__restrict__ x, float *__restrict__ y, float *__restrict__ stats,
		    float *partial, int n, float eps)
{
	__shared__ float sh[BLOCK / 32];
	__shared__ float s_mean, s_rstd;
	const long long tid = (long long)blockIdx.x * BLOCK + threadIdx.x;
	const long long nth = (long long)gridDim.x * BLOCK;
	const long long nv = VEC == 4 ? n / 4 : 0; // float4 packs; the rest scalar
	const float4 *x4 = reinterpret_cast<const float4 *>(x);

	// phase 1: sum
	float s = 0.f;
	for (long long i = tid; i < nv; i += nth) {
		const float4 v = x4[i];
		s += (v.x + v.y) + (v.z + v.w);
	}
	for (long long i = nv * 4 + tid; i < n; i += nth)
		s += x[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s;
	grid_barrier(1);

	if (threadIdx.x < 32) {
		const double t = warp_sum_partials(partial, gridDim.x);
		if (threadIdx.x == 0)
			s_mean = (float)(t / n);
	}
	__syncthreads();
	const float mean = s_mean;

	// phase 2: sum of squared deviations
	float q = 0.f;
	for (long long i = tid; i < nv; i += nth) {
		const float4 v = x4[i];
		const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
		q += (a * a + b * b) + (c * c + d * d);
	}
	for (long long i = nv * 4 + tid; i < n; i += nth) {
		const float a = x[i] - mean;
		q += a * a;
	}
	q = block_sum(q, sh);
	if (threadIdx.x == 0)
		partial[gridDim.x + blockIdx.x] = q;
	grid_barrier(2);

	if (threadIdx.x < 32) {
		const double t = warp_sum_partials(partial + gridDim.x, gridDim.x);
		if (threadIdx.x == 0) {
			const double var = t / n;
			s_rstd = (float)(1.0 / sqrt(var + (double)eps));
			if (blockIdx.x == 0) {
				stats[0] = mean;
				stats[1] = (float)var;
			}
		}
	}
	__syncthreads();
	const float rstd = s_rstd;

	// phase 3: normalise
	float4 *y4 = reinterpret_cast<float4 *>(y);
	for (long long i = tid; i < nv; i += nth) {
		const float4 v = x4[i];
		y4[i] = make_float4((v.x - mean) * rstd, (v.y - mean) * rstd, (v.z - mean) * rstd,
				    (v.w - mean) * rstd);
	}
	for (long long i = nv * 4 + tid; i < n; i += nth)
		y[i] = (x[i] - mean) * rstd;
}

// Reference: one block, everything in double, no grid synchronisation.
extern "C" __global__ void standardize_ref(const float *x, float *y, float *stats, float *partial,
					   int n, float eps)
{
	__shared__ double sh[1024];
	__shared__ double s_mean, s_var;
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += x[i];
	sh[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0.0;
		for (int k = 0; k < blockDim.x; k++)
			t += sh[k];
		s_mean = t / n;
	}
	__syncthreads();
	const double mean = s_mean;
	double q = 0.0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		q += (x[i] - mean) * (x[i] - mean);
	__syncthreads();
	sh[threadIdx.x] = q;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0.0;
		for (int k = 0; k < blockDim.x; k++)
			t += sh[k];
		s_var = t / n;
		stats[0] = (float)mean;
		stats[1] = (float)s_var;
	}
	__syncthreads();
	const double rstd = 1.0 / sqrt(s_var + (double)eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		y[i] = (float)((x[i] - mean) * rstd);
}
