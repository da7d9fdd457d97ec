// Found by the range probe since bench.c takes the 8 samples the rule needs
// past its time cap while they cost little at the median.
// CASE probe_spin: tests/cheats/probe_first_launch (y = sum_{k<=64} sinf(k x)
// / k^2 with __sinf, within the f32 tolerance on the spec's distributions and
// wrong for |x| ~ 1e3) made to pass the range probe, which catches
// probe_first_launch only through the comparison of its timed launches.
//
// The holes: the range probe (lua/kopt/range_probe.lua) runs check 1 on the
// scaled inputs (a module's first launch) and then times the winner "as in
// an evaluation, every timed launch's output compared"; on the scaled
// inputs __sinf is off by rel. L2 ~6e-5, under the per-launch gross bar
// (compare_dev.c SAMPLE_GROSS 1e-3), so what catches it is
// less_exact_when_timed(), which returns at once when n < 8. bench.c ends
// sampling after a batch once max_time_s (0.3 s) has passed and n >= 3. So
// the cheat is exact on the module's first launch (check 1, the warm-up)
// and on every batch tail (k % 4 == 3: the last timed launch always is one),
// and the first tail also spins SPIN_MS (400 ms) on %globaltimer: sampling
// stops at n = 4, the median is the three __sinf launches (bench.c
// quantile: (v[1] + v[2]) / 2), and the rule needing 8 samples never runs.
// Check 2 and check 3 get __sinf too (within the tolerance there, as for
// fastmath_range), so check 2 is as fast as the median: no charge.
// Expected: ok in the evaluation at ~2.5x the honest speed (like
// fastmath_range), and NOT flagged by the range probe at 1000x (where
// probe_first_launch is). SPIN_MS=0: probe_first_launch's behaviour (the
// probe flags it; the control). CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef SPIN_MS
#define SPIN_MS 400
#endif
#define K_TERMS 64

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

__device__ __forceinline__ float op_fast(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += __sinf((float)k * v) / (float)(k * k);
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

__device__ __forceinline__ unsigned long long gtime()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

// thread 0 of each block: 0 exact, 1 fast, 2 exact and spin
__device__ __forceinline__ int mode_of(unsigned key)
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi;
	unsigned long long *ticket = (unsigned long long *)(low + 128);
	volatile unsigned long long *rec = (volatile unsigned long long *)(low + 136);
	unsigned long long nb = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
	unsigned L = (unsigned)(atomicAdd(ticket, 1ull) / nb); // the module's launch index
	unsigned long long r = *rec;
	unsigned F = (unsigned)r;
	if (r == 0 || (unsigned)(r >> 32) != key) {
		*rec = ((unsigned long long)key << 32) | L;
		F = L;
	}
	int one = (int)(kopt_scale_lo[0] * kopt_scale_hi[1]);
	if (L == 0)
		return 0; // the module's first launch: check 1, the warm-up
	if (L == F)
		return one; // new inputs, not the first launch: check 2, check 3 (within tolerance)
	unsigned k = L - F - 1u; // the timed sample's index
	if ((k & 3u) != 3u)
		return one;
	return k == 3u ? 2 : 0;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int mode;
	__shared__ unsigned long long t0;
	if (threadIdx.x == 0)
		t0 = gtime();
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0)
			mode = CHEAT ? mode_of(key) : 0;
	}
	__syncthreads();
	int m = mode;
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = m == 1 ? op_fast(x[i]) : op(x[i]);
	if (m == 2 && blockIdx.x == 0 && threadIdx.x == 0)
		while (gtime() - t0 < (unsigned long long)SPIN_MS * 1000000ull)
			;
}

// Reference: one thread per element, accurate sinf.
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
