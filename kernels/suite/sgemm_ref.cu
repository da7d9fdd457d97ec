// Reference for sgemm.cu: one thread per element of C, a plain dot product
// in double. TRANS_B=1 takes B as (N, K). Launch: grid (cdiv(N, 16),
// cdiv(M, 16), batch), block (16, 16).
#ifndef TRANS_B
#define TRANS_B 0
#endif

extern "C" __global__ void sgemm_ref(const float *A, const float *B, float *C, int M, int N, int K)
{
	const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
	const long z = blockIdx.z;
	if (m >= M || n >= N)
		return;
	A += z * M * K;
	B += z * K * N;
	double s = 0.0;
	for (int k = 0; k < K; k++)
#if TRANS_B
		s += (double)A[(long)m * K + k] * B[(long)n * K + k];
#else
		s += (double)A[(long)m * K + k] * B[(long)k * N + n];
#endif
	C[z * M * N + (long)m * N + n] = (float)s;
}
