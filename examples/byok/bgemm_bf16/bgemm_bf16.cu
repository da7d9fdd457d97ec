// bgemm_bf16: batched small GEMM, C[b] = A[b] * B[b] for `batch` problems of
// 32 x 32 x 32, A and B bf16 (row-major), C f32, f32 accumulation (each
// bf16 product is exact in f32). A block takes BPB batches; per batch a
// 32 x (32 / TM) thread tile computes TM rows of C per thread. SMEM = 1:
// A[b] and B[b] are first staged in shared memory as float; SMEM = 0: read
// from global memory (L1) as bf16.
#include <cuda_bf16.h>

#ifndef TM
#define TM 2
#endif
#ifndef BPB
#define BPB 2
#endif
#ifndef SMEM
#define SMEM 1
#endif
#define DIM 32

extern "C" __global__ void __launch_bounds__(DIM * (DIM / TM) * BPB)
	bgemm(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
	      float *__restrict__ C, int batch)
{
	const int n = threadIdx.x, mt = threadIdx.y, bz = threadIdx.z;
	const int b = blockIdx.x * BPB + bz;
	const bool live = b < batch;
	const long long off = (long long)(live ? b : 0) * DIM * DIM;
	float acc[TM];
#pragma unroll
	for (int i = 0; i < TM; i++)
		acc[i] = 0.0f;
#if SMEM
	__shared__ float sA[BPB][DIM][DIM + 1];
	__shared__ float sB[BPB][DIM][DIM];
	const int tid = mt * DIM + n, nthr = DIM * (DIM / TM);
	for (int e = tid; e < DIM * DIM; e += nthr) {
		sA[bz][e / DIM][e % DIM] = __bfloat162float(A[off + e]);
		sB[bz][e / DIM][e % DIM] = __bfloat162float(B[off + e]);
	}
	__syncthreads();
#pragma unroll 8
	for (int k = 0; k < DIM; k++) {
		float bv = sB[bz][k][n];
#pragma unroll
		for (int i = 0; i < TM; i++)
			acc[i] = fmaf(sA[bz][mt * TM + i][k], bv, acc[i]);
	}
#else
#pragma unroll 8
	for (int k = 0; k < DIM; k++) {
		float bv = __bfloat162float(B[off + k * DIM + n]);
#pragma unroll
		for (int i = 0; i < TM; i++)
			acc[i] = fmaf(__bfloat162float(A[off + (mt * TM + i) * DIM + k]), bv, acc[i]);
	}
#endif
	if (live) {
#pragma unroll
		for (int i = 0; i < TM; i++)
			C[off + (mt * TM + i) * DIM + n] = acc[i];
	}
}

// The reference: one thread per element of C, double accumulation.
extern "C" __global__ void bgemm_ref(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C,
				     int batch)
{
	long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= (long long)batch * DIM * DIM)
		return;
	long long b = e / (DIM * DIM);
	int m = (int)(e % (DIM * DIM)) / DIM, n = (int)(e % DIM);
	const __nv_bfloat16 *a = A + b * DIM * DIM, *bb = B + b * DIM * DIM;
	double acc = 0.0;
	for (int k = 0; k < DIM; k++)
		acc += (double)__bfloat162float(a[m * DIM + k]) * (double)__bfloat162float(bb[k * DIM + n]);
	C[e] = (float)acc;
}
