// spmv_gen: y = A x for a CSR matrix (f32 values, i32 row pointers and
// column indices). TPR threads per row (a sub-warp), each summing a strided
// part of the row, then a shuffle reduction within the sub-warp.
#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef TPR
#define TPR 4
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
	spmv_csr(float *__restrict__ y, const int *__restrict__ row_ptr,
		 const int *__restrict__ col_idx, const float *__restrict__ vals,
		 const float *__restrict__ x, int rows)
{
	long long gid = (long long)blockIdx.x * BLOCK + threadIdx.x;
	int row = (int)(gid / TPR);
	int sub = threadIdx.x % TPR;
	float acc = 0.0f;
	if (row < rows) {
		int lo = row_ptr[row], hi = row_ptr[row + 1];
		for (int j = lo + sub; j < hi; j += TPR)
			acc = fmaf(vals[j], __ldg(&x[col_idx[j]]), acc);
	}
#pragma unroll
	for (int o = TPR / 2; o > 0; o >>= 1)
		acc += __shfl_down_sync(0xffffffffu, acc, o, TPR);
	if (row < rows && sub == 0)
		y[row] = acc;
}

// The reference: one thread per row, double accumulation.
extern "C" __global__ void spmv_ref(float *y, const int *row_ptr, const int *col_idx,
				    const float *vals, const float *x, int rows)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= rows)
		return;
	double acc = 0.0;
	for (int j = row_ptr[row]; j < row_ptr[row + 1]; j++)
		acc += (double)vals[j] * (double)x[col_idx[j]];
	y[row] = (float)acc;
}
