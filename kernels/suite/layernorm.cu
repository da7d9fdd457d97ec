// LayerNorm over everything but the first dimension, nn.LayerNorm(shape) of a
// (rows, L) f32 view, elementwise affine w, b of length L:
//   y = (x - mean) / sqrt(var + eps) * w + b,  biased variance, per row.
//
// KernelBench's rows are few and long (16 rows of 4 M elements), so one
// block per row starves the GPU. Here a thread block cluster of CLUSTER
// blocks shares a row: each block sums its chunk (sum and sum of squares,
// per thread in f32, then in f64), the blocks of the cluster read each
// other's totals through distributed shared memory, and each normalises its
// own chunk. CLUSTER = 1 is the one-block-per-row kernel.
// Requires L % (CLUSTER * VEC) == 0. Launch: grid (CLUSTER, rows), block BLOCK_SIZE.
//
// That design reads each row twice (statistics, then normalising), and all
// its rows, 16 MB each, are in flight at once, so the second read misses L2.
// ROW_SYNC = 1 is the other design: the whole GPU works on one row at a time.
// A cooperative grid (launch.cooperative: every block resident) gives each
// block a fixed slice of the columns; per row, a block loads its slice into
// shared memory once, adds its partial sums into the row's totals, and waits
// at the row's grid barrier (an arrival counter) before normalising from
// shared memory. x is read once and y written once, both streaming
// (evict-first); w and b, whose slices every row reuses, are loaded with an
// L2 evict-last hint when EVICT = 1 so they stay in L2 across rows. The
// totals and the counters are module variables declared in the spec's
// kernel.state, which kopt resets before every launch. Each thread keeps
// UNROLL loads in flight, and with PREFETCH = 1 the next row's first loads
// are issued before the barrier wait, so the wait overlaps memory traffic.
// ROW_SYNC = 2 keeps the row's slice in registers instead and w's slice in
// shared memory, loaded once, so per row only x, y and b move; with
// L2_AHEAD > 0 part of the next row is prefetched into L2 during the
// barrier wait. (A design that computed the statistics one row ahead and
// read x a second time from L2 measured 0.31 ms against 0.24 on an H100:
// with two 16 MB rows and y's stream in flight, the second read missed.)
// Requires L % 4 == 0
// and rows <= ROWS_MAX. Launch: grid (G), block BLOCK_SIZE, cooperative,
// dynamic shared memory 16 * cdiv(L / 4, G) bytes.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 512
#endif
#ifndef CLUSTER
#define CLUSTER 8
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ROW_SYNC
#define ROW_SYNC 0
#endif
#ifndef EVICT
#define EVICT 1
#endif
#ifndef BPS
#define BPS 1 /* ROW_SYNC: blocks per multiprocessor */
#endif
#ifndef ROWS_MAX
#define ROWS_MAX 1024
#endif

static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");
static_assert(BLOCK_SIZE % 32 == 0, "whole warps");

struct __align__(sizeof(float) * VEC) vec_t {
	float v[VEC];
};

#if CLUSTER > 1
#define CLUSTER_ATTR __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_ATTR
#endif

// The cluster primitives in PTX (sm_90), without cooperative_groups, whose
// header leaves hundreds of module variables in the CUBIN.
// Every thread of every block of the cluster arrives, then waits; the
// release/acquire pair orders shared-memory writes before the barrier with
// the reads after it.
__device__ __forceinline__ void cluster_sync()
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// *p in the shared memory of block `rank` of this cluster (distributed
// shared memory).
__device__ __forceinline__ double peer_load(const double *p, unsigned rank)
{
	unsigned local = (unsigned)__cvta_generic_to_shared(p), remote;
	double v;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
	asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(remote) : "memory");
	return v;
}

// The block's totals of s and ss (one pair per thread), in double, in *a and
// *q of thread 0: warp shuffles, then one pair per warp through warp_part
// (BLOCK_SIZE / 32 pairs of shared memory). Ends with the block synchronised
// once.
__device__ __forceinline__ void block_sums(float s, float ss, double (*warp_part)[2], double *a,
					   double *q)
{
	double ds = s, dss = ss;
#pragma unroll
	for (int off = 16; off > 0; off /= 2) {
		ds += __shfl_xor_sync(0xffffffffu, ds, off);
		dss += __shfl_xor_sync(0xffffffffu, dss, off);
	}
	if (threadIdx.x % 32 == 0) {
		warp_part[threadIdx.x / 32][0] = ds;
		warp_part[threadIdx.x / 32][1] = dss;
	}
	__syncthreads();
	*a = *q = 0.0;
	if (threadIdx.x == 0)
		for (int k = 0; k < BLOCK_SIZE / 32; k++) {
			*a += warp_part[k][0];
			*q += warp_part[k][1];
		}
}

