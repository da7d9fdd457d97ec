// Reference of the sin-sum vehicle: one thread per element, the same op()
// as the honest kernel (bit-identical results). Written out here rather than
// taken from sinsum_prelude.cuh: the reference shares no code with the
// kernels it judges.
#define K_TERMS 64

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
