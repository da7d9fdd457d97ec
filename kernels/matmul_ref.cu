// Reference for matmul_f16.cu: one thread per element of C, a plain loop
// over K in f32. A is M x K, B is K x N, C is M x N, row-major.
// Launch: grid (cdiv(N,16), cdiv(M,16)), block (16, 16).
#include <cuda_fp16.h>

#ifndef C_F32
#define C_F32 0
#endif

extern "C" __global__ void matmul_ref(const __half *A, const __half *B,
#if C_F32
				      float *C,
#else
				      __half *C,
#endif
				      int M, int N, int K)
{
	int n = blockIdx.x * blockDim.x + threadIdx.x;
	int m = blockIdx.y * blockDim.y + threadIdx.y;
	if (m >= M || n >= N)
		return;
	float sum = 0.0f;
	for (int k = 0; k < K; k++)
		sum += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
#if C_F32
	C[(size_t)m * N + n] = sum;
#else
	C[(size_t)m * N + n] = __float2half(sum);
#endif
}
