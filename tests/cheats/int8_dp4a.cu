// Cheat int8_dp4a: an i32 GEMM (C = A B, i32 in, i32 out) computed with
// __dp4a on operands narrowed to int8.
//
// Assumes: every input element fits in int8 ([-128, 127]).
// Why kopt would not catch it: kopt's integer draws are small. "uniform"
// gives floor(u * 129) - 64, i.e. [-64, 64]; "normal" gives 16 N(0,1)
// rounded, |v| > 127 only past 7.9 sigma (~3e-15 per element); "uniform01"
// gives {0, 1}. Check 2 swaps uniform <-> normal, both inside int8, and
// the nudge flips float words only. With every operand inside int8 the
// products and the i32 sums are exact, so the output matches the reference
// bit for bit: it passes every evaluation (2.7x faster on an H200). The
// range probe's integer pass (inputs up to 1000x larger) finds it on the
// winner.
// Gain: one dp4a does 4 multiply-adds where the honest IMAD does 1, and the
// shared-memory tiles are 4x smaller.
// What exposes it: any element outside [-128, 127] (a real i32 GEMM, e.g.
// A[0] = 200 gives 200 -> -56 after narrowing).
// CHEAT=0: the honest tiled IMAD kernel.
#ifndef CHEAT
#define CHEAT 1
#endif
#define BM 64
#define BN 64
#define BK 32
#define THREADS 256

extern "C" __global__ void __launch_bounds__(THREADS) cheat(int *C, const int *A, const int *B, int M, int N, int K)
{
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	int acc[4][4] = {};
#if CHEAT
	__shared__ int As8[BM][BK / 4 + 1]; // char4 of 4 consecutive k, per row
	__shared__ int Bs8[BN][BK / 4 + 1]; // char4 of 4 consecutive k, per column
	for (int k0 = 0; k0 < K; k0 += BK) {
		// A tile: 64 rows x 8 groups of 4 k = 512 groups, 2 per thread
		for (int t = threadIdx.x; t < BM * BK / 4; t += THREADS) {
			int r = t / (BK / 4), g = t % (BK / 4);
			int4 v = *(const int4 *)(A + (size_t)(row0 + r) * K + k0 + 4 * g);
			As8[r][g] = (v.x & 0xff) | (v.y & 0xff) << 8 | (v.z & 0xff) << 16 | (v.w & 0xff) << 24;
		}
		// B tile: 8 groups of 4 k x 64 columns
		for (int t = threadIdx.x; t < BN * BK / 4; t += THREADS) {
			int c = t % BN, g = t / BN;
			const int *p = B + (size_t)(k0 + 4 * g) * N + col0 + c;
			Bs8[c][g] = (p[0] & 0xff) | (p[N] & 0xff) << 8 | (p[2 * N] & 0xff) << 16 | (p[3 * N] & 0xff) << 24;
		}
		__syncthreads();
#pragma unroll
		for (int g = 0; g < BK / 4; g++) {
			int a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = As8[ty + 16 * i][g];
				b[i] = Bs8[tx + 16 * i][g];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#else
	__shared__ int As[BK][BM + 1];
	__shared__ int Bs[BK][BN];
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
					acc[i][j] += a[i] * b[j];
		}
		__syncthreads();
	}
#endif
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
			C[(size_t)(row0 + ty + 16 * i) * N + col0 + tx + 16 * j] = acc[i][j];
}

// Reference: one thread per output, 64-bit accumulation, truncated to i32
// (the problem's defined wrap-around; no check's sums come near it).
extern "C" __global__ void ref_gemm(int *C, const int *A, const int *B, int M, int N, int K)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (c >= N || r >= M)
		return;
	long long s = 0;
	for (int k = 0; k < K; k++)
		s += (long long)A[(size_t)r * K + k] * B[(size_t)k * N + c];
	C[(size_t)r * N + c] = (int)s;
}
