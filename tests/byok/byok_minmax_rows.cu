// byok_minmax_rows: two outputs from one kernel, the minimum and the maximum
// of each row of a rows x cols f32 matrix (exact in any order). A 2-D block:
// threadIdx.x walks a row (TPR threads per row), threadIdx.y picks one of
// the RPB rows of the block. VEC floats per load (cols % VEC == 0).
#ifndef TPR
#define TPR 64
#endif
#ifndef RPB
#define RPB 1
#endif
#ifndef VEC
#define VEC 1
#endif

struct __align__(4 * VEC) vec_t {
	float v[VEC];
};

extern "C" __global__ void __launch_bounds__(TPR *RPB)
	minmax_rows(const float *__restrict__ x, float *__restrict__ mn, float *__restrict__ mx, int rows,
		    int cols)
{
	__shared__ float smin[RPB][TPR / 32], smax[RPB][TPR / 32];
	const int t = threadIdx.x, ly = threadIdx.y;
	const int row = blockIdx.x * RPB + ly;
	float lo = __int_as_float(0x7f800000), hi = -lo; // +inf, -inf
	if (row < rows) {
		const vec_t *xr = reinterpret_cast<const vec_t *>(x + (size_t)row * cols);
		for (int i = t; i < cols / VEC; i += TPR) {
			vec_t v = xr[i];
#pragma unroll
			for (int k = 0; k < VEC; k++) {
				lo = fminf(lo, v.v[k]);
				hi = fmaxf(hi, v.v[k]);
			}
		}
	}
	for (int off = 16; off > 0; off >>= 1) {
		lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, off));
		hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, off));
	}
	if (t % 32 == 0) {
		smin[ly][t / 32] = lo;
		smax[ly][t / 32] = hi;
	}
	__syncthreads();
	if (t == 0 && row < rows) {
		for (int w = 1; w < TPR / 32; w++) {
			lo = fminf(lo, smin[ly][w]);
			hi = fmaxf(hi, smax[ly][w]);
		}
		mn[row] = lo;
		mx[row] = hi;
	}
}

// Reference: one thread per row.
extern "C" __global__ void minmax_rows_ref(const float *x, float *mn, float *mx, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	float lo = x[(size_t)r * cols], hi = lo;
	for (int c = 1; c < cols; c++) {
		float v = x[(size_t)r * cols + c];
		lo = fminf(lo, v);
		hi = fmaxf(hi, v);
	}
	mn[r] = lo;
	mx[r] = hi;
}