#if !ROW_SYNC
extern "C" __global__ void CLUSTER_ATTR __launch_bounds__(BLOCK_SIZE)
	layernorm(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
		  float *__restrict__ y, int rows, int L, float eps)
{
	__shared__ double warp_part[BLOCK_SIZE / 32][2];
	__shared__ double total[2]; /* this block's sum and sum of squares, read by the cluster */
	__shared__ float stats[2];  /* mean, 1/std of the row */
	(void)rows;
	const int row = blockIdx.y, rank = blockIdx.x;
	const long chunk = L / CLUSTER;
	const long base = (long)row * L + rank * chunk;
	const vec_t *xv = reinterpret_cast<const vec_t *>(x + base);
	const int nvec = (int)(chunk / VEC);

	float s = 0.0f, ss = 0.0f;
	for (int i = threadIdx.x; i < nvec; i += BLOCK_SIZE) {
		vec_t v = xv[i];
#pragma unroll
		for (int k = 0; k < VEC; k++) {
			s += v.v[k];
			ss += v.v[k] * v.v[k];
		}
	}
	double a, q;
	block_sums(s, ss, warp_part, &a, &q);
	if (threadIdx.x == 0) {
		total[0] = a;
		total[1] = q;
	}
#if CLUSTER > 1
	cluster_sync(); /* every block's total is written */
	if (threadIdx.x == 0) {
		double a = 0.0, q = 0.0;
		for (unsigned r = 0; r < CLUSTER; r++) {
			a += peer_load(&total[0], r);
			q += peer_load(&total[1], r);
		}
		const double mean = a / L, var = q / L - mean * mean;
		stats[0] = (float)mean;
		stats[1] = (float)(1.0 / sqrt(var + (double)eps));
	}
	cluster_sync(); /* no block leaves while a peer may still read its total */
#else
	__syncthreads();
	if (threadIdx.x == 0) {
		const double mean = total[0] / L, var = total[1] / L - mean * mean;
		stats[0] = (float)mean;
		stats[1] = (float)(1.0 / sqrt(var + (double)eps));
	}
	__syncthreads();
#endif
	const float mean = stats[0], rstd = stats[1];
	const vec_t *wv = reinterpret_cast<const vec_t *>(w + rank * chunk);
	const vec_t *bv = reinterpret_cast<const vec_t *>(b + rank * chunk);
	vec_t *yv = reinterpret_cast<vec_t *>(y + base);
	for (int i = threadIdx.x; i < nvec; i += BLOCK_SIZE) {
		vec_t v = xv[i], ww = wv[i], bb = bv[i], o;
#pragma unroll
		for (int k = 0; k < VEC; k++)
			o.v[k] = (v.v[k] - mean) * rstd * ww.v[k] + bb.v[k];
		yv[i] = o;
	}
}
#else /* ROW_SYNC */

#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef PREFETCH
#define PREFETCH 1
#endif

// Per row: the sum and the sum of squares of all blocks, and how many blocks
// have added theirs. Declared in kernel.state: reset before every launch.
__device__ double kopt_ln_totals[ROWS_MAX][2];
__device__ unsigned kopt_ln_arrived[ROWS_MAX];

// This block's columns of every row, in float4: the row's nvec_row split
// into gridDim.x slices of per_block, this block's from lo, nvec of them
// (the last blocks' may be shorter or empty).
struct slice_t {
	int nvec_row, per_block, lo, nvec;
};

__device__ __forceinline__ slice_t block_slice(int L)
{
	slice_t s;
	s.nvec_row = L / 4;
	s.per_block = (s.nvec_row + gridDim.x - 1) / gridDim.x;
	s.lo = blockIdx.x * s.per_block;
	s.nvec = max(0, min(s.nvec_row, s.lo + s.per_block) - s.lo);
	return s;
}

// The L2 policy for w and b (kept, evict-last) when EVICT = 1; unused else.
__device__ __forceinline__ unsigned long long evict_last_policy()
{
	unsigned long long policy = 0;
#if EVICT
	asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
#endif
	return policy;
}

__device__ __forceinline__ float4 load_last(const float4 *p, unsigned long long policy)
{
	float4 v;
#if EVICT
	asm volatile("ld.global.nc.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
		     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
		     : "l"(p), "l"(policy));
#else
	(void)policy;
	v = __ldg(p);
#endif
	return v;
}

// The block's partial sums (s, ss of each thread) added into the row's
// totals, then thread 0 arrives at the row's barrier.
__device__ __forceinline__ void row_arrive(int row, float s, float ss, double (*warp_part)[2])
{
	double a, q;
	block_sums(s, ss, warp_part, &a, &q);
	if (threadIdx.x == 0) {
		atomicAdd(&kopt_ln_totals[row][0], a);
		atomicAdd(&kopt_ln_totals[row][1], q);
		/* release: the totals above are visible before the arrival */
		asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(&kopt_ln_arrived[row])
			     : "memory");
	}
}

