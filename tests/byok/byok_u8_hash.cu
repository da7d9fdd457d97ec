// byok_u8_hash (extra): a u8 output holding every byte value. out[i] is the
// top byte of x[i] * 2654435761 (x u32 arange, so the bytes look random).
// VEC 4 writes a uchar4 per thread, with a scalar tail (n is odd).
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif

__device__ __forceinline__ unsigned char hash8(unsigned v) { return (unsigned char)((v * 2654435761u) >> 24); }

extern "C" __global__ void __launch_bounds__(BLOCK)
	hash_u8(const unsigned *__restrict__ x, unsigned char *__restrict__ out, int n)
{
	const long long p = (long long)blockIdx.x * BLOCK + threadIdx.x;
	const long long i0 = p * VEC;
	if (VEC == 4 && i0 + 4 <= n) {
		uchar4 o = make_uchar4(hash8(x[i0]), hash8(x[i0 + 1]), hash8(x[i0 + 2]), hash8(x[i0 + 3]));
		reinterpret_cast<uchar4 *>(out)[p] = o;
		return;
	}
	for (long long i = i0; i < n && i < i0 + VEC; i++)
		out[i] = hash8(x[i]);
}

extern "C" __global__ void hash_u8_ref(const unsigned *x, unsigned char *out, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		out[i] = hash8(x[i]);
}
