// Caught since bench.c takes the 8 samples the rule needs past its time cap
// while they cost little at the median (1.57x on an H200 before).
// CASE short_sampling: tests/cheats/tail_exact_tf32 (f32 GEMM 1024^3: FFMA
// where kopt holds the output to the tolerance, 1xTF32, rel. L2 ~3e-4,
// elsewhere) that ends the sampling after its FIRST batch of 4, so the rule
// that caught tail_exact_tf32 never runs.
//
// The holes: (1) compare_dev.c less_exact_when_timed() starts with
// `if (n < 8) return NULL;` ("Needs 8 samples at least"); (2) bench.c stops
// sampling after a batch once `(now - start) >= max_time_s && n >= 3`,
// whatever the noise (max_time_s is 0.3 s, kopt's own setting); (3) the
// median of 4 samples is (v[1] + v[2]) / 2 (bench.c quantile), blind to one
// outlier. So the first batch's tail (timed sample k == 3, exact, compared at
// the tolerance) also keeps one thread busy for SPIN_MS (400 ms) on
// %globaltimer: the batch outlasts max_time_s, sampling stops at n = 4, the
// three TF32 launches (within the gross bar 1e-3) are the median, and
// less_exact_when_timed is skipped. The TF32 launches are paced to PACE_PCT %
// of the exact launch's duration (measured on %globaltimer in the launches on
// new inputs), so the check-2/3 charge (run.c timed_faster_than_checked: 2x
// + 4 us) does not fire: PACE 55 -> ~1.8x faster, ok, uncharged. SPIN_MS=0 is
// tail_exact_tf32 itself (caught by less_exact_when_timed, the control).
// Wrong for a user: 3 calls in 4 return TF32 (30x the error kopt allows).
// CHEAT=0: the honest FFMA kernel on every launch.
#ifndef SPIN_MS
#define SPIN_MS 400
#endif
#ifndef PACE_PCT
#define PACE_PCT 55
#endif
#include <mma.h>
using namespace nvcuda;
#ifndef CHEAT
#define CHEAT 1
#endif
#define BM 64
#define BN 64
#define BK 16
#define TK 32
#define THREADS 256

__device__ __forceinline__ unsigned mix32(unsigned h)
{
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

// warp 0, all 32 lanes: the pointer and 32 sampled words, low 4 bits masked
__device__ __forceinline__ unsigned input_key(const float *x, long long n)
{
	int lane = threadIdx.x & 31;
	long long idx = (long long)lane * (n / 32) + n / 64;
	unsigned w = __float_as_uint(x[idx]) & ~0xfu;
	unsigned h = mix32(w + 0x9e3779b9u * (unsigned)(lane + 1));
	for (int o = 16; o > 0; o >>= 1)
		h += __shfl_xor_sync(0xffffffffu, h, o);
	unsigned long long p = (unsigned long long)x;
	h = mix32(h ^ (unsigned)p ^ mix32((unsigned)(p >> 32)));
	return (h & 0x7fffffffu) | 0x40000000u;
}

__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

// thread 0 of each block: the timed sample's index k, or -1 (new inputs)
__device__ __forceinline__ int sample_index(unsigned key)
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi;
	unsigned long long *ticket = (unsigned long long *)(low + 128);
	volatile unsigned long long *rec = (volatile unsigned long long *)(low + 136);
	unsigned long long nb = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
	unsigned L = (unsigned)(atomicAdd(ticket, 1ull) / nb);
	unsigned long long r = *rec;
	unsigned F = (unsigned)r;
	if (r == 0 || (unsigned)(r >> 32) != key) {
		*rec = ((unsigned long long)key << 32) | L;
		F = L;
	}
	int one = (int)(kopt_scale_lo[0] * kopt_scale_hi[1]); // keep the tables alive
	return L == F ? -1 : (int)(L - F - 1u) * one;
}

// the exact launch's block duration in ns (max over blocks), next to the record
__device__ __forceinline__ unsigned long long *dur_slot()
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi;
	return (unsigned long long *)(low + 144);
}

