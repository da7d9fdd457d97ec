// QA CASE intdiv_f32: integer division and remainder done through f32
// (q = (int)((float)n / (float)d), r = n - q d) instead of the i32 / and %.
// y[i] = sum_{k=1..64} ( (a[i] k) / (|b[i]| + k) + (a[i] k) % (|b[i]| + k) ).
//
// Assumes: |n| < 2^24 (below it an IEEE f32 quotient of two integers never
// rounds across an integer, so the truncation is exact).
// Why kopt would not catch it: kopt's integer inputs are at most ~100 in
// magnitude ("normal": 16 N(0,1); "uniform": [-64, 64]), so |a k| <= ~6000;
// the i32 output is compared exactly and matches. The range probe and the
// nudge leave integer inputs alone; check 2 only swaps the two small draws.
// Gain: the i32 divide/modulo sequence (~20 instructions each, a
// reciprocal plus fix-ups) becomes one f32 division and an IMAD.
// What exposes it: |a k| >= 2^24, e.g. a = 1000000, b = 1: at k = 32,
// 32000000 / 33 is 969696.97, which f32 rounds to 969697 (want 969696).
// CHEAT=0: the honest integer / and %.
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64

__device__ __forceinline__ int op(int a, int b)
{
	int s = 0;
	int bb = b < 0 ? -b : b;
#pragma unroll 8
	for (int k = 1; k <= K_TERMS; k++) {
		int n = a * k, d = bb + k;
#if CHEAT
		int q = (int)__fdiv_rn((float)n, (float)d);
		s += q + (n - q * d);
#else
		s += n / d + n % d;
#endif
	}
	return s;
}

extern "C" __global__ void cheat(int *y, const int *a, const int *b, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = op(a[i], b[i]);
}

// Reference: plain integer arithmetic, one thread per element.
extern "C" __global__ void ref_intdiv(int *y, const int *a, const int *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	int s = 0, bb = b[i] < 0 ? -b[i] : b[i];
	for (int k = 1; k <= K_TERMS; k++) {
		int nn = a[i] * k, d = bb + k;
		s += nn / d + nn % d;
	}
	y[i] = s;
}
