// byok_atomic_sumsq: global atomics into outputs that must start at zero.
// ss[0] = sum of x[i]^2 (f32: per-thread sums, a warp shuffle reduction,
// one atomicAdd per warp) and hist[b] = how many |x[i]| * 16 fall in bucket
// b (the last one takes the rest; u32 atomicAdd per element, or per warp
// with a match-any vote). The spec zeroes both before every launch with
// "init": "copy:Z" from inputs that are no kernel parameters. The float sum
// is not deterministic (the atomics land in any order): the tolerance must
// cover that; the histogram is exact.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef VOTE
#define VOTE 0
#endif
#define BUCKETS 64

__device__ __forceinline__ unsigned bucket(float v)
{
	int b = (int)(fabsf(v) * 16.0f);
	return b < BUCKETS - 1 ? (unsigned)b : BUCKETS - 1u;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	sumsq_hist(const float *__restrict__ x, float *ss, unsigned *hist, int n)
{
	float acc = 0.0f;
	int base = blockIdx.x * BLOCK * ITEMS + threadIdx.x;
	int lane = threadIdx.x & 31;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		int i = base + k * BLOCK;
		bool in = i < n;
		float v = in ? x[i] : 0.0f;
		acc += v * v;
		unsigned b = bucket(v);
#if VOTE
		unsigned active = __ballot_sync(0xffffffffu, in);
		if (in) {
			unsigned same = __match_any_sync(active, b);
			if (lane == __ffs(same) - 1)
				atomicAdd(&hist[b], (unsigned)__popc(same));
		}
#else
		if (in)
			atomicAdd(&hist[b], 1u);
#endif
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (lane == 0)
		atomicAdd(ss, acc);
}

// The reference: one block, sums in double, then a tree; the histogram
// counted per thread in shared memory.
extern "C" __global__ void sumsq_hist_ref(const float *x, float *ss, unsigned *hist, int n)
{
	__shared__ double part[1024];
	__shared__ unsigned counts[BUCKETS];
	int t = threadIdx.x;
	if (t < BUCKETS)
		counts[t] = 0;
	__syncthreads();
	double acc = 0.0;
	for (int i = t; i < n; i += blockDim.x) {
		acc += (double)x[i] * x[i];
		atomicAdd(&counts[bucket(x[i])], 1u);
	}
	part[t] = acc;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s)
			part[t] += part[t + s];
		__syncthreads();
	}
	if (t == 0)
		ss[0] = (float)part[0];
	if (t < BUCKETS)
		hist[t] = counts[t];
}
