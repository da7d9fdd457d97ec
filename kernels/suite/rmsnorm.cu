// RMSNorm over the feature dimension of a (B, F, P) f32 tensor (P = H * W
// pixels), KernelBench's x / sqrt(mean(x^2, dim=1, keepdim) + eps):
//   y[b][f][p] = x[b][f][p] / sqrt(mean_f x[b][f][p]^2 + eps)
//
// Each thread owns VEC consecutive pixels of one b and walks the F features
// twice (the squares, then the write; the second walk finds the block's
// rows in L1 or L2), or with CACHE=1 once, keeping its FEATURES x VEC values
// in registers (FEATURES, the compile-time F, from the spec's options).
// Consecutive threads take consecutive pixels, so every load of a warp is
// contiguous. Requires P % VEC == 0.
// Launch: grid (cdiv(P, BLOCK_SIZE * VEC), B), block BLOCK_SIZE.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef CACHE
#define CACHE 0
#endif
#if CACHE && !defined(FEATURES)
#error "CACHE=1 needs FEATURES (the feature count) as a define"
#endif

static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");

struct __align__(sizeof(float) * VEC) vec_t {
	float v[VEC];
};

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	rmsnorm(const float *__restrict__ x, float *__restrict__ y, int B, int F, int P, float eps)
{
	(void)B;
	const long p0 = ((long)blockIdx.x * BLOCK_SIZE + threadIdx.x) * VEC;
	if (p0 >= P)
		return;
	const long base = (long)blockIdx.y * F * P + p0;
	float acc[VEC];
#pragma unroll
	for (int k = 0; k < VEC; k++)
		acc[k] = 0.0f;
#if CACHE
	(void)F;
	vec_t v[FEATURES];
#pragma unroll
	for (int f = 0; f < FEATURES; f++) {
		v[f] = *reinterpret_cast<const vec_t *>(x + base + (long)f * P);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			acc[k] += v[f].v[k] * v[f].v[k];
	}
#pragma unroll
	for (int k = 0; k < VEC; k++)
		acc[k] = rsqrtf(acc[k] / (float)FEATURES + eps);
#pragma unroll
	for (int f = 0; f < FEATURES; f++) {
#pragma unroll
		for (int k = 0; k < VEC; k++)
			v[f].v[k] *= acc[k];
		*reinterpret_cast<vec_t *>(y + base + (long)f * P) = v[f];
	}
#else
#pragma unroll UNROLL
	for (int f = 0; f < F; f++) {
		vec_t v = *reinterpret_cast<const vec_t *>(x + base + (long)f * P);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			acc[k] += v.v[k] * v.v[k];
	}
#pragma unroll
	for (int k = 0; k < VEC; k++)
		acc[k] = rsqrtf(acc[k] / (float)F + eps);
#pragma unroll UNROLL
	for (int f = 0; f < F; f++) {
		vec_t v = *reinterpret_cast<const vec_t *>(x + base + (long)f * P);
#pragma unroll
		for (int k = 0; k < VEC; k++)
			v.v[k] *= acc[k];
		*reinterpret_cast<vec_t *>(y + base + (long)f * P) = v;
	}
#endif
}