// Thread 0: waits until every block of the grid has arrived for the row,
// then writes the row's mean and 1/std into stats (shared memory).
__device__ __forceinline__ void row_wait(int row, int L, float eps, float *stats)
{
	unsigned n;
	do {
		asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
			     : "=r"(n)
			     : "l"(&kopt_ln_arrived[row])
			     : "memory");
	} while (n < gridDim.x);
	const double sum = __ldcg(&kopt_ln_totals[row][0]);
	const double sumsq = __ldcg(&kopt_ln_totals[row][1]);
	const double mean = sum / L, var = sumsq / L - mean * mean;
	stats[0] = (float)mean;
	stats[1] = (float)(1.0 / sqrt(var + (double)eps));
}

// UNROLL float4 of x per thread, strided by the block: loads issued back to
// back, so each thread keeps UNROLL of them in flight (one at a time does
// not cover the memory latency with one block per multiprocessor).
__device__ __forceinline__ void load_chunk(float4 (&v)[UNROLL], const float4 *xv, int first, int nvec)
{
#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		const int i = first + u * BLOCK_SIZE;
		if (i < nvec)
			v[u] = __ldcs(xv + i);
	}
}

#if ROW_SYNC == 2
// w's slice and as much of b's as the rest of the dynamic shared memory holds
// (the launch's size, read from %dynamic_smem_size), copied in once for every
// row: w_slice gets the block's nvec float4 of w, b_head the first of b's;
// returns how many of b's (the rest is read per row from L2). Each thread
// reads back only what it stored itself, so no barrier is needed.
__device__ __forceinline__ int stage_w_b(float4 *w_slice, float4 *b_head, const float4 *wv,
					 const float4 *bv, slice_t sl)
{
	unsigned dyn_bytes;
	asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
	const int nb = min(sl.nvec, max(0, (int)(dyn_bytes / 16) - sl.per_block));
#pragma unroll 4
	for (int i = threadIdx.x; i < sl.nvec; i += BLOCK_SIZE) {
		w_slice[i] = __ldg(wv + i);
		if (i < nb)
			b_head[i] = __ldg(bv + i);
	}
	return nb;
}
#endif

#if ROW_SYNC == 1
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	layernorm(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
		  float *__restrict__ y, int rows, int L, float eps)
{
	extern __shared__ float4 slice[]; /* this block's columns of the current row */
	__shared__ double warp_part[BLOCK_SIZE / 32][2];
	__shared__ float stats[2];
	const slice_t sl = block_slice(L);
	const int nvec_row = sl.nvec_row, nvec = sl.nvec;
	const float4 *wv = reinterpret_cast<const float4 *>(w) + sl.lo;
	const float4 *bv = reinterpret_cast<const float4 *>(b) + sl.lo;
	const int step = BLOCK_SIZE * UNROLL;
	const unsigned long long policy = evict_last_policy();
	float4 next[UNROLL]; /* the first chunk of the next row, loaded while waiting */
	bool have_next = false;

	for (int row = 0; row < rows; row++) {
		const float4 *xv = reinterpret_cast<const float4 *>(x + (long)row * L) + sl.lo;
		float s = 0.0f, ss = 0.0f;
		/* each thread reads back only what it stored: no barrier on slice */
		for (int first = threadIdx.x; first < nvec; first += step) {
			float4 v[UNROLL];
			if (have_next && first == (int)threadIdx.x) {
#pragma unroll
				for (int u = 0; u < UNROLL; u++)
					v[u] = next[u];
			} else {
				load_chunk(v, xv, first, nvec);
			}
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const int i = first + u * BLOCK_SIZE;
				if (i < nvec) {
					slice[i] = v[u];
					s += (v[u].x + v[u].y) + (v[u].z + v[u].w);
					ss += (v[u].x * v[u].x + v[u].y * v[u].y) + (v[u].z * v[u].z + v[u].w * v[u].w);
				}
			}
		}
		row_arrive(row, s, ss, warp_part);
		/* the wait for the other blocks overlaps the next row's first loads */
		have_next = PREFETCH && row + 1 < rows;
		if (have_next)
			load_chunk(next, xv + nvec_row, threadIdx.x, nvec);
		if (threadIdx.x == 0)
			row_wait(row, L, eps, stats);
		__syncthreads();
		const float mean = stats[0], rstd = stats[1];
		float4 *yv = reinterpret_cast<float4 *>(y + (long)row * L) + sl.lo;
		for (int first = threadIdx.x; first < nvec; first += step) {
			float4 ww[UNROLL], bb[UNROLL];
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const int i = first + u * BLOCK_SIZE;
				if (i < nvec) {
					ww[u] = load_last(wv + i, policy);
					bb[u] = load_last(bv + i, policy);
				}
			}
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const int i = first + u * BLOCK_SIZE;
				if (i < nvec) {
					const float4 v = slice[i];
					float4 o;
					o.x = (v.x - mean) * rstd * ww[u].x + bb[u].x;
					o.y = (v.y - mean) * rstd * ww[u].y + bb[u].y;
					o.z = (v.z - mean) * rstd * ww[u].z + bb[u].z;
					o.w = (v.w - mean) * rstd * ww[u].w + bb[u].w;
					__stcs(yv + i, o);
				}
			}
		}
		/* stats and warp_part are rewritten for the next row */
		__syncthreads();
	}
}
#else /* ROW_SYNC == 2 */

