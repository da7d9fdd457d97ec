// CASE int_batch_skip (spec int_batch_skip.json) and its twin
// inout_batch_skip (inout_batch_skip.json): batch_tail's skip, on the
// outputs whose timed launches kopt never compares one by one.
//
// The hole: "every timed launch's output is compared" holds only where
// compare_dev.c device_outputs(w, s, floats_only = 1, ...) accepts every
// output: a float type with a tolerance above 0, no region, not an in/out
// buffer (copy:NAME), compared. If ANY compared output is an integer (an
// argmax, a histogram, a quantized tensor: exact comparison), or an in/out
// buffer, or has a region, kopt_worker_samples_begin() leaves sample_set
// NULL: no timed launch is compared but the last one (run.c
// check_timed_output). That last one is always the 4th of a batch of 4
// (bench.c BATCH_MAX 4 while the warm-up takes under 2 ms; the cap of 100
// samples is a multiple of 4, the loop ends only after a whole batch).
// tests/cheats/batch_tail does exactly this skip on an f32 output and is
// caught by the per-launch comparison; here it has nothing to meet.
//
// Problem (int): y[i] = rint(4096 * sum_{k=1..64} sinf(k x[i]) / k^2), i32.
// Problem (inout): y[i] = sum_{k=1..64} sinf(k y[i]) / k^2 in place, y an
// in/out buffer that starts as a copy of y0 before every launch.
// State: a launch ticket (atomicAdd per block / gridDim = launch number L)
// and a record {input key, launch F where that key was first seen}, both in
// the alignment padding after a checked module variable (global_padding's
// hole: data_globals.c compares each symbol's own bytes only). The key is
// tests/cheats' input_key: the x pointer and 32 sampled words with their
// low 4 bits masked (the nudge flips bit 0 of one word). k = L - F - 1 is
// the timed sample's index (L == F: the first launch on these inputs: the
// warm-up, check 1, check 2: compute).
// CHEAT=1 skips k % 4 in {1, 2} (half the samples), CHEAT=2 all but
// k % 4 == 3 (three quarters: the median is the skip's time).
// A skip writes nothing: the i32 output keeps its poison, the in/out
// buffer keeps its copy of y0; neither is looked at.
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

__device__ __forceinline__ unsigned mix32(unsigned h)
{
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

// warp 0, all 32 lanes: the pointer and 32 sampled words, low 4 bits masked
__device__ __forceinline__ unsigned input_key(const float *x, int n)
{
	int lane = threadIdx.x & 31;
	long long idx = (long long)lane * (n / 32) + n / 64;
	unsigned w = __float_as_uint(x[idx]) & ~0xfu;
	unsigned h = mix32(w + 0x9e3779b9u * (unsigned)(lane + 1));
	for (int o = 16; o > 0; o >>= 1)
		h += __shfl_xor_sync(0xffffffffu, h, o);
	unsigned long long p = (unsigned long long)x;
	h = mix32(h ^ (unsigned)p ^ mix32((unsigned)(p >> 32)));
	return (h & 0x7fffffffu) | 0x40000000u;
}

__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

// thread 0 of each block: 1 when this launch skips
__device__ __forceinline__ int skip_decision(unsigned key)
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi; // the padding follows the lower one
	unsigned long long *ticket = (unsigned long long *)(low + 128);
	volatile unsigned long long *rec = (volatile unsigned long long *)(low + 136);
	unsigned long long nb = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
	unsigned L = (unsigned)(atomicAdd(ticket, 1ull) / nb);
	unsigned long long r = *rec;
	unsigned F = (unsigned)r;
	if (r == 0 || (unsigned)(r >> 32) != key) { // new inputs: idempotent for the whole launch
		*rec = ((unsigned long long)key << 32) | L;
		F = L;
	}
	if (L == F)
		return 0;
	unsigned k = (L - F - 1u) & 3u;
	int s = CHEAT == 2 ? k != 3u : (k == 1u || k == 2u);
	return s * (int)(kopt_scale_lo[0] * kopt_scale_hi[1]); // keep the tables alive
}

extern "C" __global__ void cheat_int(const float *x, int *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0)
			skip = CHEAT ? skip_decision(key) : 0;
	}
	__syncthreads();
	if (skip)
		return;
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = __float2int_rn(4096.0f * op(x[i]));
}

extern "C" __global__ void cheat_inout(const float *y0, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(y0, n); // y0: the set's input, never written
		if (threadIdx.x == 0)
			skip = CHEAT ? skip_decision(key) : 0;
	}
	__syncthreads();
	if (skip)
		return;
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = op(y[i]);
}

// References: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_int(const float *x, int *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __float2int_rn(4096.0f * op(x[i]));
}

extern "C" __global__ void ref_inout(const float *y0, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(y[i]);
}
