// Reference for matmul_f16_sm90.cu: C = A * B^T with A M x K and B N x K,
// both row-major; one thread per element of C, a plain loop over K in f32.
// Launch: grid (cdiv(N,16), cdiv(M,16)), block (16, 16).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef AB_BF16
#define AB_BF16 0
#endif
#ifndef C_F32
#define C_F32 0
#endif

#if AB_BF16
typedef __nv_bfloat16 elem_t;
#define TO_F32 __bfloat162float
#else
typedef __half elem_t;
#define TO_F32 __half2float
#endif

extern "C" __global__ void matmul_nt_ref(const elem_t *A, const elem_t *B,
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
	const elem_t *a = A + (size_t)m * K, *b = B + (size_t)n * K;
	float sum = 0.0f;
	for (int k = 0; k < K; k++)
		sum += TO_F32(a[k]) * TO_F32(b[k]);
#if C_F32
	C[(size_t)m * N + n] = sum;
#else
	C[(size_t)m * N + n] = __float2half(sum);
#endif
}
