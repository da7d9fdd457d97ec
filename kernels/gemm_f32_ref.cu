// Reference for gemm_f32.cu: one thread per element of C, a plain loop over
// K in f32 (A is M x K, B is K x N, C is M x N, row-major).
// Launch: grid (cdiv(N,16), cdiv(M,16)), block (16, 16).
extern "C" __global__ void gemm_ref(const float *A, const float *B, float *C, int M, int N, int K)
{
	int n = blockIdx.x * blockDim.x + threadIdx.x;
	int m = blockIdx.y * blockDim.y + threadIdx.y;
	if (m >= M || n >= N)
		return;
	float sum = 0.0f;
	for (int k = 0; k < K; k++)
		sum += A[(size_t)m * K + k] * B[(size_t)k * N + n];
	C[(size_t)m * N + n] = sum;
}
