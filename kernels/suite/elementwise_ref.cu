// Reference for elementwise.cu: one thread per element, the formula in double.
// Same OP_* defines and entries (elementwise_ref: x, y, n; elementwise2_ref:
// x, b, y, n, cols). Launch: grid cdiv(n, 256), block 256.
#define SQRT_2_OVER_PI 0.7978845608028654

__device__ double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))); }

__device__ double op(double v, double other)
{
#if defined(OP_RELU)
	return v > 0.0 ? v : 0.0;
#elif defined(OP_GELU_TANH)
	return gelu_tanh(v);
#elif defined(OP_GELU_ERF)
	return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
#elif defined(OP_SILU)
	return v / (1.0 + exp(-v));
#elif defined(OP_BIAS_GELU)
	return gelu_tanh(v + other);
#elif defined(OP_SWIGLU)
	return v / (1.0 + exp(-v)) * other;
#else
#error "define one OP_*"
#endif
}

extern "C" __global__ void elementwise_ref(const float *x, float *y, int n)
{
	long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = (float)op(x[i], 0.0);
}

extern "C" __global__ void elementwise2_ref(const float *x, const float *b, float *y, int n, int cols)
{
	long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
#if defined(OP_BIAS_GELU)
	y[i] = (float)op(x[i], b[i % cols]);
#else
	(void)cols;
	y[i] = (float)op(x[i], b[i]);
#endif
}
