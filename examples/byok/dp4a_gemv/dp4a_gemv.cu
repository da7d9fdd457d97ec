// dp4a_gemv: y[m] = sum_k A[m][k] * x[k], int8 A (M x K, row-major) and x,
// exact int32 y. One warp per row (WARPS rows per block); each lane loads
// VEC bytes of the row at a time (4: one int, 16: one int4) and multiplies
// four bytes at once with __dp4a (DP4A = 1) or byte by byte (DP4A = 0).
#ifndef WARPS
#define WARPS 4
#endif
#ifndef VEC
#define VEC 16
#endif
#ifndef DP4A
#define DP4A 1
#endif
#if VEC != 4 && VEC != 16
#error "VEC is 4 or 16"
#endif

__device__ __forceinline__ int dot4(int a, int b, int acc)
{
#if DP4A
	return __dp4a(a, b, acc);
#else
	for (int s = 0; s < 32; s += 8)
		acc += (int)(signed char)(a >> s) * (int)(signed char)(b >> s);
	return acc;
#endif
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
	gemv_i8(const signed char *__restrict__ A, const signed char *__restrict__ x,
		int *__restrict__ y, int M, int K)
{
	int row = blockIdx.x * WARPS + threadIdx.x / 32;
	int lane = threadIdx.x & 31;
	if (row >= M)
		return;
	const signed char *a = A + (long long)row * K;
	int acc = 0;
	for (int k = lane * VEC; k < K; k += 32 * VEC) {
#if VEC == 16
		int4 av = *reinterpret_cast<const int4 *>(a + k);
		int4 xv = __ldg(reinterpret_cast<const int4 *>(x + k));
		acc = dot4(av.x, xv.x, acc);
		acc = dot4(av.y, xv.y, acc);
		acc = dot4(av.z, xv.z, acc);
		acc = dot4(av.w, xv.w, acc);
#else
		int av = *reinterpret_cast<const int *>(a + k);
		int xv = __ldg(reinterpret_cast<const int *>(x + k));
		acc = dot4(av, xv, acc);
#endif
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (lane == 0)
		y[row] = acc;
}

// The reference: one thread per row, one byte at a time.
extern "C" __global__ void gemv_i8_ref(const signed char *A, const signed char *x, int *y, int M,
				       int K)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= M)
		return;
	int acc = 0;
	for (int k = 0; k < K; k++)
		acc += (int)A[(long long)row * K + k] * (int)x[k];
	y[row] = acc;
}
