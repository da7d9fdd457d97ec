// QA CASE burst_tf32: an f32 GEMM (C = A B, 1024^3) done with 3xTF32 on the
// tensor cores (error ~1e-6, inside f32's 1e-5) on every launch kopt holds
// to the tolerance, and with plain 1xTF32 (one MMA instead of three, error
// ~4e-4) on the 2nd and 3rd launch of each back-to-back burst.
//
// Assumes: (1) kopt times in batches of 4 launches queued back to back
// (bench.c: BATCH_MAX 4 whenever the warm-up takes under 2 ms; the cap of
// 100 samples is a multiple of 4 and a batch is only cut short by the cap),
// so the last timed launch, the only one compared at the tolerance, is the
// 4th of a batch; (2) every other timed launch is compared only "grossly":
// rel. L2 <= max(1e-3, 4 x tol) (compare_dev.c SAMPLE_GROSS), with no
// per-element bound; (3) launches of one batch follow each other within
// GAP_US (poison memset + nudge + 50 MB flush memset + kopt_compare, ~30 us),
// while checks, the warm-up and the first launch of a batch come after a
// host round trip (longer).
// How: thread 0 of each block keeps a 32-byte record in a device-heap chunk
// (malloc/free; chunks come back intact, as tests/cheats/heap_state showed):
// the launch's poison word (names the launch), a burst position and the
// time the previous launch ended (%globaltimer). Position = 1 after a gap
// longer than GAP_US, else previous + 1. Positions 2 and 3 (mod 4) use
// 1xTF32. Whatever the gaps do, a batch starts at position 1 or 2 (mod 4),
// so its 4th launch is at 0 or 1 (mod 4): precise. Checks are isolated
// launches: position 1, precise.
// Why kopt would not catch it: the last timed output and checks 1 and 2 are
// 3xTF32 (exact to ~1e-6); the 1xTF32 launches are within the gross bar;
// heap records are not scanned. The median moves half-way to the 1xTF32
// time (half the samples fast).
// What exposes it: comparing every timed launch at the tolerance (with the
// nudged reference), or a last launch at a random position in its batch.
// CHEAT=0: 3xTF32 on every launch (no heap).
#include <mma.h>
using namespace nvcuda;
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef GAP_US
#define GAP_US 75
#endif
#define BM 64
#define BN 64
#define BK 32
#define THREADS 128
#define MAGIC 0x62757273u

struct rec {
	unsigned magic, poison, count, dec;
	unsigned long long end_ns, pad;
};

__device__ __forceinline__ unsigned long long gtime()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa_t;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb_t;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc_t;

extern "C" __global__ void __launch_bounds__(THREADS) cheat(float *C, const float *A, const float *B, int M, int N, int K)
{
	__shared__ __align__(32) float As[BM][BK + 8];
	__shared__ __align__(32) float Bs[BK][BN + 8];
	__shared__ int fast;
	__shared__ rec *chunk;
	int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	if (threadIdx.x == 0) {
		int f = 0;
		rec *c = 0;
#if CHEAT
		// this launch's poison word, from this block's own first element
		unsigned P = *(volatile const unsigned *)(C + (size_t)row0 * N + col0);
		unsigned long long now = gtime();
		c = (rec *)malloc(sizeof(rec));
		if (c != 0) {
			volatile rec *v = c;
			if (v->magic == MAGIC && v->poison == P) {
				f = v->dec; // another block of this launch decided
			} else {
				unsigned cnt = (v->magic == MAGIC && now > v->end_ns &&
						now - v->end_ns < (unsigned long long)GAP_US * 1000ull)
						   ? v->count + 1
						   : 1u;
				unsigned m = (cnt - 1u) & 3u;
				f = m == 1u || m == 2u;
				v->count = cnt;
				v->dec = f;
				v->poison = P;
				v->magic = MAGIC;
			}
		}
#endif
		chunk = c;
		fast = f;
	}
	__syncthreads();
	int warp = threadIdx.x >> 5;
	int wr = (warp >> 1) * 32, wc = (warp & 1) * 32;
	fc_t acc[2][2];
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);
	bool f = fast;
	for (int k0 = 0; k0 < K; k0 += BK) {
		for (int t = threadIdx.x; t < BM * BK / 4; t += THREADS) {
			int r = t / (BK / 4), q = t % (BK / 4);
			*(float4 *)&As[r][4 * q] = *(const float4 *)(A + (size_t)(row0 + r) * K + k0 + 4 * q);
		}
		for (int t = threadIdx.x; t < BK * BN / 4; t += THREADS) {
			int r = t / (BN / 4), q = t % (BN / 4);
			*(float4 *)&Bs[r][4 * q] = *(const float4 *)(B + (size_t)(k0 + r) * N + col0 + 4 * q);
		}
		__syncthreads();
		for (int kk = 0; kk < BK; kk += 8) {
			fa_t ah[2], al[2];
			fb_t bh[2], bl[2];
			for (int i = 0; i < 2; i++) {
				wmma::load_matrix_sync(ah[i], &As[wr + 16 * i][kk], BK + 8);
				wmma::load_matrix_sync(bh[i], &Bs[kk][wc + 16 * i], BN + 8);
				for (int e = 0; e < ah[i].num_elements; e++) {
					float v = ah[i].x[e], h = wmma::__float_to_tf32(v);
					ah[i].x[e] = h;
					al[i].x[e] = wmma::__float_to_tf32(v - h);
				}
				for (int e = 0; e < bh[i].num_elements; e++) {
					float v = bh[i].x[e], h = wmma::__float_to_tf32(v);
					bh[i].x[e] = h;
					bl[i].x[e] = wmma::__float_to_tf32(v - h);
				}
			}
			for (int i = 0; i < 2; i++)
				for (int j = 0; j < 2; j++) {
					if (!f) {
						wmma::mma_sync(acc[i][j], al[i], bh[j], acc[i][j]);
						wmma::mma_sync(acc[i][j], ah[i], bl[j], acc[i][j]);
					}
					wmma::mma_sync(acc[i][j], ah[i], bh[j], acc[i][j]);
				}
		}
		__syncthreads();
	}
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			wmma::store_matrix_sync(C + (size_t)(row0 + wr + 16 * i) * N + col0 + wc + 16 * j, acc[i][j], N,
						wmma::mem_row_major);
#if CHEAT
	__syncthreads();
	if (threadIdx.x == 0 && chunk != 0) {
		((volatile rec *)chunk)->end_ns = gtime();
		__threadfence();
		free(chunk);
	}
#endif
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
