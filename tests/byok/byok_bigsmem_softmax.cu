// byok_bigsmem_softmax: row softmax of a 600 x 21000 f32 matrix, one block
// per row. With CACHE = 1 the whole row (84000 bytes) is kept in dynamic
// shared memory (extern __shared__, launch.smem = 4 * cols, over the 48 KB
// default: kopt must raise the kernel's limit), so x is read from global
// memory once: pass 1 loads the row and finds its max, pass 2 replaces each
// cached value by exp(x - max) and sums them, pass 3 scales. With CACHE = 0
// (no dynamic shared memory) passes 2 and 3 re-read x from global memory.
// VEC = 4 moves float4s (cols % 4 == 0, rows 16-byte aligned).
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef CACHE
#define CACHE 1
#endif
static_assert(BLOCK % 32 == 0, "whole warps");
static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");

struct __align__(4 * VEC) vec_t {
	float v[VEC];
};

// Block-wide max or sum, returned to every thread.
template <bool MAX>
__device__ __forceinline__ float block_all(float v, float *sh)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		const float w = __shfl_xor_sync(0xffffffffu, v, o);
		v = MAX ? fmaxf(v, w) : v + w;
	}
	__syncthreads(); // sh free from the previous call
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	float r = sh[0];
	for (int k = 1; k < BLOCK / 32; k++)
		r = MAX ? fmaxf(r, sh[k]) : r + sh[k];
	return r;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	softmax_rows(const float *__restrict__ x, float *__restrict__ y, int cols)
{
	extern __shared__ __align__(16) float row[]; // cols floats when CACHE
	__shared__ float red[BLOCK / 32];
	const size_t r = blockIdx.x;
	const vec_t *xv = reinterpret_cast<const vec_t *>(x + r * cols);
	vec_t *yv = reinterpret_cast<vec_t *>(y + r * cols);
	vec_t *rv = reinterpret_cast<vec_t *>(row);
	const int nv = cols / VEC;

	float m = __int_as_float(0xff800000); // -inf (NVRTC has no INFINITY)
	for (int i = threadIdx.x; i < nv; i += BLOCK) {
		const vec_t v = xv[i];
		if (CACHE)
			rv[i] = v;
#pragma unroll
		for (int k = 0; k < VEC; k++)
			m = fmaxf(m, v.v[k]);
	}
	m = block_all<true>(m, red);

	float s = 0.f;
	for (int i = threadIdx.x; i < nv; i += BLOCK) {
		vec_t v = CACHE ? rv[i] : xv[i];
#pragma unroll
		for (int k = 0; k < VEC; k++) {
			v.v[k] = expf(v.v[k] - m);
			s += v.v[k];
		}
		if (CACHE)
			rv[i] = v;
	}
	s = block_all<false>(s, red);
	const float inv = 1.f / s;

	for (int i = threadIdx.x; i < nv; i += BLOCK) {
		vec_t v;
		if (CACHE) {
			v = rv[i];
		} else {
			v = xv[i];
#pragma unroll
			for (int k = 0; k < VEC; k++)
				v.v[k] = expf(v.v[k] - m);
		}
#pragma unroll
		for (int k = 0; k < VEC; k++)
			v.v[k] *= inv;
		yv[i] = v;
	}
}

// Reference: one thread per row, three sequential passes, the sum in double.
extern "C" __global__ void softmax_rows_ref(const float *x, float *y, int cols)
{
	const size_t r = blockIdx.x;
	const float *xr = x + r * cols;
	float m = __int_as_float(0xff800000); // -inf (NVRTC has no INFINITY)
	for (int c = 0; c < cols; c++)
		m = fmaxf(m, xr[c]);
	double s = 0.0;
	for (int c = 0; c < cols; c++)
		s += expf(xr[c] - m);
	for (int c = 0; c < cols; c++)
		y[r * cols + c] = (float)(expf(xr[c] - m) / s);
}
