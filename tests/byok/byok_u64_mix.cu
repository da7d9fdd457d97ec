// 16-bit inputs, a 64-bit unsigned output and 64- and 16-bit scalars:
// y[i] = mix(a[i] * 65599 + b[i] + seed) >> shift, with a i16 (signed, so
// the cast to 64 bits sign-extends), b u16, seed u64 and shift i16. The
// output is compared exactly; its values use all 64 bits, so a kernel whose
// result differs only in the low bits of a value above 2^53 must still fail.
// Knobs: threads per block and elements per thread.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

__device__ __forceinline__ unsigned long long mix(unsigned long long z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

__device__ __forceinline__ unsigned long long element(const short *a, const unsigned short *b,
						      unsigned long long seed, short shift, int i)
{
	long long ai = a[i];
	return mix((unsigned long long)(ai * 65599) + b[i] + seed) >> shift;
}

extern "C" __global__ void mix64(const short *a, const unsigned short *b, unsigned long long *y,
				 unsigned long long seed, short shift, int n)
{
	int base = (blockIdx.x * BLOCK + threadIdx.x) * ITEMS;
#pragma unroll
	for (int k = 0; k < ITEMS; k++)
		if (base + k < n)
			y[base + k] = element(a, b, seed, shift, base + k);
}

extern "C" __global__ void mix64_ref(const short *a, const unsigned short *b, unsigned long long *y,
				     unsigned long long seed, short shift, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = element(a, b, seed, shift, i);
}
