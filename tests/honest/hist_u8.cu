// hist_u8: the 256-bin histogram of an 8-bit grey frame (1920 x 1088),
// with integer atomics: exact u32 output. The frame comes from a generator
// (hist_u8_gen.lua: a shaded scene, saturated patches that make one hot
// bin, noise from the seeded rng), so check 2 reads another frame. The
// output starts at zero before every launch (copy: from a zero input that
// is no kernel parameter) and every block adds into it.
// PRIV 0: every pixel an atomicAdd on the global histogram (contention on
// the hot bin); PRIV 1: a block-private histogram in shared memory, merged
// with one global atomicAdd per non-empty bin. Pixels are read four at a
// time as 32-bit words (a byte tail for n % 4). Grid-stride loop.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef PRIV
#define PRIV 1
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
	hist256(const unsigned char *__restrict__ img, unsigned *hist, int n)
{
#if PRIV
	__shared__ unsigned sh[256];
	for (int b = threadIdx.x; b < 256; b += BLOCK)
		sh[b] = 0u;
	__syncthreads();
	unsigned *h = sh;
#else
	unsigned *h = hist;
#endif
	const int nw = n / 4;
	const unsigned *w = reinterpret_cast<const unsigned *>(img);
	const int stride = gridDim.x * BLOCK;
	for (int k = blockIdx.x * BLOCK + threadIdx.x; k < nw; k += stride) {
		const unsigned v = w[k];
		atomicAdd(&h[v & 255u], 1u);
		atomicAdd(&h[(v >> 8) & 255u], 1u);
		atomicAdd(&h[(v >> 16) & 255u], 1u);
		atomicAdd(&h[v >> 24], 1u);
	}
	for (int i = 4 * nw + blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride)
		atomicAdd(&h[img[i]], 1u);
#if PRIV
	__syncthreads();
	for (int b = threadIdx.x; b < 256; b += BLOCK)
		if (sh[b] != 0u)
			atomicAdd(&hist[b], sh[b]);
#endif
}

// Reference: one block per bin; its threads count the pixels equal to it
// and add their counts in shared memory.
extern "C" __global__ void hist_ref(const unsigned char *img, unsigned *hist, int n)
{
	__shared__ unsigned part[256];
	const unsigned bin = blockIdx.x;
	unsigned c = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		c += img[i] == bin;
	part[threadIdx.x] = c;
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned t = 0;
		for (int k = 0; k < (int)blockDim.x; k++)
			t += part[k];
		hist[bin] = t;
	}
}
