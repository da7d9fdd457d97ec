// Cheat i64_acc: an i32 x i32 -> i64 GEMM (C = A B, the output 64-bit so
// that large sums are exact) whose cheat accumulates in 32 bits and widens
// only at the store. A classic slip ("int acc = 0;" before "C[...] = acc").
//
// Assumes: |sum_k A[r][k] B[k][c]| < 2^31 for every output.
// Why kopt would not catch it: kopt's integer inputs are small ([-64, 64]
// for "uniform", 16 N(0,1) for "normal", {0,1} for "uniform01"), so with
// K = 2048 no sum comes within 2^31 (|sum| <= 64 * 128 * 2048 ~ 1.7e7);
// the 64-bit output is compared bit for bit and matches; check 2 only swaps
// uniform <-> normal. It passes every evaluation; the range probe's
// integer pass (inputs up to 1000x larger) finds it on the winner.
// Gain: 32-bit IMAD per multiply-add instead of IMAD.WIDE + 64-bit adds,
// and half the accumulator registers.
// What exposes it: inputs of a few tens of thousands (e.g. every element
// 40000: sums of 3.3e12 wrap).
// CHEAT=0: the honest kernel with 64-bit accumulators.
#ifndef CHEAT
#define CHEAT 1
#endif
#define BM 64
#define BN 64
#define BK 32
#define THREADS 256

#if CHEAT
typedef int acc_t;
#else
typedef long long acc_t;
#endif

extern "C" __global__ void __launch_bounds__(THREADS) cheat(long long *C, const int *A, const int *B, int M, int N, int K)
{
	__shared__ int As[BK][BM + 1];
	__shared__ int Bs[BK][BN];
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	acc_t acc[4][4] = {};
	for (int k0 = 0; k0 < K; k0 += BK) {
		for (int t = threadIdx.x; t < BM * BK; t += THREADS) {
			int r = t / BK, k = t % BK;
			As[k][r] = A[(size_t)(row0 + r) * K + k0 + k];
		}
		for (int t = threadIdx.x; t < BN * BK; t += THREADS) {
			int k = t / BN, c = t % BN;
			Bs[k][c] = B[(size_t)(k0 + k) * N + col0 + c];
		}
		__syncthreads();
#pragma unroll 8
		for (int k = 0; k < BK; k++) {
			int a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = As[k][ty + 16 * i];
				b[i] = Bs[k][tx + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] += (acc_t)a[i] * b[j];
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
			C[(size_t)(row0 + ty + 16 * i) * N + col0 + tx + 16 * j] = (long long)acc[i][j];
}

// Reference: one thread per output, 64-bit accumulation.
extern "C" __global__ void ref_gemm64(long long *C, const int *A, const int *B, int M, int N, int K)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (c >= N || r >= M)
		return;
	long long s = 0;
	for (int k = 0; k < K; k++)
		s += (long long)A[(size_t)r * K + k] * B[(size_t)k * N + c];
	C[(size_t)r * N + c] = s;
}
