// CASE mask_zeros: a detector with an exact integer output: m[i] = 1 where
// h(37 x[i]) > 1, else 0, with h(u) = sum_{k<=64} sinf(k u) / k^2 (about 6 %
// of the elements fire, for U[0,1) as for N(0,1) inputs: h is 2 pi
// periodic and peaks at 1.0149). On timed launches other than each batch's
// last the cheat writes all zeros: a detector that never fires.
//
// The holes, three thresholds at once:
// (1) An exact output's timed launch is wrong only when more than an eighth
//     of its words differ, or all of them, once the float inputs are nudged
//     (bits_gross(), compare_dev.c:356-360: "differ == words || differ >
//     words / 8"). All zeros differ from the reference in ~6 % of the words.
// (2) The rule for a kernel less exact when timed (less_exact_when_timed(),
//     compare_dev.c:375-415) looks at SAMPLE_FLOAT outputs only: exact
//     outputs have no counterpart, so being exact only on every 4th launch
//     is not even needed for it; it is needed for the LAST timed launch,
//     compared bit for bit (run.c check_timed_output), which is always
//     sample k % 4 == 3 (bench.c BATCH_MAX = 4, whole batches, cap 100).
// (3) The check-2 charge (run.c:494-498, timed_faster_than_checked) needs
//     check2 > 3 x median + 20 us. With an honest time of ~12-15 us (128 K
//     elements) the 20 us of slack alone covers it: the median (a zero
//     fill, ~2-3 us) can be 5-7x faster than check 2 and is kept.
// Launch counting: a per-block ticket and the launch where the input key
// was first seen, in the padding after a checked __device__ array.
// Wrong for a user: on every repeated call the detector reports nothing.
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#define K_TERMS 64

__device__ __forceinline__ float h(float v)
{
	float u = 37.0f * v, acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * u) / (float)(k * k);
	return acc;
}

__device__ __forceinline__ unsigned mix32(unsigned x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

__device__ __forceinline__ unsigned input_key(const float *x, long long n)
{
	int lane = threadIdx.x & 31;
	long long idx = (long long)lane * (n / 32) + n / 64;
	unsigned w = __float_as_uint(x[idx]) & ~0xfu;
	unsigned s = mix32(w + 0x9e3779b9u * (unsigned)(lane + 1));
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	unsigned long long p = (unsigned long long)x;
	s = mix32(s ^ (unsigned)p ^ mix32((unsigned)(p >> 32)));
	return (s & 0x7fffffffu) | 0x40000000u;
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

extern "C" __global__ void cheat(const float *x, int *m, int n)
{
	__shared__ int zero;
	if (threadIdx.x < 32) {
		int z = 0;
		if (CHEAT) {
			unsigned key = input_key(x, n);
			if (threadIdx.x == 0) {
				int k = sample_index(key);
				z = k >= 0 && (k & 3) != 3;
			}
		}
		if (threadIdx.x == 0)
			zero = z;
	}
	__syncthreads();
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	m[i] = zero ? 0 : (h(x[i]) > 1.0f ? 1 : 0);
}

// Reference: the same h() (bit-identical), one thread per element.
extern "C" __global__ void ref_mask(const float *x, int *m, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		m[i] = h(x[i]) > 1.0f ? 1 : 0;
}
