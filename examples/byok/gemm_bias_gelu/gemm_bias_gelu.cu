// gemm_bias_gelu: Y = gelu(X W^T + b), the fused epilogue of a linear layer.
// X is M x K, W is N x K (row-major, a linear layer's weight), b has N
// elements, all f16; Y is M x N f16; products accumulated in f32; gelu the
// exact (erf) form, in f32, rounded to f16 once. Shared-memory tiles BM x
// 16 of X and BN x 16 of W (stored k-major), each thread computes TM x 4
// outputs. VSTORE = 1 stores pairs of outputs as __half2.
#include <cuda_fp16.h>

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef TM
#define TM 4
#endif
#ifndef VSTORE
#define VSTORE 1
#endif
#define BK 16
#define TN 4
#define THREADS ((BM / TM) * (BN / TN))

__device__ __forceinline__ float gelu(float v)
{
	return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

extern "C" __global__ void __launch_bounds__(THREADS)
	linear_gelu(const __half *__restrict__ X, const __half *__restrict__ W,
		    const __half *__restrict__ bias, __half *__restrict__ Y, int M, int N, int K)
{
	__shared__ float sX[BK][BM + 1];
	__shared__ float sW[BK][BN + 1];
	const int tid = threadIdx.x;
	const int tr = tid / (BN / TN), tc = tid % (BN / TN);
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	float acc[TM][TN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = 0.0f;
	for (int k0 = 0; k0 < K; k0 += BK) {
		for (int e = tid; e < BM * BK; e += THREADS) {
			int r = e / BK, c = e % BK;
			sX[c][r] = __half2float(X[(long long)(m0 + r) * K + k0 + c]);
		}
		for (int e = tid; e < BN * BK; e += THREADS) {
			int r = e / BK, c = e % BK;
			sW[c][r] = __half2float(W[(long long)(n0 + r) * K + k0 + c]);
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < BK; k++) {
			float a[TM], w[TN];
#pragma unroll
			for (int i = 0; i < TM; i++)
				a[i] = sX[k][tr * TM + i];
#pragma unroll
			for (int j = 0; j < TN; j++)
				w[j] = sW[k][tc * TN + j];
#pragma unroll
			for (int i = 0; i < TM; i++)
#pragma unroll
				for (int j = 0; j < TN; j++)
					acc[i][j] = fmaf(a[i], w[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < TM; i++) {
		const int m = m0 + tr * TM + i;
		__half *y = Y + (long long)m * N + n0 + tc * TN;
#if VSTORE
#pragma unroll
		for (int j = 0; j < TN; j += 2) {
			float v0 = gelu(acc[i][j] + __half2float(bias[n0 + tc * TN + j]));
			float v1 = gelu(acc[i][j + 1] + __half2float(bias[n0 + tc * TN + j + 1]));
			*reinterpret_cast<__half2 *>(y + j) = __floats2half2_rn(v0, v1);
		}
#else
#pragma unroll
		for (int j = 0; j < TN; j++)
			y[j] = __float2half_rn(gelu(acc[i][j] + __half2float(bias[n0 + tc * TN + j])));
#endif
	}
}

// The reference: one thread per output, double accumulation, gelu in double.
extern "C" __global__ void linear_gelu_ref(const __half *X, const __half *W, const __half *bias,
					   __half *Y, int M, int N, int K)
{
	int n = blockIdx.x * blockDim.x + threadIdx.x;
	int m = blockIdx.y * blockDim.y + threadIdx.y;
	if (m >= M || n >= N)
		return;
	double acc = 0.0;
	for (int k = 0; k < K; k++)
		acc += (double)__half2float(X[(long long)m * K + k]) *
		       (double)__half2float(W[(long long)n * K + k]);
	double v = acc + (double)__half2float(bias[n]);
	Y[(long long)m * N + n] = __float2half_rn((float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752))));
}
