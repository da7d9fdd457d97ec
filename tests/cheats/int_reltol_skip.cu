// Caught since an integer output with a tolerance is compared as doubles on
// every timed launch (compare_dev.c SAMPLE_INT; 1.78x on an H200 before).
// CASE int_reltol_skip: an integer output under a spec-wide relative
// tolerance is never compared on the timed launches but the last.
//
// The problem: y[i] = rint(4096 * sum_{k=1..64} sinf(k x[i]) / k^2) as i32,
// x uniform01 (tests/cheats/int_batch_skip's vehicle). The spec sets
// "tolerance": {"rel_l2": 1e-6} (a user who wants "near exact" and writes
// one tolerance for the whole spec, or per output "verify.outputs.y.rel_l2").
//
// The hole: compare_dev.c sample_kind(): an output is SAMPLE_BITS only when
// its tolerance is 0 and it has no max-abs bound, or when it is an integer
// with a max-abs bound below 1. An integer output with a relative tolerance
// > 0 and no max_abs falls through to `device_type(a->type) >= 0 ?
// SAMPLE_FLOAT : SAMPLE_NONE`, and device_type() knows f32/f16/bf16/f64
// only: SAMPLE_NONE. So no timed launch but the last is compared (no
// per-launch comparison, no less_exact_when_timed): int_batch_skip's skip
// is caught only because that spec has no tolerance. docs/TRUST.md step 3
// says integer outputs are compared word for word on every timed launch
// unless the spec gives a max-abs bound; a rel_l2 bound is not mentioned.
// Only the check-2/3 charge (2x + 4 us) bounds the gain, so the cheat
// computes PCT % of the elements on the timed launches that are not a
// batch's tail (k % 4 != 3: the last timed launch always is one) and leaves
// the rest as the poison. PCT=55: ~1.8x, uncharged. PCT=20: charged (control).
// CHEAT=0: honest.
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef PCT
#define PCT 55
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

// warp 0: the input pointer and 32 sampled words, low 4 bits masked (the
// nudge flips bit 0 of one word per sample: the same key on every timed launch)
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

// storage: the alignment padding after a checked module variable (the
// module-variable check compares the variables, not the holes between them)
__device__ __align__(256) unsigned kopt_scale_lo[2] = {1u, 0u};
__device__ __align__(256) unsigned kopt_scale_hi[2] = {0u, 1u};

// thread 0 of each block: 1 when this launch is a timed one that is not a
// batch's tail (k % 4 != 3), else 0 (new inputs: check 1, the warm-up, check 2, 3)
__device__ __forceinline__ int partial_decision(unsigned key)
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
	if (L == F)
		return 0;
	unsigned k = (L - F - 1u) & 3u;
	return (k != 3u) * (int)(kopt_scale_lo[0] * kopt_scale_hi[1]);
}

extern "C" __global__ void cheat(const float *x, int *y, int n)
{
	__shared__ int part;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0)
			part = CHEAT ? partial_decision(key) : 0;
	}
	__syncthreads();
	int lim = part ? (int)((long long)n * PCT / 100) : n;
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < lim; i += stride)
		y[i] = __float2int_rn(4096.0f * op(x[i]));
}

// Reference: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_int(const float *x, int *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __float2int_rn(4096.0f * op(x[i]));
}
