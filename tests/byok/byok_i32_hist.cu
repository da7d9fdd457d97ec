// byok_i32_hist: an exact i32 histogram of 1048583 i32 keys into nbins (1000)
// bins, bin = (key * 2654435761) mod nbins (as unsigned). Each block owns
// BINS_PER_BLOCK consecutive bins (the last block fewer), counts the keys
// that fall into them with shared-memory atomics, and writes every bin it
// owns, zeros included, so no output element relies on initial contents.
// PRIV (string knob, token block or warp): one shared count per bin, or one
// per warp and bin added up at the end.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef BINS_PER_BLOCK
#define BINS_PER_BLOCK 32
#endif
#ifndef PRIV
#define PRIV block
#endif

constexpr int block = 0, warp = 1; // the values PRIV can take
constexpr int COPIES = PRIV == warp ? BLOCK / 32 : 1;

__device__ __forceinline__ unsigned bin_of(int key, int nbins)
{
	return ((unsigned)key * 2654435761u) % (unsigned)nbins;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	hist_owned(const int *__restrict__ keys, int *__restrict__ hist, int n, int nbins)
{
	__shared__ int counts[COPIES][BINS_PER_BLOCK];
	const int t = threadIdx.x;
	const unsigned lo = blockIdx.x * BINS_PER_BLOCK;
	for (int k = t; k < COPIES * BINS_PER_BLOCK; k += BLOCK)
		counts[k / BINS_PER_BLOCK][k % BINS_PER_BLOCK] = 0;
	__syncthreads();
	int *mine = counts[PRIV == warp ? t / 32 : 0];
	for (int i = t; i < n; i += BLOCK) {
		unsigned b = bin_of(keys[i], nbins) - lo;
		if (b < BINS_PER_BLOCK)
			atomicAdd(&mine[b], 1);
	}
	__syncthreads();
	for (int j = t; j < BINS_PER_BLOCK; j += BLOCK) {
		if (lo + j >= (unsigned)nbins)
			break;
		int s = 0;
		for (int c = 0; c < COPIES; c++)
			s += counts[c][j];
		hist[lo + j] = s;
	}
}

// Reference: one thread per bin, counting every key.
extern "C" __global__ void hist_ref(const int *keys, int *hist, int n, int nbins)
{
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= nbins)
		return;
	int s = 0;
	for (int i = 0; i < n; i++)
		s += bin_of(keys[i], nbins) == (unsigned)b;
	hist[b] = s;
}
