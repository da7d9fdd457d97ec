// Reference for row_sum.cu: one thread per row, in double.
extern "C" __global__ void row_sum_ref(const float *x, float *y, int M, int N)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= M)
		return;
	double acc = 0.0;
	for (int c = 0; c < N; c++)
		acc += x[(size_t)row * N + c];
	y[row] = (float)acc;
}
