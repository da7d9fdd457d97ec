// Reference for layernorm.cu: one block of 256 threads per row; mean, then
// the variance around it, both in double; then the affine normalisation.
// Launch: grid rows, block 256.
extern "C" __global__ void layernorm_ref(const float *x, const float *w, const float *b, float *y, int rows,
					 int L, float eps)
{
	__shared__ double part[256];
	__shared__ double mean, rstd;
	(void)rows;
	const float *xr = x + (long)blockIdx.x * L;
	float *yr = y + (long)blockIdx.x * L;
	double s = 0.0;
	for (long i = threadIdx.x; i < L; i += 256)
		s += xr[i];
	part[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		double a = 0.0;
		for (int k = 0; k < 256; k++)
			a += part[k];
		mean = a / L;
	}
	__syncthreads();
	double q = 0.0;
	for (long i = threadIdx.x; i < L; i += 256)
		q += ((double)xr[i] - mean) * ((double)xr[i] - mean);
	__syncthreads();
	part[threadIdx.x] = q;
	__syncthreads();
	if (threadIdx.x == 0) {
		double a = 0.0;
		for (int k = 0; k < 256; k++)
			a += part[k];
		rstd = 1.0 / sqrt(a / L + (double)eps);
	}
	__syncthreads();
	for (long i = threadIdx.x; i < L; i += 256)
		yr[i] = (float)(((double)xr[i] - mean) * rstd * w[i] + b[i]);
}
