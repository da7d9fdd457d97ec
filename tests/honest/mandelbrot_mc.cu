// mandelbrot_mc: escape-time counts of the Mandelbrot iteration at random
// sample points (a Monte Carlo estimate of the set's area in a window):
//   c = (cx + span * u, cy + span * v),  cnt = iterations before |z| > 2
//   (at most maxit).
// The run time is all data: a point outside the set leaves after a few
// iterations, a point inside runs maxit. The spec's window (u, v uniform in
// [0, 1): c in [0.5, 1.5) x [0, 1), right of the set) escapes in a handful
// of iterations; check 2 draws u, v from N(0, 1), which puts about one point
// in eight inside the set and nearly every warp at maxit: honestly 50-100x
// slower there than on the timed inputs.
// QUEUE 0: one thread per ITEMS points, a plain grid; QUEUE 1: a persistent
// grid whose warps take chunks of 32 * ITEMS points from a queue head (a
// __device__ counter declared in kernel.state, reset before every launch).
// The iteration is one helper with explicit rounding, shared with the
// reference: counts are exact (i32).
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef QUEUE
#define QUEUE 0
#endif

__device__ unsigned kopt_mb_next = 0;

__device__ __forceinline__ int escape(float cr, float ci, int maxit)
{
	float zr = 0.0f, zi = 0.0f;
	int k = 0;
	while (k < maxit) {
		const float zr2 = __fmul_rn(zr, zr), zi2 = __fmul_rn(zi, zi);
		if (__fadd_rn(zr2, zi2) > 4.0f)
			break;
		const float t = __fadd_rn(__fsub_rn(zr2, zi2), cr);
		zi = __fmaf_rn(__fadd_rn(zr, zr), zi, ci);
		zr = t;
		k++;
	}
	return k;
}

__device__ __forceinline__ void point(const float *u, const float *v, int *cnt, int i, float cx, float cy, float span,
				      int maxit)
{
	cnt[i] = escape(__fmaf_rn(span, u[i], cx), __fmaf_rn(span, v[i], cy), maxit);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	mandel(const float *__restrict__ u, const float *__restrict__ v, int *__restrict__ cnt, int n, float cx, float cy,
	       float span, int maxit)
{
#if QUEUE
	const int lane = threadIdx.x & 31;
	for (;;) {
		unsigned chunk = 0;
		if (lane == 0)
			chunk = atomicAdd(&kopt_mb_next, 1u);
		chunk = __shfl_sync(0xffffffffu, chunk, 0);
		const long long base = (long long)chunk * 32 * ITEMS;
		if (base >= n)
			break;
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const long long i = base + k * 32 + lane;
			if (i < n)
				point(u, v, cnt, (int)i, cx, cy, span, maxit);
		}
	}
#else
	const int base = blockIdx.x * BLOCK * ITEMS + threadIdx.x;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int i = base + k * BLOCK;
		if (i < n)
			point(u, v, cnt, i, cx, cy, span, maxit);
	}
#endif
}

// Reference: one thread per point.
extern "C" __global__ void mandel_ref(const float *u, const float *v, int *cnt, int n, float cx, float cy, float span,
				      int maxit)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		point(u, v, cnt, i, cx, cy, span, maxit);
}
