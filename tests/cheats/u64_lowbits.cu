// CASE u64_lowbits: a 64-bit integer output computed through a double. The
// values use all 64 bits, so the double keeps only the top 53: every element
// above 2^53 is off by a few units in its low bits, which a comparison made in
// doubles cannot see (both values round to the same double). kopt compares
// 64-bit integers exactly (numerics.c, apart()). CHEAT=0 is honest.
#ifndef CHEAT
#define CHEAT 1
#endif

__device__ __forceinline__ unsigned long long mix(unsigned long long z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

extern "C" __global__ void cheat(const unsigned *x, unsigned long long *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		unsigned long long v = mix(x[i]);
		y[i] = CHEAT ? (unsigned long long)(double)v : v;
	}
}

extern "C" __global__ void ref_mix(const unsigned *x, unsigned long long *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = mix(x[i]);
}
