// Reference for gemv.cu: one thread per row, the dot product in double.
// Launch: grid cdiv(M, 128), block 128.
extern "C" __global__ void gemv_ref(const float *A, const float *x, float *y, int M, int K)
{
	int m = blockIdx.x * blockDim.x + threadIdx.x;
	if (m >= M)
		return;
	double s = 0.0;
	for (int k = 0; k < K; k++)
		s += (double)A[(long)m * K + k] * x[k];
	y[m] = (float)s;
}
