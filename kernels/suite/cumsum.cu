// Inclusive prefix sum along the last dimension of a (rows, cols) f32
// matrix, torch.cumsum(x, dim=1).
//
// One block per row walks it in tiles of BLOCK_SIZE * ITEMS elements: a tile
// is loaded into shared memory with contiguous reads, each thread scans
// ITEMS consecutive elements in registers, the threads' totals are scanned
// through warp shuffles and one more warp, the running total of earlier
// tiles is added, and the tile is written back with contiguous stores.
// Launch: grid rows, block BLOCK_SIZE.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef ITEMS
#define ITEMS 4
#endif

#define TILE (BLOCK_SIZE * ITEMS)
#define WARPS (BLOCK_SIZE / 32)
// one padding word every 32, so ITEMS consecutive words per thread do not
// fall in one bank
#define PAD(i) ((i) + (i) / 32)
static_assert(BLOCK_SIZE % 32 == 0 && WARPS <= 32, "whole warps, at most 32");

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	cumsum(const float *__restrict__ x, float *__restrict__ y, int rows, int cols)
{
	__shared__ float tile[PAD(TILE) + 1];
	__shared__ float warp_tot[WARPS];
	(void)rows;
	const float *xr = x + (long)blockIdx.x * cols;
	float *yr = y + (long)blockIdx.x * cols;
	const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
	float carry = 0.0f;
	for (int t0 = 0; t0 < cols; t0 += TILE) {
		for (int i = tid; i < TILE; i += BLOCK_SIZE)
			tile[PAD(i)] = t0 + i < cols ? xr[t0 + i] : 0.0f;
		__syncthreads();
		float v[ITEMS], tot = 0.0f;
#pragma unroll
		for (int j = 0; j < ITEMS; j++) {
			tot += tile[PAD(tid * ITEMS + j)];
			v[j] = tot;
		}
		float inc = tot;
#pragma unroll
		for (int off = 1; off < 32; off *= 2) {
			float o = __shfl_up_sync(0xffffffffu, inc, off);
			if (lane >= off)
				inc += o;
		}
		if (lane == 31)
			warp_tot[warp] = inc;
		__syncthreads();
		if (warp == 0) {
			float wv = lane < WARPS ? warp_tot[lane] : 0.0f;
#pragma unroll
			for (int off = 1; off < 32; off *= 2) {
				float o = __shfl_up_sync(0xffffffffu, wv, off);
				if (lane >= off)
					wv += o;
			}
			if (lane < WARPS)
				warp_tot[lane] = wv; /* inclusive over warps */
		}
		__syncthreads();
		const float before = carry + (warp > 0 ? warp_tot[warp - 1] : 0.0f) + inc - tot;
#pragma unroll
		for (int j = 0; j < ITEMS; j++)
			tile[PAD(tid * ITEMS + j)] = v[j] + before;
		carry += warp_tot[WARPS - 1];
		__syncthreads();
		for (int i = tid; i < TILE; i += BLOCK_SIZE)
			if (t0 + i < cols)
				yr[t0 + i] = tile[PAD(i)];
		__syncthreads();
	}
}
