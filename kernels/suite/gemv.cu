// Matrix-vector product, f32, torch.matmul(A, x) with A (M, K) row-major and
// x (K, 1): y[m] = sum_k A[m][k] x[k].
//
// A block of BLOCK_SIZE threads owns ROWS rows; each row gets
// BLOCK_SIZE / ROWS threads (whole warps) that stride along it VEC elements
// at a time, UNROLL loads in flight; the partial sums meet through warp
// shuffles and shared memory. x is read by every row and stays in the L2.
// Requires K % VEC == 0. Launch: grid cdiv(M, ROWS), block BLOCK_SIZE.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

#define GROUP (BLOCK_SIZE / ROWS)
#define GROUP_WARPS (GROUP / 32)
static_assert(BLOCK_SIZE % ROWS == 0 && GROUP % 32 == 0, "whole warps per row");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");

struct __align__(sizeof(float) * VEC) vec_t {
	float v[VEC];
};

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	gemv(const float *__restrict__ A, const float *__restrict__ x, float *__restrict__ y, int M, int K)
{
	__shared__ float part[ROWS][GROUP_WARPS];
	const int local = threadIdx.x / GROUP, t = threadIdx.x % GROUP;
	const int row = blockIdx.x * ROWS + local;
	const bool active = row < M;
	const vec_t *ar = reinterpret_cast<const vec_t *>(A + (long)(active ? row : 0) * K);
	const vec_t *xv = reinterpret_cast<const vec_t *>(x);
	const int nvec = K / VEC;
	float s = 0.0f;
	if (active) {
#pragma unroll UNROLL
		for (int i = t; i < nvec; i += GROUP) {
			vec_t a = ar[i], b = xv[i];
#pragma unroll
			for (int k = 0; k < VEC; k++)
				s = fmaf(a.v[k], b.v[k], s);
		}
	}
#pragma unroll
	for (int off = 16; off > 0; off /= 2)
		s += __shfl_xor_sync(0xffffffffu, s, off);
	if (GROUP_WARPS > 1) {
		if (t % 32 == 0)
			part[local][t / 32] = s;
		__syncthreads();
		if (t != 0)
			return;
		for (int k = 1; k < GROUP_WARPS; k++)
			s += part[local][k];
	}
	if (active && t == 0)
		y[row] = s;
}
