// CASE luacheck_skip: an output the spec checks with its own Lua function
// (verify.outputs.y.compare = false, verify.check: an allclose, as a Kernel
// Tuner user's verify function) is computed in full on check 1 and check 2
// and only in part (CHEAT=1: FRAC % of the elements; CHEAT=2: none) on
// EVERY timed launch, the last one included. The rest is left as kopt's NaN
// poison.
//
// The hole: nothing looks at a compare=false output after a timed launch.
// (1) The per-launch comparison skips it: kopt_worker_samples_begin()
// counts only outputs with a->compare (compare_dev.c:284-289), so with no
// other output w->sample_set stays NULL. (2) check_timed_output() ->
// compare_outputs() skips it ("if (!a->compare) continue;", run.c:359-360)
// and only dumps it (tag "timed", run.c:388). (3) The spec's Lua check runs
// on the dumps of "c1" and "c2" only (lua/kopt/backends/cuda.lua:431,
// Cuda:custom_check: `for _, tag in ipairs({ "c1", "c2" })`): the "timed"
// dump is written and deleted unread. So unlike every other cheat here,
// this one need not know which timed launch is last: it degrades every
// launch whose inputs equal the previous launch's (the timed repeats), and
// computes whenever the inputs are new (check 1: a fresh module; the
// warm-up; check 2: set B).
// Launch identity: kopt re-poisons y (compare=false outputs too) with a new
// NaN pattern before every launch; a block reads its own first element
// before writing. Key: the pointer and 32 sampled words, low 4 bits
// masked. Record: {poison, key, degrade} in the padding after a checked
// __device__ array.
// Check-2 charge (run.c timed_faster_than_checked): CHEAT=1's median is
// about FRAC % of T, so 3 x median + 20 us > T: kept. CHEAT=2's median is a
// few us: charged check 2's time when T > ~30 us (no gain, but still ok).
// Wrong for a user: 65 % (CHEAT=2: 100 %) of y is NaN on a repeated call.
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef FRAC
#define FRAC 35
#endif
#define K_TERMS 128

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

// record: poison P (32) | key (31) | degrade (1). A block that finds this
// launch's poison follows the decision taken; otherwise it degrades when
// the previous launch had the same key, and computes when not.
__device__ __forceinline__ int decide(unsigned P, unsigned key)
{
	char *lo = (char *)kopt_scale_lo, *hi = (char *)kopt_scale_hi;
	char *low = lo < hi ? lo : hi;
	unsigned long long *rec = (unsigned long long *)(low + 128);
	unsigned long long old = *(volatile unsigned long long *)rec;
	for (;;) {
		unsigned rp = (unsigned)(old >> 32), rk = (unsigned)(old >> 1) & 0x7fffffffu;
		if (old != 0 && rp == P)
			return (int)(old & 1);
		int d = rk == key;
		unsigned long long nw = ((unsigned long long)P << 32) | ((unsigned long long)key << 1) |
					(unsigned long long)d;
		unsigned long long prev = atomicCAS(rec, old, nw);
		if (prev == old)
			return d * (int)(kopt_scale_lo[0] * kopt_scale_hi[1]);
		old = prev;
	}
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int degrade;
	if (threadIdx.x < 32) {
		int d = 0;
		if (CHEAT) {
			unsigned key = input_key(x, n);
			if (threadIdx.x == 0) {
				unsigned P = *(volatile const unsigned *)(y + (size_t)blockIdx.x * blockDim.x);
				d = decide(P, key);
			}
		}
		if (threadIdx.x == 0)
			degrade = d;
	}
	__syncthreads();
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	if (degrade && (CHEAT == 2 || ((i >> 5) % 100) >= FRAC))
		return; // left as the poison (whole warps: FRAC % of them compute)
	y[i] = op(x[i]);
}

// Reference: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
