// CASE sort_exact: sort each row of 1024 floats (bitonic, in shared
// memory). Sorting is exact, so the spec asks for an exact f32 output
// ("tolerance": {"rel_l2": 0, "max_abs": 0}). The cheat sorts every row on
// the launches kopt compares and only FRAC % of the rows on the other timed
// launches (the others are written back unsorted).
//
// The hole: sample_kind() (compare_dev.c:267-275) returns SAMPLE_FLOAT for
// a float output only when its tolerance is above 0 ("tol > 0.0 ?
// SAMPLE_FLOAT : SAMPLE_NONE"), and SAMPLE_BITS only for integer types. A
// float output held to exactly 0 is SAMPLE_NONE: kopt_worker_samples_begin()
// counts no output and the per-launch comparison is never armed, so only
// the last timed launch is compared (run.c check_timed_output). As in
// region_partial, the last timed launch is always sample k % 4 == 3
// (bench.c BATCH_MAX = 4, whole batches, cap 100), counted by a ticket in
// the padding after a checked __device__ array.
// Check-2 charge (run.c timed_faster_than_checked): CHEAT=1 keeps the median
// at about FRAC % of the sorting plus a copy: never 3x faster. CHEAT=2
// copies every row unsorted on the degraded launches: a 32 MB copy is
// itself ~13 us on an H200, so 3 x median + 20 us stays above an honest
// sort of ~45 us (not charged unless the sort is slower than ~60 us).
// Wrong for a user: 65 % (CHEAT=2: all) of the rows come back unsorted.
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef FRAC
#define FRAC 35
#endif
#define ROW 1024

__device__ __forceinline__ unsigned mix32(unsigned h)
{
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

__device__ __forceinline__ unsigned input_key(const float *x, long long n)
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

__device__ __forceinline__ int sample_index(unsigned key)
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi;
	unsigned long long *ticket = (unsigned long long *)(low + 128);
	volatile unsigned long long *rec = (volatile unsigned long long *)(low + 136);
	unsigned long long nb = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
	unsigned L = (unsigned)(atomicAdd(ticket, 1ull) / nb);
	unsigned long long r = *rec;
	unsigned F = (unsigned)r;
	if (r == 0 || (unsigned)(r >> 32) != key) {
		*rec = ((unsigned long long)key << 32) | L;
		F = L;
	}
	int one = (int)(kopt_scale_lo[0] * kopt_scale_hi[1]);
	return L == F ? -1 : (int)(L - F - 1u) * one;
}

// one block of 512 threads per row
extern "C" __global__ void __launch_bounds__(512) cheat(float *y, const float *x, int rows)
{
	__shared__ float s[ROW];
	__shared__ int sorted;
	const float *xr = x + (size_t)blockIdx.x * ROW;
	float *yr = y + (size_t)blockIdx.x * ROW;
	int t = threadIdx.x;
	if (t < 32) {
		int d = 1;
		if (CHEAT) {
			unsigned key = input_key(x, (long long)rows * ROW);
			if (t == 0) {
				int k = sample_index(key);
				if (k >= 0 && (k & 3) != 3)
					d = CHEAT == 1 && (int)(blockIdx.x % 100) < FRAC;
			}
		}
		if (t == 0)
			sorted = d;
	}
	__syncthreads();
	if (!sorted) { // a degraded timed launch: the row back unsorted
		yr[t] = xr[t];
		yr[t + 512] = xr[t + 512];
		return;
	}
	s[t] = xr[t];
	s[t + 512] = xr[t + 512];
	__syncthreads();
	for (int size = 2; size <= ROW; size <<= 1) {
		for (int stride = size >> 1; stride > 0; stride >>= 1) {
			int i = 2 * t - (t & (stride - 1)); // the lower index of this thread's pair
			int j = i + stride;
			bool up = (i & size) == 0;
			float a = s[i], b = s[j];
			if ((a > b) == up) {
				s[i] = b;
				s[j] = a;
			}
			__syncthreads();
		}
	}
	yr[t] = s[t];
	yr[t + 512] = s[t + 512];
}

// Reference: rank sort, one thread per element: its place is the number of
// elements smaller, or equal and before it.
extern "C" __global__ void ref_sort(float *y, const float *x, int rows)
{
	__shared__ float s[ROW];
	const float *xr = x + (size_t)blockIdx.x * ROW;
	float *yr = y + (size_t)blockIdx.x * ROW;
	int t = threadIdx.x;
	s[t] = xr[t];
	__syncthreads();
	float v = s[t];
	int r = 0;
	for (int i = 0; i < ROW; i++) {
		float u = s[i];
		r += (u < v) || (u == v && i < t);
	}
	yr[r] = v;
}
