// C = A * B on tensor cores: A is M x K, B is K x N, C is M x N, all
// row-major; f16 inputs, f32 accumulation, f16 output (f32 with -DC_F32=1).
//
// Each block computes a BLOCK_M x BLOCK_N tile of C with WARPS_M x WARPS_N
// warps (or WARPS, arranged by the tile's shape); a warp owns a (BLOCK_M/WARPS_M) x (BLOCK_N/WARPS_N) sub-tile made of
// m16n8k16 mma.sync instructions. Tiles of A and B stream through a ring of
// STAGES shared-memory buffers filled by cp.async (STAGES = 1: load, wait,
// compute). Shared rows are padded by 16 bytes, which makes the row stride an
// odd number of 16-byte units, so ldmatrix reads are free of bank conflicts.
// GROUP_M > 1 walks the output tiles in groups of GROUP_M block rows so that
// blocks running together share tiles of B in L2.
//
// Dynamic shared memory: STAGES * (BLOCK_M*(BLOCK_K+8) + BLOCK_K*(BLOCK_N+8)) * 2 bytes.
// Requires M % BLOCK_M == 0, N % BLOCK_N == 0, K % BLOCK_K == 0, K and N
// multiples of 8 (16-byte cp.async), BLOCK_M % (16*WARPS_M) == 0,
// BLOCK_N % (16*WARPS_N) == 0, BLOCK_K % 16 == 0. The spec's constraints say
// the same.
#include <cuda_fp16.h>

#ifndef BLOCK_M
#define BLOCK_M 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
// The warp grid: WARPS_M x WARPS_N, or WARPS warps laid out by the tile's
// shape (more warps along the longer side).
#if !defined(WARPS_M) && !defined(WARPS_N)
#ifndef WARPS
#define WARPS 4
#endif
#if WARPS == 1
#define WARPS_M 1
#elif WARPS == 2
#define WARPS_M (BLOCK_M >= BLOCK_N ? 2 : 1)
#elif WARPS == 4
#define WARPS_M 2
#elif WARPS == 8
#define WARPS_M (BLOCK_M >= BLOCK_N ? 4 : 2)
#elif WARPS == 16
#define WARPS_M 4
#else
#error "WARPS must be 1, 2, 4, 8 or 16"
#endif
#define WARPS_N (WARPS / WARPS_M)
#endif
#if !defined(WARPS_M) || !defined(WARPS_N)
#error "define both WARPS_M and WARPS_N, or WARPS"
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef C_F32
#define C_F32 0
#endif

#define THREADS (WARPS_M * WARPS_N * 32)
#define WARP_M (BLOCK_M / WARPS_M)
#define WARP_N (BLOCK_N / WARPS_N)
#define MMA_M (WARP_M / 16)
#define MMA_N (WARP_N / 8)
#define LDA (BLOCK_K + 8) /* halves per shared row of A */
#define LDB (BLOCK_N + 8) /* halves per shared row of B */
#define A_STAGE (BLOCK_M * LDA)
#define B_STAGE (BLOCK_K * LDB)

static_assert(BLOCK_M % (16 * WARPS_M) == 0, "BLOCK_M must be a multiple of 16*WARPS_M");
static_assert(BLOCK_N % (16 * WARPS_N) == 0, "BLOCK_N must be a multiple of 16*WARPS_N");
static_assert(BLOCK_K % 16 == 0, "BLOCK_K must be a multiple of 16");
static_assert(STAGES >= 1, "STAGES must be at least 1");

#if C_F32
typedef float c_t;
#else
typedef __half c_t;
#endif

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}

__device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
					 unsigned b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Copies the k-th BLOCK_K slice of this block's A rows and B columns into
// one stage, 16 bytes per cp.async.
__device__ __forceinline__ void load_tile(__half *as, __half *bs, const __half *A, const __half *B,
					  int m0, int n0, int k0, int N, int K)
{
	constexpr int A_CHUNKS = BLOCK_M * BLOCK_K / 8, A_ROW = BLOCK_K / 8;
	constexpr int B_CHUNKS = BLOCK_K * BLOCK_N / 8, B_ROW = BLOCK_N / 8;
	// Trip counts known at compile time, so the loops unroll completely.
#pragma unroll
	for (int it = 0; it < (A_CHUNKS + THREADS - 1) / THREADS; it++) {
		const int c = threadIdx.x + it * THREADS;
		if (A_CHUNKS % THREADS == 0 || c < A_CHUNKS) {
			const int r = c / A_ROW, col = (c % A_ROW) * 8;
			cp_async16(as + r * LDA + col, A + (size_t)(m0 + r) * K + k0 + col);
		}
	}
#pragma unroll
	for (int it = 0; it < (B_CHUNKS + THREADS - 1) / THREADS; it++) {
		const int c = threadIdx.x + it * THREADS;
		if (B_CHUNKS % THREADS == 0 || c < B_CHUNKS) {
			const int r = c / B_ROW, col = (c % B_ROW) * 8;
			cp_async16(bs + r * LDB + col, B + (size_t)(k0 + r) * N + n0 + col);
		}
	}
}

