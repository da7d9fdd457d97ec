// The obviously correct CSR product: one thread per row, in order.
extern "C" __global__ void spmv_ref(float *y, const int *row_ptr, const int *col_idx,
				    const float *vals, const float *x, int rows)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= rows)
		return;
	float sum = 0.0f;
	for (int k = row_ptr[row]; k < row_ptr[row + 1]; k++)
		sum += vals[k] * x[col_idx[k]];
	y[row] = sum;
}
