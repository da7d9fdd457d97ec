// gemm_f16_wmma: C = A B in f16 with f32 accumulation on the tensor cores
// (WMMA 16x16x16), A [M, K], B [K, N], C [M, N], all row-major f16.
// Block tile BM x BN x 32 staged in shared memory (16-byte loads, rows
// padded by 8 halves), 4 warps in 2 x 2, each owning (BM/2) x (BN/2) as
// 16 x 16 accumulator fragments; the result goes through a per-warp
// shared-memory patch to be rounded to f16 and stored. The reference sums
// in f32 one output per thread; outputs differ by rounding only (f16
// default tolerance 2e-3). The reference overflows f16 at inputs scaled by
// 100 (the range probe then tests 10x).
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#define BK 32
#define PAD 8
#define WM (BM / 2)
#define WN (BN / 2)
#define FM (WM / 16)
#define FN (WN / 16)
#define NT 128

extern "C" __global__ void __launch_bounds__(NT)
	gemm_wmma(const __half *__restrict__ A, const __half *__restrict__ B, __half *__restrict__ C, int M, int N, int K)
{
	__shared__ __align__(32) __half As[BM][BK + PAD];
	__shared__ __align__(32) __half Bs[BK][BN + PAD];
	__shared__ __align__(32) float patch[4][16 * 16];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int wr = warp >> 1, wc = warp & 1;
	const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
	for (int i = 0; i < FM; i++)
#pragma unroll
		for (int j = 0; j < FN; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);

	for (int k0 = 0; k0 < K; k0 += BK) {
		// A tile: BM rows of BK halves = BM * BK / 8 chunks of 16 bytes
		for (int c = threadIdx.x; c < BM * BK / 8; c += NT) {
			const int r = c / (BK / 8), kk = (c % (BK / 8)) * 8;
			*reinterpret_cast<uint4 *>(&As[r][kk]) =
			    *reinterpret_cast<const uint4 *>(A + (size_t)(row0 + r) * K + k0 + kk);
		}
		// B tile: BK rows of BN halves
		for (int c = threadIdx.x; c < BK * BN / 8; c += NT) {
			const int r = c / (BN / 8), nn = (c % (BN / 8)) * 8;
			*reinterpret_cast<uint4 *>(&Bs[r][nn]) =
			    *reinterpret_cast<const uint4 *>(B + (size_t)(k0 + r) * N + col0 + nn);
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[FM];
			wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[FN];
#pragma unroll
			for (int i = 0; i < FM; i++)
				wmma::load_matrix_sync(fa[i], &As[wr * WM + i * 16][kk], BK + PAD);
#pragma unroll
			for (int j = 0; j < FN; j++)
				wmma::load_matrix_sync(fb[j], &Bs[kk][wc * WN + j * 16], BN + PAD);
#pragma unroll
			for (int i = 0; i < FM; i++)
#pragma unroll
				for (int j = 0; j < FN; j++)
					wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < FM; i++)
#pragma unroll
		for (int j = 0; j < FN; j++) {
			wmma::store_matrix_sync(patch[warp], acc[i][j], 16, wmma::mem_row_major);
			__syncwarp();
			const int r = row0 + wr * WM + i * 16, c = col0 + wc * WN + j * 16;
			for (int e = lane; e < 256; e += 32)
				C[(size_t)(r + e / 16) * N + c + e % 16] = __float2half_rn(patch[warp][e]);
			__syncwarp();
		}
}

// Reference: one output per thread, f32 sum over k in order.
extern "C" __global__ void gemm_ref(const __half *A, const __half *B, __half *C, int M, int N, int K)
{
	const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y;
	if (col >= N)
		return;
	float s = 0.0f;
	for (int k = 0; k < K; k++)
		s += __half2float(A[(size_t)row * K + k]) * __half2float(B[(size_t)k * N + col]);
	C[(size_t)row * N + col] = __float2half_rn(s);
}
