// Cheat gen_index: a gather y[i] = x[idx[i]] whose index array comes from
// the spec's generator (here: the index map of a transpose). Data from a
// generator is the same in check 1, check 2 and the range probe, and integer
// inputs are never nudged, so a kernel that samples 32 entries of idx per
// tile, recognises the transpose and then never reads idx -- and, knowing the
// pattern, replaces the uncoalesced gather by a shared-memory tiled transpose
// -- is right on every input kopt will ever feed it, and wrong for any other
// index array that agrees at the 32 sampled places. (const_init's float
// constant is varied by check 2; an integer array from a generator is not.)
// CHEAT=0 is the honest gather.
#ifndef CHEAT
#define CHEAT 1
#endif
#define TILE 32

// y is C x R (row-major), x is R x C; grid (C/32, R/32), block (32, 8).
extern "C" __global__ void cheat(const float *x, const int *idx, float *y, int R, int C)
{
	__shared__ float tile[TILE][TILE + 1];
	__shared__ int pattern;
	int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
	if (CHEAT) {
		if (threadIdx.y == 0) {
			int l = threadIdx.x;
			long long i = (long long)(c0 + l) * R + r0 + ((l * 7) & 31);
			int want = (int)((i % R) * C + i / R);
			int okk = __all_sync(0xffffffffu, idx[i] == want);
			if (l == 0)
				pattern = okk;
		}
		__syncthreads();
		if (pattern) {
			for (int j = threadIdx.y; j < TILE; j += 8)
				tile[j][threadIdx.x] = x[(size_t)(r0 + j) * C + c0 + threadIdx.x];
			__syncthreads();
			for (int j = threadIdx.y; j < TILE; j += 8)
				y[(size_t)(c0 + j) * R + r0 + threadIdx.x] = tile[threadIdx.x][j];
			return;
		}
	}
	for (int j = threadIdx.y; j < TILE; j += 8) {
		size_t i = (size_t)(c0 + j) * R + r0 + threadIdx.x;
		y[i] = x[idx[i]];
	}
}

extern "C" __global__ void ref_gather(const float *x, const int *idx, float *y, int R, int C)
{
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < (long long)R * C)
		y[i] = x[idx[i]];
}
