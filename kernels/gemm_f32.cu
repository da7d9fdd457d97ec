// C = A * B in f32 on the CUDA cores (no tensor cores), row-major: A is
// M x K, B is K x N, C is M x N. A classic shared-memory tiled GEMM with the
// knobs of the CLBlast/Kernel Tuner family, written to give a large, rugged
// search space (about 15,000 valid configurations) rather than the fastest
// GEMM: each block computes a BM x BN tile of C, marching over K in steps of
// BK; each of its (BM/TM) * (BN/TN) threads accumulates TM x TN outputs in
// registers. (kernels/suite/sgemm.cu is the suite's f32 GEMM, with five
// knobs and batched and transposed forms; this one is for its large space.)
//
// Knobs (see specs/gemm_f32.json for their values and constraints):
//   BM, BN, BK  block tile           TM, TN  outputs per thread
//   VW          width of the global loads (1, 2 or 4 floats)
//   SA_T        A's tile stored transposed in shared memory (As[k][m])
//   PAD         one float of padding per shared-memory row
//   STRIDED     a thread's outputs interleaved with its neighbours' (stride
//               BM/TM, BN/TN) instead of a contiguous TM x TN patch
//   DBUF        two shared-memory buffers: the next tile is loaded into
//               registers while the current one is multiplied
// M, N and K must be multiples of BM, BN and BK.

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
#ifndef VW
#define VW 4
#endif
#ifndef SA_T
#define SA_T 1
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef STRIDED
#define STRIDED 0
#endif
#ifndef DBUF
#define DBUF 0
#endif

#define THREADS_X (BN / TN)
#define THREADS_Y (BM / TM)
#define THREADS (THREADS_X * THREADS_Y)
#define A_LOADS (BM * BK / VW / THREADS)
#define B_LOADS (BK * BN / VW / THREADS)
#define BUFFERS (1 + DBUF)

#if SA_T
#define AS(buf, m, k) As[buf][k][m]
#define AS_DECL __shared__ float As[BUFFERS][BK][BM + PAD]
#else
#define AS(buf, m, k) As[buf][m][k]
#define AS_DECL __shared__ float As[BUFFERS][BM][BK + PAD]
#endif

struct vec_t {
	float v[VW];
};

__device__ __forceinline__ vec_t load_vec(const float *p)
{
	vec_t r;
#if VW == 4
	float4 t = *reinterpret_cast<const float4 *>(p);
	r.v[0] = t.x; r.v[1] = t.y; r.v[2] = t.z; r.v[3] = t.w;
#elif VW == 2
	float2 t = *reinterpret_cast<const float2 *>(p);
	r.v[0] = t.x; r.v[1] = t.y;
#else
	r.v[0] = *p;
#endif
	return r;
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int M, int N, int K)
{
	AS_DECL;
	__shared__ float Bs[BUFFERS][BK][BN + PAD];
	const int tid = threadIdx.x;
	const int tx = tid % THREADS_X, ty = tid / THREADS_X;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

	float acc[TM][TN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = 0.0f;

	vec_t ra[A_LOADS], rb[B_LOADS];
	// Global -> registers for the tile starting at k0: A's tile row by row
	// (vectors along k), B's tile row by row (vectors along n).
	auto fetch = [&](int k0) {
#pragma unroll
		for (int l = 0; l < A_LOADS; l++) {
			int idx = tid + l * THREADS;
			int row = idx / (BK / VW), col = idx % (BK / VW) * VW;
			ra[l] = load_vec(A + (size_t)(m0 + row) * K + k0 + col);
		}
#pragma unroll
		for (int l = 0; l < B_LOADS; l++) {
			int idx = tid + l * THREADS;
			int row = idx / (BN / VW), col = idx % (BN / VW) * VW;
			rb[l] = load_vec(B + (size_t)(k0 + row) * N + n0 + col);
		}
	};
	auto stash = [&](int buf) {
#pragma unroll
		for (int l = 0; l < A_LOADS; l++) {
			int idx = tid + l * THREADS;
			int row = idx / (BK / VW), col = idx % (BK / VW) * VW;
#pragma unroll
			for (int v = 0; v < VW; v++)
				AS(buf, row, col + v) = ra[l].v[v];
		}
#pragma unroll
		for (int l = 0; l < B_LOADS; l++) {
			int idx = tid + l * THREADS;
			int row = idx / (BN / VW), col = idx % (BN / VW) * VW;
#pragma unroll
			for (int v = 0; v < VW; v++)
				Bs[buf][row][col + v] = rb[l].v[v];
		}
	};
	auto multiply = [&](int buf) {
#pragma unroll
		for (int kk = 0; kk < BK; kk++) {
			float a[TM], b[TN];
#pragma unroll
			for (int i = 0; i < TM; i++)
				a[i] = AS(buf, STRIDED ? ty + i * THREADS_Y : ty * TM + i, kk);
#pragma unroll
			for (int j = 0; j < TN; j++)
				b[j] = Bs[buf][kk][STRIDED ? tx + j * THREADS_X : tx * TN + j];
#pragma unroll
			for (int i = 0; i < TM; i++)
#pragma unroll
				for (int j = 0; j < TN; j++)
					acc[i][j] += a[i] * b[j];
		}
	};

#if DBUF
	fetch(0);
	stash(0);
	__syncthreads();
	for (int k0 = 0; k0 < K; k0 += BK) {
		int cur = (k0 / BK) & 1;
		bool more = k0 + BK < K;
		if (more)
			fetch(k0 + BK);
		multiply(cur);
		if (more)
			stash(cur ^ 1);
		__syncthreads();
	}
#else
	for (int k0 = 0; k0 < K; k0 += BK) {
		fetch(k0);
		stash(0);
		__syncthreads();
		multiply(0);
		__syncthreads();
	}
#endif

#pragma unroll
	for (int i = 0; i < TM; i++) {
		int m = m0 + (STRIDED ? ty + i * THREADS_Y : ty * TM + i);
#pragma unroll
		for (int j = 0; j < TN; j++) {
			int n = n0 + (STRIDED ? tx + j * THREADS_X : tx * TN + j);
			C[(size_t)m * N + n] = acc[i][j];
		}
	}
}
