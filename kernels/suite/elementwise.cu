// Elementwise ops with PyTorch semantics, f32, selected by a define:
//   OP_RELU       y = max(x, 0)                                 torch.relu
//   OP_GELU_TANH  y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   MinGPT NewGELU
//   OP_GELU_ERF   y = 0.5 x (1 + erf(x / sqrt(2)))              F.gelu
//   OP_SILU       y = x sigmoid(x)                              F.silu (Swish)
//   OP_BIAS_GELU  y = gelu_tanh(x + b[col]), b of length cols   fused bias + GELU
//   OP_SWIGLU     y = silu(x) * g                               fused gated SiLU
//
// Each thread handles ITEMS vectors of VEC consecutive elements; the vectors
// of one thread are BLOCK_SIZE vectors apart, so every load instruction of a
// warp is contiguous. Requires n % VEC == 0 (and cols % VEC == 0 for the bias).
// Entries: elementwise (x, y, n) for the unary ops, elementwise2 (x, b, y, n,
// cols) for the two with a second input.
// Launch: grid cdiv(n, BLOCK_SIZE * VEC * ITEMS), block BLOCK_SIZE.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");

struct __align__(sizeof(float) * VEC) vec_t {
	float v[VEC];
};

__device__ __forceinline__ float gelu_tanh(float x)
{
	const float k = 0.7978845608028654f; /* sqrt(2/pi) */
	return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float op(float x, float other)
{
#if defined(OP_RELU)
	return fmaxf(x, 0.0f);
#elif defined(OP_GELU_TANH)
	return gelu_tanh(x);
#elif defined(OP_GELU_ERF)
	return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
#elif defined(OP_SILU)
	return x / (1.0f + expf(-x));
#elif defined(OP_BIAS_GELU)
	return gelu_tanh(x + other);
#elif defined(OP_SWIGLU)
	return x / (1.0f + expf(-x)) * other;
#else
#error "define one OP_*"
#endif
}

// ITEMS vectors per thread, BLOCK_SIZE vectors apart; g(i) gives the
// second operand's vector for vector i (nothing for a unary op).
template <typename G>
__device__ __forceinline__ void apply(const float *__restrict__ x, float *__restrict__ y, int n, G g)
{
	const long nvec = n / VEC;
	const long first = (long)blockIdx.x * BLOCK_SIZE * ITEMS + threadIdx.x;
	const vec_t *xv = reinterpret_cast<const vec_t *>(x);
	vec_t *yv = reinterpret_cast<vec_t *>(y);
#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		const long i = first + (long)it * BLOCK_SIZE;
		if (i >= nvec)
			break;
		vec_t v = xv[i], w = g(i), o;
#pragma unroll
		for (int k = 0; k < VEC; k++)
			o.v[k] = op(v.v[k], w.v[k]);
		yv[i] = o;
	}
}

// Unary ops: y = op(x).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	elementwise(const float *__restrict__ x, float *__restrict__ y, int n)
{
	apply(x, y, n, [](long) { return vec_t{}; });
}

// Binary ops: b is the bias (OP_BIAS_GELU, length cols, broadcast over rows)
// or the gate (OP_SWIGLU, length n).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	elementwise2(const float *__restrict__ x, const float *__restrict__ b, float *__restrict__ y, int n, int cols)
{
	const vec_t *bv = reinterpret_cast<const vec_t *>(b);
#if defined(OP_BIAS_GELU)
	apply(x, y, n, [=](long i) { return bv[(i % (cols / VEC))]; });
#else
	(void)cols;
	apply(x, y, n, [=](long i) { return bv[i]; });
#endif
}
