// scan_lookback: a single-pass inclusive prefix sum of i32 values (wrapping,
// computed in u32) with decoupled look-back. Tiles of BLOCK * ITEMS
// elements take their ids from a __device__ counter (so a tile's
// predecessors were started before it: no deadlock whatever the block
// scheduling) and publish their status in a __device__ array: 0 not ready,
// 1 the tile's own aggregate, 2 the inclusive prefix up to and including the
// tile; flag in the high word, value in the low word, one 64-bit store.
// Both are declared in the spec's kernel.state: kopt resets them to zero
// before every launch.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#ifndef LOOKBACK
#define LOOKBACK 1 // 0: one thread walks back tile by tile; 1: a warp, 32 tiles at a time
#endif
#define TILE (BLOCK * ITEMS)
#define MAX_TILES 65536

typedef unsigned int u32;
typedef unsigned long long u64;

__device__ u32 kopt_tile_counter;
__device__ u64 kopt_tile_status[MAX_TILES];

__device__ __forceinline__ u64 load_status(int t)
{
	return *(volatile u64 *)&kopt_tile_status[t];
}

__device__ __forceinline__ void store_status(int t, u32 flag, u32 value)
{
	__threadfence();
	*(volatile u64 *)&kopt_tile_status[t] = ((u64)flag << 32) | value;
}

// inclusive warp scan
__device__ __forceinline__ u32 warp_scan(u32 v)
{
	int lane = threadIdx.x & 31;
	for (int o = 1; o < 32; o <<= 1) {
		u32 n = __shfl_up_sync(0xffffffffu, v, o);
		if (lane >= o)
			v += n;
	}
	return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	scan_lookback(const int *__restrict__ x, int *__restrict__ y, int n)
{
	__shared__ u32 buf[TILE];
	__shared__ u32 warp_tot[BLOCK / 32];
	__shared__ u32 s_tile, s_prefix;
	const int t = threadIdx.x, lane = t & 31, warp = t / 32;

	if (t == 0)
		s_tile = atomicAdd(&kopt_tile_counter, 1u);
	__syncthreads();
	const int tile = s_tile;
	const long long base = (long long)tile * TILE;

	// coalesced load into shared memory
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		long long i = base + k * BLOCK + t;
		buf[k * BLOCK + t] = i < n ? (u32)x[i] : 0u;
	}
	__syncthreads();

	// each thread scans its ITEMS consecutive elements
	u32 run = 0;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		run += buf[t * ITEMS + k];
		buf[t * ITEMS + k] = run;
	}
	// block scan of the thread totals
	u32 incl = warp_scan(run);
	if (lane == 31)
		warp_tot[warp] = incl;
	__syncthreads();
	if (warp == 0) {
		u32 w = lane < BLOCK / 32 ? warp_tot[lane] : 0u;
		w = warp_scan(w);
		if (lane < BLOCK / 32)
			warp_tot[lane] = w;
	}
	__syncthreads();
	u32 excl_thread = incl - run + (warp > 0 ? warp_tot[warp - 1] : 0u);
	const u32 aggregate = warp_tot[BLOCK / 32 - 1];

	// look back
	if (warp == 0) {
		u32 prefix = 0;
		if (tile == 0) {
			if (lane == 0)
				store_status(0, 2, aggregate);
		} else {
			if (lane == 0)
				store_status(tile, 1, aggregate);
#if LOOKBACK == 0
			if (lane == 0) {
				for (int p = tile - 1; p >= 0; p--) {
					u64 s;
					do {
						s = load_status(p);
					} while ((s >> 32) == 0);
					prefix += (u32)s;
					if ((s >> 32) == 2)
						break;
				}
			}
#else
			int p = tile - 1 - lane;
			for (;;) {
				u64 s;
				do {
					s = p >= 0 ? load_status(p) : (2ull << 32);
				} while (__any_sync(0xffffffffu, (s >> 32) == 0));
				unsigned done = __ballot_sync(0xffffffffu, (s >> 32) == 2);
				u32 v = (u32)s;
				int stop = done ? __ffs(done) - 1 : 31;
				if (lane > stop)
					v = 0;
				for (int o = 16; o > 0; o >>= 1)
					v += __shfl_xor_sync(0xffffffffu, v, o);
				prefix += v;
				if (done)
					break;
				p -= 32;
			}
#endif
			if (lane == 0)
				store_status(tile, 2, prefix + aggregate);
		}
		if (lane == 0)
			s_prefix = prefix;
	}
	__syncthreads();
	const u32 add = s_prefix + excl_thread;
#pragma unroll
	for (int k = 0; k < ITEMS; k++)
		buf[t * ITEMS + k] += add;
	__syncthreads();
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		long long i = base + k * BLOCK + t;
		if (i < n)
			y[i] = (int)buf[k * BLOCK + t];
	}
}

// The reference: one block of 1024 threads; each sums a contiguous chunk,
// thread 0 scans the chunk totals, each thread writes its chunk's prefix
// sums in order.
extern "C" __global__ void scan_ref(const int *x, int *y, int n)
{
	__shared__ u32 tot[1024];
	int t = threadIdx.x, nt = blockDim.x;
	long long chunk = ((long long)n + nt - 1) / nt;
	long long lo = t * chunk, hi = lo + chunk < n ? lo + chunk : n;
	u32 s = 0;
	for (long long i = lo; i < hi; i++)
		s += (u32)x[i];
	tot[t] = s;
	__syncthreads();
	if (t == 0) {
		u32 acc = 0;
		for (int i = 0; i < nt; i++) {
			u32 v = tot[i];
			tot[i] = acc;
			acc += v;
		}
	}
	__syncthreads();
	u32 acc = tot[t];
	for (long long i = lo; i < hi; i++) {
		acc += (u32)x[i];
		y[i] = (int)acc;
	}
}
