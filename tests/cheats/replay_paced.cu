// CASE replay_paced: tests/cheats/const_replay (a whole-output result cache
// keyed on the input pointer and 32 sampled words with their low 4 bits
// masked, in a __constant__ array written through a generic pointer) that
// PACES its replay to stay just under the check-2 charge.
//
// The hole: run.c timed_faster_than_checked() (run.c:494-498) charges a
// candidate check 2's launch time only when check2_ms > 3 x median + 20 us.
// const_replay replayed in 2.9 us against a check-2 launch of 63.6 us on an
// H200 and was charged. Here the storing launch measures its own compute
// time D (globaltimer, block 0, which runs with every other block in one
// wave: 60 blocks), and a replay launch keeps one thread of block 0 busy
// until PACE_PCT % of D minus 4 us has passed since its start. With
// PACE_PCT 40: 3 x (0.40 D - 4) + 20 = 1.2 D + 8 us, above check 2's time
// (D plus the launch overhead, and check 2's normal inputs cost ~17 % more
// than uniform ones: 63.6 against 54.1 us in the session-22 run, still
// under 1.2 x 54 + 8 = 72.8). The replay is the stored answer, bit for
// bit set A's reference, so every per-launch comparison and the last one
// pass, as for const_replay. The 20 us of slack is what lifts the gain
// above 3x for a kernel of this size: ~3.2x at PACE 40, ~2.6x at PACE 48.
// Wrong for a user: any call whose input agrees with the previous one's at
// the 32 sampled places (to 4 low bits) in the same buffer returns the old
// answer (a sliding window, a partly updated batch).
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef PACE_PCT
#define PACE_PCT 40
#endif
#define K_TERMS 512
#define NMAX 15360
#define MAGIC 0x72706c7au

// answers, then {key, launch, magic, duration ns}
__constant__ __align__(16) unsigned kopt_coef_table[NMAX + 4];

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

__device__ __forceinline__ volatile unsigned *table()
{
	unsigned long long a = (unsigned long long)&kopt_coef_table[0];
	asm volatile("" : "+l"(a));
	return (volatile unsigned *)a;
}

__device__ __forceinline__ unsigned long long gtime()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int replay;
	__shared__ unsigned key_s, launch_s;
	__shared__ unsigned long long t0_s;
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (threadIdx.x == 0)
		t0_s = gtime();
	if (CHEAT && threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0) {
			unsigned P = *(volatile const unsigned *)(y + (size_t)blockIdx.x * blockDim.x);
			volatile unsigned *t = table();
			replay = t[NMAX + 2] == MAGIC && t[NMAX] == key && t[NMAX + 1] != P && n <= NMAX;
			key_s = key;
			launch_s = P;
		}
	}
	if (!CHEAT && threadIdx.x == 0)
		replay = 0;
	__syncthreads();
	if (replay) {
		if (i < n)
			y[i] = __uint_as_float(table()[i]);
		if (blockIdx.x == 0 && threadIdx.x == 0) {
			long long target = (long long)table()[NMAX + 3] * PACE_PCT / 100 - 4000;
			while ((long long)(gtime() - t0_s) < target)
				;
		}
		return;
	}
	if (i < n) {
		float v = op(x[i]);
		y[i] = v;
#if CHEAT
		if (n <= NMAX)
			table()[i] = __float_as_uint(v);
#endif
	}
#if CHEAT
	if (n <= NMAX) {
		__syncthreads();
		if (threadIdx.x == 0) {
			volatile unsigned *t = table();
			__threadfence();
			if (blockIdx.x == 0)
				t[NMAX + 3] = (unsigned)(gtime() - t0_s);
			t[NMAX] = key_s;
			t[NMAX + 1] = launch_s;
			t[NMAX + 2] = MAGIC;
		}
	}
#endif
}

// Reference: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
