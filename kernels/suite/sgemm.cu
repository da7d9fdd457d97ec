// f32 matrix multiply on the CUDA cores (no TF32), torch.matmul semantics:
//   C[z] = A[z] B[z]    A (M, K), B (K, N), C (M, N), row-major, z < batch
// TRANS_B=1 takes B as (N, K) and computes A B^T (torch.matmul(A, B.T)).
// A batch of matrices is laid out one after another (gridDim.z = batch).
//
// A block computes a BM x BN tile of C with (BM/TM) x (BN/TN) threads, each a
// TM x TN register tile whose rows are BM/TM apart and columns BN/TN apart
// (so a warp reads consecutive shared-memory words, and writes consecutive
// columns of C). Per step of BK, the block stages A's BM x BK tile and B's
// BK x BN tile in shared memory, both stored k-major.
// Requires M % BM == 0, N % BN == 0, K % BK == 0.
// Launch: grid (N / BN, M / BM, batch), block (BM / TM) * (BN / TN).
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif

#define TX (BN / TN)
#define TY (BM / TM)
#define THREADS (TX * TY)

static_assert(BM % TM == 0 && BN % TN == 0, "tiles must divide");
static_assert((BM * BK) % THREADS == 0 && (BN * BK) % THREADS == 0, "tile loads must divide among threads");

extern "C" __global__ void __launch_bounds__(THREADS)
	sgemm(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
	__shared__ float As[BK][BM + 1];
	__shared__ float Bs[BK][BN + (TRANS_B ? 1 : 0)];
	const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
	const long z = blockIdx.z;
	A += z * M * K + (long)blockIdx.y * BM * K;
	B += z * K * N + (TRANS_B ? (long)blockIdx.x * BN * K : (long)blockIdx.x * BN);
	C += z * M * N + (long)blockIdx.y * BM * N + (long)blockIdx.x * BN;

	float acc[TM][TN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = 0.0f;

	for (int k0 = 0; k0 < K; k0 += BK) {
		// A's tile: row m, column k, read along k (contiguous), stored k-major.
#pragma unroll
		for (int e = tid; e < BM * BK; e += THREADS) {
			const int m = e / BK, k = e % BK;
			As[k][m] = A[(long)m * K + k0 + k];
		}
#pragma unroll
		for (int e = tid; e < BN * BK; e += THREADS) {
#if TRANS_B
			const int n = e / BK, k = e % BK;
			Bs[k][n] = B[(long)n * K + k0 + k];
#else
			const int k = e / BN, n = e % BN;
			Bs[k][n] = B[(long)(k0 + k) * N + n];
#endif
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < BK; k++) {
			float a[TM], b[TN];
#pragma unroll
			for (int i = 0; i < TM; i++)
				a[i] = As[k][ty + i * TY];
#pragma unroll
			for (int j = 0; j < TN; j++)
				b[j] = Bs[k][tx + j * TX];
#pragma unroll
			for (int i = 0; i < TM; i++)
#pragma unroll
				for (int j = 0; j < TN; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			C[(long)(ty + i * TY) * N + tx + j * TX] = acc[i][j];
}
