// Reduction over the middle dimension of a (B, D, I) f32 tensor, PyTorch's
// torch.sum / mean / max / min / argmax(x, dim=1): out[b][i] over d of x[b][d][i].
//   OP_SUM, OP_MEAN, OP_MAX, OP_MIN: out is f32
//   OP_ARGMAX: out is i32, the first index of the maximum (as torch)
//
// A block of BX x BY threads owns BX * VEC consecutive outputs of one b:
// threadIdx.x walks along i (VEC outputs each, one vector load per row d),
// threadIdx.y splits the rows d; the BY partials meet in shared memory.
// Requires I % VEC == 0. Launch: grid (cdiv(I, BX * VEC), B), block (BX, BY).
#ifndef BX
#define BX 64
#endif
#ifndef BY
#define BY 4
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");

struct __align__(sizeof(float) * VEC) vec_t {
	float v[VEC];
};

#if defined(OP_ARGMAX)
typedef int out_t;
#else
typedef float out_t;
#endif

// Accumulator: a value, and for argmax the index of the value.
struct acc_t {
	float v;
	int idx;
};

__device__ __forceinline__ acc_t init()
{
#if defined(OP_SUM) || defined(OP_MEAN)
	return {0.0f, 0};
#elif defined(OP_MAX) || defined(OP_ARGMAX)
	return {__int_as_float(0xff800000u), 0x7fffffff}; /* -inf */
#elif defined(OP_MIN)
	return {__int_as_float(0x7f800000u), 0}; /* +inf */
#else
#error "define one OP_*"
#endif
}

// a then b in row order when a.idx < b.idx; the combination is the same in
// either order for every op (argmax breaks ties by the smaller index).
__device__ __forceinline__ acc_t combine(acc_t a, acc_t b)
{
#if defined(OP_SUM) || defined(OP_MEAN)
	return {a.v + b.v, 0};
#elif defined(OP_MAX)
	return {fmaxf(a.v, b.v), 0};
#elif defined(OP_MIN)
	return {fminf(a.v, b.v), 0};
#else
	if (b.v > a.v || (b.v == a.v && b.idx < a.idx))
		return b;
	return a;
#endif
}

extern "C" __global__ void __launch_bounds__(BX *BY)
	reduce_dim(const float *__restrict__ x, out_t *__restrict__ out, int B, int D, int I)
{
	__shared__ acc_t part[BY][BX * VEC];
	(void)B;
	const int b = blockIdx.y;
	const long i0 = ((long)blockIdx.x * BX + threadIdx.x) * VEC;
	const bool active = i0 < I;
	acc_t acc[VEC];
#pragma unroll
	for (int k = 0; k < VEC; k++)
		acc[k] = init();
	if (active) {
		const float *xb = x + (long)b * D * I + i0;
#pragma unroll UNROLL
		for (int d = threadIdx.y; d < D; d += BY) {
			vec_t v = *reinterpret_cast<const vec_t *>(xb + (long)d * I);
#pragma unroll
			for (int k = 0; k < VEC; k++)
				acc[k] = combine(acc[k], acc_t{v.v[k], d});
		}
	}
	if (BY > 1) {
#pragma unroll
		for (int k = 0; k < VEC; k++)
			part[threadIdx.y][threadIdx.x * VEC + k] = acc[k];
		__syncthreads();
		if (threadIdx.y != 0)
			return;
		for (int y = 1; y < BY; y++)
#pragma unroll
			for (int k = 0; k < VEC; k++)
				acc[k] = combine(acc[k], part[y][threadIdx.x * VEC + k]);
	}
	if (!active)
		return;
#pragma unroll
	for (int k = 0; k < VEC; k++) {
#if defined(OP_MEAN)
		out[(long)b * I + i0 + k] = acc[k].v / (float)D;
#elif defined(OP_ARGMAX)
		out[(long)b * I + i0 + k] = acc[k].idx;
#else
		out[(long)b * I + i0 + k] = acc[k].v;
#endif
	}
}
