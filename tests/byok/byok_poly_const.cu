// byok_poly_const: y[i] = p(x[i]) for a degree-15 polynomial whose 16
// coefficients (coef[0] + coef[1] x + ... ) sit in __constant__ memory, filled
// by kopt from the spec's "constant" argument. The kernel is a template
// instantiated by the spec's entry "poly_eval<BLOCK, ITEMS>"; METHOD (string
// knob, token horner or estrin) picks the evaluation scheme (same polynomial,
// rounding differs at the 1e-7 level). x is uniform in [-1, 1].
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef METHOD
#define METHOD horner
#endif

constexpr int horner = 0, estrin = 1; // the values METHOD can take

__constant__ float coef[16];

__device__ __forceinline__ float eval_horner(float x)
{
	float p = coef[15];
#pragma unroll
	for (int k = 14; k >= 0; k--)
		p = fmaf(p, x, coef[k]);
	return p;
}

__device__ __forceinline__ float eval_estrin(float x)
{
	float q[8];
#pragma unroll
	for (int k = 0; k < 8; k++)
		q[k] = fmaf(coef[2 * k + 1], x, coef[2 * k]);
	const float x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
	float r[4];
#pragma unroll
	for (int k = 0; k < 4; k++)
		r[k] = fmaf(q[2 * k + 1], x2, q[2 * k]);
	const float s0 = fmaf(r[1], x4, r[0]), s1 = fmaf(r[3], x4, r[2]);
	return fmaf(s1, x8, s0);
}

template <int NT, int NI>
__global__ void __launch_bounds__(NT) poly_eval(const float *__restrict__ x, float *__restrict__ y, int n)
{
	const long long base = (long long)blockIdx.x * NT * NI + threadIdx.x;
#pragma unroll
	for (int k = 0; k < NI; k++) {
		const long long i = base + (long long)k * NT;
		if (i < n)
			y[i] = METHOD == estrin ? eval_estrin(x[i]) : eval_horner(x[i]);
	}
}

// Reference: one thread per element, Horner's rule.
extern "C" __global__ void poly_ref(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = eval_horner(x[i]);
}