#ifndef L2_AHEAD
#define L2_AHEAD 0
#endif

// Asks L2 for the first L2_AHEAD eighths of the block's slice of the next
// row (128-byte lines, spread over the threads), without registers: the
// barrier wait that follows leaves DRAM idle otherwise, and the next row's
// loads then find part of the slice in L2. More than about 8 MB of the
// 16 MB row ahead, or the lines marked evict-last, measured slower on an
// H100: with y's stream and b's rest in L2 they are pushed out before use.
__device__ __forceinline__ void prefetch_ahead(const float4 *next, int nvec)
{
	const char *base = reinterpret_cast<const char *>(next);
	const int bytes = nvec * 16 / 8 * L2_AHEAD;
	for (int off = threadIdx.x * 128; off < bytes; off += BLOCK_SIZE * 128)
		asm volatile("prefetch.global.L2 [%0];" ::"l"(base + off));
}

// The row's slice in registers (ITEMS float4 per thread, up to 8192 / BPS
// float4 = 128 KB / BPS a block); w's slice and as much of b's as the rest of the dynamic
// shared memory holds (the launch's size, read from %dynamic_smem_size), both
// loaded once for every row; the rest of b is read per row from L2
// (evict-last). Per row, x and y are the only DRAM traffic when that rest
// stays in L2.
#define ITEMS (8192 / BPS / BLOCK_SIZE)

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE, BPS)
	layernorm(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
		  float *__restrict__ y, int rows, int L, float eps)
{
	extern __shared__ float4 w_slice[]; /* per_block of w, then nb of b */
	__shared__ double warp_part[BLOCK_SIZE / 32][2];
	__shared__ float stats[2];
	const slice_t sl = block_slice(L);
	const int per_block = sl.per_block, nvec = sl.nvec;
	const float4 *wv = reinterpret_cast<const float4 *>(w) + sl.lo;
	const float4 *bv = reinterpret_cast<const float4 *>(b) + sl.lo;
	float4 *b_head = w_slice + per_block;
	const int nb = stage_w_b(w_slice, b_head, wv, bv, sl);
	const unsigned long long policy = evict_last_policy();

	for (int row = 0; row < rows; row++) {
		const float4 *xv = reinterpret_cast<const float4 *>(x + (long)row * L) + sl.lo;
		float4 v[ITEMS];
#pragma unroll
		for (int u = 0; u < ITEMS; u++) {
			const int i = threadIdx.x + u * BLOCK_SIZE;
			v[u] = i < nvec ? __ldcs(xv + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
		float s = 0.0f, ss = 0.0f;
#pragma unroll
		for (int u = 0; u < ITEMS; u++) {
			s += (v[u].x + v[u].y) + (v[u].z + v[u].w);
			ss += (v[u].x * v[u].x + v[u].y * v[u].y) + (v[u].z * v[u].z + v[u].w * v[u].w);
		}
		row_arrive(row, s, ss, warp_part);
		if (L2_AHEAD && row + 1 < rows)
			prefetch_ahead(xv + sl.nvec_row, nvec);
		if (threadIdx.x == 0)
			row_wait(row, L, eps, stats);
		__syncthreads();
		const float mean = stats[0], rstd = stats[1];
		float4 *yv = reinterpret_cast<float4 *>(y + (long)row * L) + sl.lo;
#pragma unroll
		for (int u = 0; u < ITEMS; u++) {
			const int i = threadIdx.x + u * BLOCK_SIZE;
			if (i < nvec) {
				const float4 ww = w_slice[i], bb = i < nb ? b_head[i] : load_last(bv + i, policy);
				float4 o;
				o.x = (v[u].x - mean) * rstd * ww.x + bb.x;
				o.y = (v[u].y - mean) * rstd * ww.y + bb.y;
				o.z = (v[u].z - mean) * rstd * ww.z + bb.z;
				o.w = (v[u].w - mean) * rstd * ww.w + bb.w;
				__stcs(yv + i, o);
			}
		}
		/* stats and warp_part are rewritten for the next row */
		__syncthreads();
	}
}
#endif /* ROW_SYNC == 1 or 2 */
#endif /* ROW_SYNC */
