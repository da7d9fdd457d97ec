// rmsnorm_bf16: RMSNorm of a [rows, H] bf16 activation with a bf16 weight,
// as in Llama-style decoders:
//   rstd[r] = 1 / sqrt(mean_c x[r, c]^2 + eps)          f32 (kept for backward)
//   y[r, c] = bf16(float(x[r, c]) * rstd[r] * float(w[c]))
// Sums of squares in f32 (per-thread, warp shuffles, one smem pass), rsqrtf
// for the inverse root; the reference sums in double and divides exactly,
// so rstd differs in its last bits and y by at most one bf16 ulp on a few
// elements: default tolerances (bf16 1e-2, f32 1e-5) hold with room.
// One block per row; VEC bf16 per load (2: a __nv_bfloat162; 8: 16 bytes).
#include <cuda_bf16.h>

#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 8
#endif
#define WARPS (THREADS / 32)

struct __align__(16) bf16x8 {
	__nv_bfloat162 h[4];
};

template <int V> struct pack;
template <> struct pack<2> {
	typedef __nv_bfloat162 type;
};
template <> struct pack<8> {
	typedef bf16x8 type;
};

__device__ __forceinline__ void unpack(const __nv_bfloat162 &p, float *f)
{
	const float2 t = __bfloat1622float2(p);
	f[0] = t.x;
	f[1] = t.y;
}
__device__ __forceinline__ void unpack(const bf16x8 &p, float *f)
{
	for (int i = 0; i < 4; i++)
		unpack(p.h[i], f + 2 * i);
}
__device__ __forceinline__ void repack(const float *f, __nv_bfloat162 &p) { p = __floats2bfloat162_rn(f[0], f[1]); }
__device__ __forceinline__ void repack(const float *f, bf16x8 &p)
{
	for (int i = 0; i < 4; i++)
		repack(f + 2 * i, p.h[i]);
}

extern "C" __global__ void __launch_bounds__(THREADS)
	rmsnorm(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w, __nv_bfloat16 *__restrict__ y,
		float *__restrict__ rstd, int H, float eps)
{
	typedef typename pack<VEC>::type P;
	const size_t row = blockIdx.x;
	const P *xr = reinterpret_cast<const P *>(x + row * H);
	const P *wv = reinterpret_cast<const P *>(w);
	P *yr = reinterpret_cast<P *>(y + row * H);
	const int nv = H / VEC;
	float ss = 0.0f;
	for (int k = threadIdx.x; k < nv; k += THREADS) {
		float f[VEC];
		unpack(xr[k], f);
#pragma unroll
		for (int i = 0; i < VEC; i++)
			ss = fmaf(f[i], f[i], ss);
	}
	for (int o = 16; o > 0; o >>= 1)
		ss += __shfl_xor_sync(0xffffffffu, ss, o);
	__shared__ float part[WARPS];
	__shared__ float inv;
	if ((threadIdx.x & 31) == 0)
		part[threadIdx.x >> 5] = ss;
	__syncthreads();
	if (threadIdx.x == 0) {
		float t = 0.0f;
		for (int i = 0; i < WARPS; i++)
			t += part[i];
		inv = rsqrtf(t / (float)H + eps);
		rstd[row] = inv;
	}
	__syncthreads();
	const float r = inv;
	for (int k = threadIdx.x; k < nv; k += THREADS) {
		float f[VEC], g[VEC];
		unpack(xr[k], f);
		unpack(wv[k], g);
#pragma unroll
		for (int i = 0; i < VEC; i++)
			f[i] = f[i] * r * g[i];
		P o;
		repack(f, o);
		yr[k] = o;
	}
}

// Reference: one block of 256 threads per row, the sum of squares in
// double, the inverse root computed exactly in double and rounded once.
extern "C" __global__ void rmsnorm_ref(const __nv_bfloat16 *x, const __nv_bfloat16 *w, __nv_bfloat16 *y, float *rstd,
				       int H, float eps)
{
	__shared__ double part[256];
	__shared__ float inv;
	const size_t row = blockIdx.x;
	double s = 0.0;
	for (int c = threadIdx.x; c < H; c += blockDim.x) {
		const double v = (double)__bfloat162float(x[row * H + c]);
		s += v * v;
	}
	part[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0.0;
		for (int i = 0; i < (int)blockDim.x; i++)
			t += part[i];
		inv = (float)(1.0 / sqrt(t / H + (double)eps));
		rstd[row] = inv;
	}
	__syncthreads();
	for (int c = threadIdx.x; c < H; c += blockDim.x)
		y[row * H + c] = __float2bfloat16_rn(__bfloat162float(x[row * H + c]) * inv * __bfloat162float(w[c]));
}
