// byok_matmul_constrained: C = A B, f32, A M x K, B K x N, row-major, M, N, K
// no multiple of any tile. A block computes a BM x BN tile of C with
// (BM / TM) x (BN / TN) threads, each a TM x TN register tile; K advances
// in steps of 16 through shared memory (zero-filled past the edges).
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#define BK 16
#define THREADS ((BM / TM) * (BN / TN))

static_assert(BM % TM == 0 && BN % TN == 0, "tiles must divide");

extern "C" __global__ void __launch_bounds__(THREADS)
	sgemm_tiled(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M,
		    int N, int K)
{
	__shared__ float As[BK][BM + 1];
	__shared__ float Bs[BK][BN];
	const int tid = threadIdx.x;
	const int tr = tid / (BN / TN), tc = tid % (BN / TN);
	const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	float acc[TM][TN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = 0.0f;
	for (int k0 = 0; k0 < K; k0 += BK) {
		for (int e = tid; e < BM * BK; e += THREADS) {
			const int r = e / BK, k = e % BK;
			const int gr = row0 + r, gk = k0 + k;
			As[k][r] = gr < M && gk < K ? A[(size_t)gr * K + gk] : 0.0f;
		}
		for (int e = tid; e < BK * BN; e += THREADS) {
			const int k = e / BN, c = e % BN;
			const int gk = k0 + k, gc = col0 + c;
			Bs[k][c] = gk < K && gc < N ? B[(size_t)gk * N + gc] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < BK; k++) {
			float a[TM], b[TN];
#pragma unroll
			for (int i = 0; i < TM; i++)
				a[i] = As[k][tr * TM + i];
#pragma unroll
			for (int j = 0; j < TN; j++)
				b[j] = Bs[k][tc * TN + j];
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
		for (int j = 0; j < TN; j++) {
			const int r = row0 + tr * TM + i, c = col0 + tc * TN + j;
			if (r < M && c < N)
				C[(size_t)r * N + c] = acc[i][j];
		}
}

// Reference: one thread per element of C.
extern "C" __global__ void sgemm_ref(const float *A, const float *B, float *C, int M, int N, int K)
{
	const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
	if (r >= M || c >= N)
		return;
	float s = 0.0f;
	for (int k = 0; k < K; k++)
		s = fmaf(A[(size_t)r * K + k], B[(size_t)k * N + c], s);
	C[(size_t)r * N + c] = s;
}
