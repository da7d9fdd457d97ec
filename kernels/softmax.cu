// Row softmax: y[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r),
// f32 (f16 input and output with -DT_F16=1, math in f32 either way).
//
// A block of BLOCK_SIZE threads handles ROWS_PER_BLOCK rows; each row gets
// BLOCK_SIZE / ROWS_PER_BLOCK threads (a power of two, at least 4), which
// read VEC consecutive elements at a time. Pass 1 keeps a running max and a
// sum rescaled to it (online softmax), so the row is read once for both;
// the group then combines its partials through warp shuffles and, for groups
// wider than a warp, shared memory. Pass 2 reads the row again (mostly from
// L2) and writes the result.
//
// Requires cols % VEC == 0. Launch: grid cdiv(rows, ROWS_PER_BLOCK), block BLOCK_SIZE.
#include <cuda_fp16.h>

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 1
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef T_F16
#define T_F16 0
#endif

// -inf without <math.h> (not available under NVRTC)
#define NEG_INF __int_as_float(0xff800000u)
#define GROUP (BLOCK_SIZE / ROWS_PER_BLOCK)
#define GROUP_WARPS ((GROUP + 31) / 32)

static_assert(BLOCK_SIZE % ROWS_PER_BLOCK == 0, "BLOCK_SIZE must be a multiple of ROWS_PER_BLOCK");
static_assert(GROUP >= 4 && (GROUP & (GROUP - 1)) == 0, "threads per row must be a power of two >= 4");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC must be 1, 2, 4 or 8");

#if T_F16
typedef __half T;
#else
typedef float T;
#endif

// VEC elements of T as one aligned load/store.
struct __align__(sizeof(T) * VEC) vec_t {
	T v[VEC];
};

__device__ __forceinline__ float to_f(T x)
{
#if T_F16
	return __half2float(x);
#else
	return x;
#endif
}

__device__ __forceinline__ T from_f(float x)
{
#if T_F16
	return __float2half(x);
#else
	return x;
#endif
}

// (m, s) pairs combine as: m = max(m1, m2), s = s1*e^(m1-m) + s2*e^(m2-m).
__device__ __forceinline__ void combine(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	if (mm == NEG_INF)
		return; /* both empty */
	s = s * __expf(m - mm) + s2 * __expf(m2 - mm);
	m = mm;
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	softmax(const T *__restrict__ x, T *__restrict__ y, int rows, int cols)
{
	__shared__ float part_m[ROWS_PER_BLOCK][GROUP_WARPS];
	__shared__ float part_s[ROWS_PER_BLOCK][GROUP_WARPS];

	const int local_row = threadIdx.x / GROUP, t = threadIdx.x % GROUP;
	const int row = blockIdx.x * ROWS_PER_BLOCK + local_row;
	const bool active = row < rows;
	const int nvec = cols / VEC;
	const vec_t *xr = reinterpret_cast<const vec_t *>(x + (size_t)(active ? row : 0) * cols);
	vec_t *yr = reinterpret_cast<vec_t *>(y + (size_t)(active ? row : 0) * cols);

	float m = NEG_INF, s = 0.0f;
	if (active) {
		for (int i = t; i < nvec; i += GROUP) {
			vec_t v = xr[i];
			float vm = to_f(v.v[0]);
#pragma unroll
			for (int k = 1; k < VEC; k++)
				vm = fmaxf(vm, to_f(v.v[k]));
			float vs = 0.0f;
#pragma unroll
			for (int k = 0; k < VEC; k++)
				vs += __expf(to_f(v.v[k]) - vm);
			combine(m, s, vm, vs);
		}
	}
	// Within a warp: lanes of one group differ only in the low bits.
#pragma unroll
	for (int off = (GROUP < 32 ? GROUP : 32) / 2; off > 0; off /= 2) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, off);
		float s2 = __shfl_xor_sync(0xffffffffu, s, off);
		combine(m, s, m2, s2);
	}
	if (GROUP > 32) {
		const int w = t / 32;
		if (t % 32 == 0) {
			part_m[local_row][w] = m;
			part_s[local_row][w] = s;
		}
		__syncthreads();
		m = part_m[local_row][0];
		s = part_s[local_row][0];
		for (int k = 1; k < GROUP_WARPS; k++)
			combine(m, s, part_m[local_row][k], part_s[local_row][k]);
	}
	if (!active)
		return;
	const float inv = 1.0f / s;
	for (int i = t; i < nvec; i += GROUP) {
		vec_t v = xr[i], o;
#pragma unroll
		for (int k = 0; k < VEC; k++)
			o.v[k] = from_f(__expf(to_f(v.v[k]) - m) * inv);
		yr[i] = o;
	}
}
