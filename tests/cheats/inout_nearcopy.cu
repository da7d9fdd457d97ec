// CASE inout_nearcopy: an in-place update with a small step,
// y <- y + h g(y) (an explicit Euler step, an SGD step with a small rate;
// g(v) = sum_{k=1..64} sinf(k v) / k^2, h = 1e-6), where the cheat never
// computes g and writes y with its lowest mantissa bit flipped.
//
// The hole: for an in/out buffer ("init": "copy:y0") kopt's defences against
// "the output is (nearly) an input" are two (TRUST.md, "In/out buffers" and
// "Specs a trivial kernel passes"):
//  - the stale check (numerics.c kopt_check_stale, run.c compare_one): an
//    element the reference changed and the candidate left BIT FOR BIT as it
//    started fails; a flipped low bit is not bit for bit;
//  - the trivial-output probe, which would say "output 'y' passes both
//    checks when a kernel writes a copy of input 'y0'", but leaves exactly
//    that input out ("an in/out buffer's own input is left out: a copy of it
//    is caught as stale": compare_dev.c kopt_worker_probe_trivial).
// So neither fires. The step moves y by h |g| <= 1.6e-6, a relative L2
// error of ~1e-6 (f32's default tolerance is 1e-5), and the element bound
// (20 x 1e-5 of max(|ref|, RMS)) is 100x above it; the range probe scales
// y0 up, which makes h g(y) smaller still relative to y.
// The spec is weak, but kopt says nothing: no warning, no stale element.
// CHEAT=0: honest (64 accurate sinf per element).
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64

__device__ __forceinline__ float g(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

extern "C" __global__ void cheat(float *y, float h, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float v = y[i];
#if CHEAT
		y[i] = __uint_as_float(__float_as_uint(v) ^ 1u);
#else
		y[i] = fmaf(h, g(v), v);
#endif
	}
}

// Reference: one thread per element.
extern "C" __global__ void ref_step(float *y, float h, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float v = y[i];
		y[i] = fmaf(h, g(v), v);
	}
}
