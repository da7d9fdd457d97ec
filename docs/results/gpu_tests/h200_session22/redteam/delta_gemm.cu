// QA CASE delta_gemm: an always-right f32 GEMM (C = A B, 1024^3) that keeps
// C and per-row / per-column hashes of A and B in the device heap between
// launches and, when only a few rows of A or columns of B changed, rebuilds
// only the outputs those touch.
//
// The hole: the nudge (bench.c nudge_inputs) is what keeps repeated timed
// launches honest: "no two timed launches read the same bytes" (TRUST.md).
// But it flips one bit of ONE word per float input per sample (and undoes
// the previous flip): for a GEMM that is one row of A and one column of B,
// i.e. at most 2 rows and 2 columns of C per sample, 4 x 1024 of its 1M
// outputs. A kernel that remembers its last answer and the inputs' rows /
// columns by hash redoes 0.4 % of the FLOPs and copies the rest; every
// output is the product of the inputs it read (a recomputed element sums
// its k in another order than the full tile: ~1e-7 apart), so every
// comparison (check 1, each timed launch, the last timed launch, check 2)
// passes, and the timed median is a memory copy plus the hashing.
// Storage: a 4.25 MiB device-heap block (malloc: the context's heap, 8 MiB
// by default; kopt neither lists nor scans it: TRUST.md, heap_state), whose
// address sits in the alignment padding after a checked module variable
// (global_padding's hole). The memo is allocated on a module's 2nd launch
// (so check 1's module, launched once, never allocates): in the timing
// module, the warm-up is launch 1 and sample 0 allocates. It is never
// freed (one per evaluation: a long run in one worker fills the heap after
// the first and the cheat falls back to honest; a free on the launch that
// sees all-new inputs, check 2, would fix that).
// CHEAT=0: the honest tiled FFMA kernel (the same tile code the cheat uses
// for a full tile).
#ifndef CHEAT
#define CHEAT 1
#endif
#define BM 64
#define BN 64
#define BK 16
#define THREADS 256
#define MAX_DIRTY 8
#define MEMO_MAGIC 0x64656c74u

struct tile_memo {
	unsigned magic, pad;
	unsigned long long rowh[BM];
	unsigned long long colh[BN];
	float c[BM * BN];
};

struct memo_slot {
	unsigned long long ptr;
	unsigned seen, last_p;
};

__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

__device__ __forceinline__ volatile memo_slot *the_slot()
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi;
	return (volatile memo_slot *)(low + 128);
}

// one word's term of a row / column hash (sum mod 2^64: any order)
__device__ __forceinline__ unsigned long long hterm(float v, unsigned k)
{
	return (unsigned long long)(__float_as_uint(v) ^ (k * 0x9e3779b9u)) * 0xff51afd7ed558ccdull;
}

// the position of the q-th set bit of m (q < popcount)
__device__ __forceinline__ int nth_bit(unsigned long long m, int q)
{
	for (int i = 0; i < q; i++)
		m &= m - 1;
	return __ffsll((long long)m) - 1;
}

// The full 64x64 tile, thread (ty, tx) owns rows ty + 16 i, cols tx + 16 j.
__device__ __forceinline__ void tile_full(const float *A, const float *B, int N, int K, int r0,
					  int c0, float acc[4][4])
{
	__shared__ float As[BK][BM];
	__shared__ float Bs[BK][BN];
	int t = threadIdx.x, tx = t & 15, ty = t >> 4;
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
}

