// The obviously correct y = a * x + y, one thread per element.
extern "C" __global__ void axpy_ref(float *y, const float *x, float a, int n)
{
	int k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k < n)
		y[k] = a * x[k] + y[k];
}
