// Reference of heap_hidden: y[i] = sum_{k=1..512} sinf(k x[i]) / k^2, one
// thread per element, the same sum in the same order.
#define K_TERMS 512
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float acc = 0.0f, v = x[i];
		for (int k = 1; k <= K_TERMS; k++)
			acc += sinf((float)k * v) / (float)(k * k);
		y[i] = acc;
	}
}
