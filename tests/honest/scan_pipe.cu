// scan_pipe: inclusive prefix sum of 2^22 f32 values as the classic
// three-kernel pipeline (reduce, scan the block sums, scan and add):
//   scan_reduce: bsum[b]  = sum of tile b (BLOCK * ITEMS elements), f32;
//   scan_carry:  carry[b] = exclusive prefix of bsum (one block), in f64
//                or in f32 (CARRY_F64), stored as f64 scratch;
//   scan_apply:  y[i]     = carry[b] + inclusive scan of tile b up to i.
// The f32 carry chain rounds once per tile against a running total that
// grows like sqrt(i): about 3e-6 relative L2 on N(0,1)-like data, under the
// f32 default 1e-5; the f64 carry leaves only the tile-local rounding.
// bsum and carry are pipeline scratch (poisoned before every run).
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef CARRY_F64
#define CARRY_F64 1
#endif
#define TILE (BLOCK * ITEMS)
#define WARPS (BLOCK / 32)
#define CARRY_THREADS 1024

__device__ __forceinline__ float warp_incl_scan(float v)
{
	const int lane = threadIdx.x & 31;
	for (int o = 1; o < 32; o <<= 1) {
		const float u = __shfl_up_sync(0xffffffffu, v, o);
		if (lane >= o)
			v += u;
	}
	return v;
}

// Block-wide exclusive scan of one value per thread (the sum of the values
// of the threads before it). Every thread of the block must call it.
__device__ __forceinline__ float block_excl_scan(float v)
{
	__shared__ float wsum[WARPS];
	__shared__ float incl[BLOCK];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	float w = warp_incl_scan(v);
	if (lane == 31)
		wsum[warp] = w;
	__syncthreads();
	if (warp == 0) {
		float t = lane < WARPS ? wsum[lane] : 0.0f;
		t = warp_incl_scan(t);
		if (lane < WARPS)
			wsum[lane] = t;
	}
	__syncthreads();
	if (warp > 0)
		w += wsum[warp - 1];
	incl[threadIdx.x] = w;
	__syncthreads();
	return threadIdx.x > 0 ? incl[threadIdx.x - 1] : 0.0f;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	scan_reduce(const float *__restrict__ x, float *__restrict__ bsum, int n)
{
	const int base = blockIdx.x * TILE + threadIdx.x * ITEMS;
	float s = 0.0f;
#pragma unroll
	for (int k = 0; k < ITEMS; k++)
		s += base + k < n ? x[base + k] : 0.0f;
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	__shared__ float ws[WARPS];
	if ((threadIdx.x & 31) == 0)
		ws[threadIdx.x >> 5] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		float t = 0.0f;
		for (int w = 0; w < WARPS; w++)
			t += ws[w];
		bsum[blockIdx.x] = t;
	}
}

// One block: thread t owns a contiguous run of block sums, adds them,
// the 1024 run totals are scanned sequentially by thread 0, then each
// thread writes the exclusive prefixes of its run.
extern "C" __global__ void __launch_bounds__(CARRY_THREADS)
	scan_carry(const float *__restrict__ bsum, double *__restrict__ carry, int nb)
{
#if CARRY_F64
	typedef double acc_t;
#else
	typedef float acc_t;
#endif
	__shared__ acc_t run[CARRY_THREADS];
	const int per = (nb + CARRY_THREADS - 1) / CARRY_THREADS;
	const int b0 = threadIdx.x * per, b1 = min(b0 + per, nb);
	acc_t s = 0;
	for (int b = b0; b < b1; b++)
		s += (acc_t)bsum[b];
	run[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		acc_t t = 0;
		for (int k = 0; k < CARRY_THREADS; k++) {
			const acc_t v = run[k];
			run[k] = t;
			t += v;
		}
	}
	__syncthreads();
	acc_t c = run[threadIdx.x];
	for (int b = b0; b < b1; b++) {
		carry[b] = (double)c;
		c += (acc_t)bsum[b];
	}
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	scan_apply(float *__restrict__ y, const float *__restrict__ x, const double *__restrict__ carry, int n)
{
	const int base = blockIdx.x * TILE + threadIdx.x * ITEMS;
	float v[ITEMS];
	float s = 0.0f;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		s += base + k < n ? x[base + k] : 0.0f;
		v[k] = s; // the thread's own inclusive prefix
	}
	const float before = block_excl_scan(s);
	const double c = carry[blockIdx.x];
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		if (base + k < n) {
#if CARRY_F64
			y[base + k] = (float)(c + (double)(before + v[k]));
#else
			y[base + k] = (float)c + (before + v[k]);
#endif
		}
	}
}

// Reference: one block of 1024 threads; thread t owns a contiguous chunk,
// sums it in double, thread 0 scans the chunk totals, then each thread
// walks its chunk again in double.
extern "C" __global__ void scan_ref(float *y, const float *x, int n)
{
	__shared__ double tot[1024];
	const int per = (n + 1023) / 1024;
	const int i0 = threadIdx.x * per, i1 = min(i0 + per, n);
	double s = 0.0;
	for (int i = i0; i < i1; i++)
		s += (double)x[i];
	tot[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0.0;
		for (int k = 0; k < 1024; k++) {
			const double u = tot[k];
			tot[k] = t;
			t += u;
		}
	}
	__syncthreads();
	double acc = tot[threadIdx.x];
	for (int i = i0; i < i1; i++) {
		acc += (double)x[i];
		y[i] = (float)acc;
	}
}