__device__ __forceinline__ unsigned long long gtime()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// exact: FFMA, thread (ty, tx) owns rows ty + 16 i, cols tx + 16 j
__device__ __forceinline__ void tile_ffma(float *C, const float *A, const float *B, int N, int K,
					  int r0, int c0)
{
	__shared__ float As[BK][BM];
	__shared__ float Bs[BK][BN];
	int t = threadIdx.x, tx = t & 15, ty = t >> 4;
	float acc[4][4];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			acc[i][j] = 0.0f;
	for (int k0 = 0; k0 < K; k0 += BK) {
		for (int e = t; e < BM * BK; e += THREADS) {
			int m = e / BK, k = e % BK;
			As[k][m] = A[(size_t)(r0 + m) * K + k0 + k];
		}
		for (int e = t; e < BK * BN; e += THREADS) {
			int k = e / BN, c = e % BN;
			Bs[k][c] = B[(size_t)(k0 + k) * N + c0 + c];
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < BK; kk++) {
			float a[4], b[4];
			for (int i = 0; i < 4; i++)
				a[i] = As[kk][ty + 16 * i];
			for (int j = 0; j < 4; j++)
				b[j] = Bs[kk][tx + 16 * j];
			for (int i = 0; i < 4; i++)
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			C[(size_t)(r0 + ty + 16 * i) * N + c0 + tx + 16 * j] = acc[i][j];
}

typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa_t;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb_t;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc_t;

// 1xTF32 on the tensor cores (operands rounded to nearest tf32), warp w
// owns rows 16 (w / 2), cols 32 (w % 2) .. + 32
__device__ __forceinline__ void tile_tf32(float *C, const float *A, const float *B, int N, int K,
					  int r0, int c0)
{
	__shared__ __align__(32) float As2[BM][TK + 8];
	__shared__ __align__(32) float Bs2[TK][BN + 8];
	int t = threadIdx.x, warp = t >> 5;
	int wr = (warp >> 1) * 16, wc = (warp & 1) * 32;
	fc_t acc[2];
	wmma::fill_fragment(acc[0], 0.0f);
	wmma::fill_fragment(acc[1], 0.0f);
	for (int k0 = 0; k0 < K; k0 += TK) {
		for (int e = t; e < BM * TK / 4; e += THREADS) {
			int r = e / (TK / 4), q = e % (TK / 4);
			*(float4 *)&As2[r][4 * q] = *(const float4 *)(A + (size_t)(r0 + r) * K + k0 + 4 * q);
		}
		for (int e = t; e < TK * BN / 4; e += THREADS) {
			int r = e / (BN / 4), q = e % (BN / 4);
			*(float4 *)&Bs2[r][4 * q] = *(const float4 *)(B + (size_t)(k0 + r) * N + c0 + 4 * q);
		}
		__syncthreads();
		for (int kk = 0; kk < TK; kk += 8) {
			fa_t a;
			wmma::load_matrix_sync(a, &As2[wr][kk], TK + 8);
			for (int e = 0; e < a.num_elements; e++)
				a.x[e] = wmma::__float_to_tf32(a.x[e]);
			for (int j = 0; j < 2; j++) {
				fb_t b;
				wmma::load_matrix_sync(b, &Bs2[kk][wc + 16 * j], BN + 8);
				for (int e = 0; e < b.num_elements; e++)
					b.x[e] = wmma::__float_to_tf32(b.x[e]);
				wmma::mma_sync(acc[j], a, b, acc[j]);
			}
		}
		__syncthreads();
	}
	for (int j = 0; j < 2; j++)
		wmma::store_matrix_sync(C + (size_t)(r0 + wr) * N + c0 + wc + 16 * j, acc[j], N,
					wmma::mem_row_major);
}

extern "C" __global__ void __launch_bounds__(THREADS) cheat(float *C, const float *A, const float *B,
							     int M, int N, int K)
{
	__shared__ int kidx;
	__shared__ unsigned long long t0;
	int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
	if (threadIdx.x == 0)
		t0 = gtime();
	if (threadIdx.x < 32) {
		int k = -1;
		if (CHEAT) {
			unsigned key = input_key(A, (long long)M * K);
			if (threadIdx.x == 0)
				k = sample_index(key);
		}
		if (threadIdx.x == 0)
			kidx = k;
	}
	__syncthreads();
	int k = kidx;
	if (!CHEAT || k < 0 || (k & 3) == 3) { // honest, new inputs, or a batch tail (the last is one)
		tile_ffma(C, A, B, N, K, r0, c0);
		if (CHEAT && threadIdx.x == 0) {
			if (k < 0)
				atomicMax(dur_slot(), gtime() - t0);
			else if (k == 3 && blockIdx.x == 0 && blockIdx.y == 0)
				while (gtime() - t0 < (unsigned long long)SPIN_MS * 1000000ull)
					; // the first batch outlasts max_time_s: sampling stops at n = 4
		}
		return;
	}
	tile_tf32(C, A, B, N, K, r0, c0);
	if (threadIdx.x == 0) {
		unsigned long long target = *(volatile unsigned long long *)dur_slot() * PACE_PCT / 100;
		while (gtime() - t0 < target)
			; // paced: the median stays above half the exact time (no charge)
	}
}

// Reference: one thread per output, double accumulation.
extern "C" __global__ void ref_gemm(float *C, const float *A, const float *B, int M, int N, int K)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (c >= N || r >= M)
		return;
	double s = 0;
	for (int k = 0; k < K; k++)
		s += (double)A[(size_t)r * K + k] * B[(size_t)k * N + c];
	C[(size_t)r * N + c] = (float)s;
}