// One BLOCK_K slice: for every k16 step, the warp's A and B fragments come
// from shared memory through ldmatrix and feed MMA_M x MMA_N mma.sync.
__device__ __forceinline__ void compute_tile(float (&acc)[MMA_M][MMA_N][4], const __half *as,
					     const __half *bs, int wm, int wn, int lane)
{
#pragma unroll
	for (int kk = 0; kk < BLOCK_K; kk += 16) {
		unsigned a[MMA_M][4];
		unsigned b[MMA_N][2];
#pragma unroll
		for (int i = 0; i < MMA_M; i++)
			ldmatrix_x4(a[i], as + (wm + i * 16 + (lane & 15)) * LDA + kk + (lane >> 4) * 8);
#pragma unroll
		for (int j = 0; j < MMA_N; j += 2) {
			unsigned r[4];
			ldmatrix_x4_trans(r, bs + (kk + (lane & 15)) * LDB + wn + j * 8 + (lane >> 4) * 8);
			b[j][0] = r[0];
			b[j][1] = r[1];
			b[j + 1][0] = r[2];
			b[j + 1][1] = r[3];
		}
#pragma unroll
		for (int i = 0; i < MMA_M; i++)
#pragma unroll
			for (int j = 0; j < MMA_N; j++)
				mma16816(acc[i][j], a[i], b[j][0], b[j][1]);
	}
}

extern "C" __global__ void __launch_bounds__(THREADS)
	matmul(const __half *__restrict__ A, const __half *__restrict__ B, c_t *__restrict__ C, int M,
	       int N, int K)
{
	extern __shared__ __align__(16) unsigned char smem_raw[];
	__half *as = reinterpret_cast<__half *>(smem_raw);
	__half *bs = as + STAGES * A_STAGE;

	// Grouped launch order: consecutive blocks cover GROUP_M block rows of
	// one block column before moving right.
	const int tiles_n = gridDim.x, tiles_m = gridDim.y;
	const int pid = blockIdx.y * tiles_n + blockIdx.x;
	int tm, tn;
	if (GROUP_M > 1) {
		const int per_group = GROUP_M * tiles_n;
		const int first_m = (pid / per_group) * GROUP_M;
		const int rows = min(tiles_m - first_m, GROUP_M);
		tm = first_m + (pid % per_group) % rows;
		tn = (pid % per_group) / rows;
	} else {
		tm = blockIdx.y;
		tn = blockIdx.x;
	}
	const int m0 = tm * BLOCK_M, n0 = tn * BLOCK_N;

	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int wm = (warp / WARPS_N) * WARP_M, wn = (warp % WARPS_N) * WARP_N;

	float acc[MMA_M][MMA_N][4];
#pragma unroll
	for (int i = 0; i < MMA_M; i++)
#pragma unroll
		for (int j = 0; j < MMA_N; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[i][j][e] = 0.0f;

	const int k_tiles = K / BLOCK_K;
#if STAGES == 1
	for (int kt = 0; kt < k_tiles; kt++) {
		load_tile(as, bs, A, B, m0, n0, kt * BLOCK_K, N, K);
		cp_async_commit();
		cp_async_wait<0>();
		__syncthreads();
		compute_tile(acc, as, bs, wm, wn, lane);
		__syncthreads();
	}
#else
	// Prologue: the first STAGES-1 slices in flight. A commit group is
	// made every step, empty or not, so wait_group counts stay exact.
#pragma unroll
	for (int s = 0; s < STAGES - 1; s++) {
		if (s < k_tiles)
			load_tile(as + s * A_STAGE, bs + s * B_STAGE, A, B, m0, n0, s * BLOCK_K, N, K);
		cp_async_commit();
	}
	for (int kt = 0; kt < k_tiles; kt++) {
		cp_async_wait<STAGES - 2>();
		__syncthreads(); // slice kt landed for all; slice kt-1 is no longer read
		const int next = kt + STAGES - 1;
		if (next < k_tiles) {
			const int s = next % STAGES;
			load_tile(as + s * A_STAGE, bs + s * B_STAGE, A, B, m0, n0, next * BLOCK_K, N, K);
		}
		cp_async_commit();
		const int s = kt % STAGES;
		compute_tile(acc, as + s * A_STAGE, bs + s * B_STAGE, wm, wn, lane);
	}
	cp_async_wait<0>();
#endif

	// Accumulator layout of m16n8: c0,c1 at row lane/4, columns
	// 2*(lane%4)+{0,1}; c2,c3 eight rows below.
	const int row = m0 + wm + lane / 4, col = n0 + wn + (lane % 4) * 2;
#pragma unroll
	for (int i = 0; i < MMA_M; i++) {
#pragma unroll
		for (int j = 0; j < MMA_N; j++) {
			c_t *p = C + (size_t)(row + i * 16) * N + col + j * 8;
#if C_F32
			*reinterpret_cast<float2 *>(p) = make_float2(acc[i][j][0], acc[i][j][1]);
			*reinterpret_cast<float2 *>(p + 8 * (size_t)N) = make_float2(acc[i][j][2], acc[i][j][3]);
#else
			*reinterpret_cast<__half2 *>(p) = __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
			*reinterpret_cast<__half2 *>(p + 8 * (size_t)N) =
				__floats2half2_rn(acc[i][j][2], acc[i][j][3]);
#endif
		}
	}
}
