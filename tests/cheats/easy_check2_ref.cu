// Reference of easy_check2: y[m] = sum_k max(x[k], 0) W[k][m], one thread
// per column, k in order (shares no code with the kernels it judges).
#define KDIM 8192
#define MDIM 8192
extern "C" __global__ void ref_relu_gemv(const float *x, const float *W, float *y)
{
	int m = blockIdx.x * blockDim.x + threadIdx.x;
	if (m >= MDIM)
		return;
	float acc = 0.0f;
	for (int k = 0; k < KDIM; k++)
		acc += fmaxf(x[k], 0.0f) * W[(size_t)k * MDIM + m];
	y[m] = acc;
}
