// CSR sparse matrix times vector, Kernel Tuner style: threads_per_row
// threads share a row and reduce with shuffles. The matrix structure comes
// from .npy files (make_csr.py), its values from the spec's generator.
extern "C" __global__ void spmv(float *y, const int *row_ptr, const int *col_idx, const float *vals,
				const float *x, int rows)
{
	int t = blockIdx.x * block_size_x + threadIdx.x;
	int row = t / threads_per_row, lane = t % threads_per_row;
	float sum = 0.0f;
	if (row < rows)
		for (int k = row_ptr[row] + lane; k < row_ptr[row + 1]; k += threads_per_row)
			sum += vals[k] * x[col_idx[k]];
	for (int o = threads_per_row / 2; o > 0; o /= 2)
		sum += __shfl_down_sync(0xffffffffu, sum, o, threads_per_row);
	if (row < rows && lane == 0)
		y[row] = sum;
}