extern "C" __global__ void __launch_bounds__(THREADS) cheat(float *C, const float *A, const float *B,
							     int M, int N, int K)
{
	int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
	int t = threadIdx.x, tx = t & 15, ty = t >> 4, lane = t & 31, warp = t >> 5;
	float acc[4][4];
#if CHEAT
	__shared__ tile_memo *tm;
	__shared__ unsigned long long rh[BM], chp[4][BN];
	__shared__ unsigned long long dirty_r, dirty_c;
	__shared__ int mode; // 0: full, no memo; 1: full, fill the memo; 2: from the memo
	if (t == 0) {
		unsigned P = *(volatile const unsigned *)(C + (size_t)r0 * N + c0); // this launch's poison
		volatile memo_slot *s = the_slot();
		unsigned ntiles = gridDim.x * gridDim.y;
		if (blockIdx.x == 0 && blockIdx.y == 0) {
			if (s->last_p != P) {
				s->seen = s->seen + 1;
				s->last_p = P;
			}
			if (s->ptr == 0 && s->seen >= 2) {
				tile_memo *p = (tile_memo *)malloc(sizeof(tile_memo) * ntiles);
				if (p != 0) {
					for (unsigned k = 0; k < ntiles; k++)
						((volatile tile_memo *)p)[k].magic = 0;
					__threadfence();
					s->ptr = (unsigned long long)p;
				}
			}
		}
		tile_memo *base = (tile_memo *)s->ptr;
		tm = base ? base + (blockIdx.y * gridDim.x + blockIdx.x) : 0;
		mode = 0;
		// keep the tables alive (they multiply by one)
		if (kopt_scale_lo[0] * kopt_scale_hi[1] != 1u)
			tm = 0;
	}
	__syncthreads();
	if (tm != 0) {
		// row hashes: warp w hashes rows w, w + 8, ... (lanes over k: coalesced)
		for (int r = warp; r < BM; r += THREADS / 32) {
			const float *row = A + (size_t)(r0 + r) * K;
			unsigned long long h = 0;
			for (int k = lane; k < K; k += 32)
				h += hterm(row[k], (unsigned)k);
			for (int o = 16; o > 0; o >>= 1)
				h += __shfl_xor_sync(0xffffffffu, h, o);
			if (lane == 0)
				rh[r] = h;
		}
		// column hashes: thread t takes column t % 64, a quarter of k
		{
			int c = t & 63, part = t >> 6, kq = K / 4;
			unsigned long long h = 0;
			for (int k = part * kq; k < (part + 1) * kq; k++)
				h += hterm(B[(size_t)k * N + c0 + c], (unsigned)k);
			chp[part][c] = h;
		}
		__syncthreads();
		if (t == 0) {
			volatile tile_memo *v = tm;
			unsigned long long dr = 0, dc = 0;
			int valid = v->magic == MEMO_MAGIC;
			for (int i = 0; i < BM; i++) {
				if (v->rowh[i] != rh[i])
					dr |= 1ull << i;
				unsigned long long ch = chp[0][i] + chp[1][i] + chp[2][i] + chp[3][i];
				if (v->colh[i] != ch)
					dc |= 1ull << i;
			}
			dirty_r = dr;
			dirty_c = dc;
			mode = (!valid || __popcll(dr) + __popcll(dc) > MAX_DIRTY) ? 1 : 2;
		}
		__syncthreads();
	}
	if (mode == 2) {
		// copy the memo, then redo the outputs in a changed row or column
		float *mc = tm->c;
		for (int e = t; e < BM * BN; e += THREADS)
			C[(size_t)(r0 + e / BN) * N + c0 + e % BN] = ((volatile float *)mc)[e];
		__syncthreads();
		// the outputs in a changed row or column, one warp each, lanes over k
		unsigned long long dr = dirty_r, dc = dirty_c;
		int nr = __popcll(dr), nc = __popcll(dc), D = (nr + nc) * BN;
		for (int e = warp; e < D; e += THREADS / 32) {
			int r, c;
			if (e < nr * BN) {
				r = nth_bit(dr, e / BN);
				c = e % BN;
			} else {
				c = nth_bit(dc, (e - nr * BN) / BM);
				r = (e - nr * BN) % BM;
				if ((dr >> r) & 1ull)
					continue; // done with its row
			}
			const float *a = A + (size_t)(r0 + r) * K;
			const float *b = B + c0 + c;
			float s = 0.0f;
			for (int k = lane; k < K; k += 32)
				s = fmaf(a[k], b[(size_t)k * N], s);
			for (int o = 16; o > 0; o >>= 1)
				s += __shfl_xor_sync(0xffffffffu, s, o);
			if (lane == 0) {
				C[(size_t)(r0 + r) * N + c0 + c] = s;
				mc[r * BN + c] = s;
			}
		}
		if (t < BM)
			tm->rowh[t] = rh[t];
		else if (t < BM + BN)
			tm->colh[t - BM] = chp[0][t - BM] + chp[1][t - BM] + chp[2][t - BM] + chp[3][t - BM];
		return;
	}
#endif
	tile_full(A, B, N, K, r0, c0, acc);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			C[(size_t)(r0 + ty + 16 * i) * N + c0 + tx + 16 * j] = acc[i][j];
#if CHEAT
	if (mode == 1) {
		for (int i = 0; i < 4; i++)
			for (int j = 0; j < 4; j++)
				tm->c[(ty + 16 * i) * BN + tx + 16 * j] = acc[i][j];
		if (t < BM)
			tm->rowh[t] = rh[t];
		else if (t < BM + BN)
			tm->colh[t - BM] = chp[0][t - BM] + chp[1][t - BM] + chp[2][t - BM] + chp[3][t - BM];
		__threadfence();
		__syncthreads();
		if (t == 0)
			((volatile tile_memo *)tm)->magic = MEMO_MAGIC;
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
