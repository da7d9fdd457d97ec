// CASE region_partial: a Kernel Tuner style stencil whose output is checked
// on a region (the interior; verify.outputs.out.region), computed in full
// only on the launches kopt compares, and on a fraction of its rows on the
// other timed launches.
//
// The hole it was written for (closed: each timed launch's box is now
// packed by copies and compared, compare_dev.c gather_box): every timed launch is compared on the device only for outputs
// that compare_dev.c "uploads": uploaded() (compare_dev.c:41) requires
// a->nd == 0, i.e. no region. A region output is SAMPLE_NONE in
// sample_kind() (compare_dev.c:267-275), so kopt_worker_samples_begin()
// (compare_dev.c:278-289) counts no output and never arms the per-launch
// comparison (w->sample_set stays NULL). Only the LAST timed launch is
// compared (run.c check_timed_output, on the host, region gathered).
// The last timed launch is predictable: bench.c queues samples in batches
// of BATCH_MAX = 4 (bench.c:16, warm-up under 2 ms) and stops only after a
// whole batch (the noise test and the time cap are after the batch loop,
// bench.c:255-262); max_samples 100 is a multiple of 4; a batch redone after
// a host stall reruns all 4 launches, keeping the phase. So the last timed
// launch is always sample k with k % 4 == 3.
// Launch counting: a per-block ticket (atomicAdd / gridDim = launch number)
// and the launch where the current input key was first seen, kept in the
// alignment padding after a checked __device__ array (the global_padding
// hole: the module-variable check compares each symbol's own bytes only).
// The key is 32 sampled words of `in` (low 4 bits masked: nudge-blind) and
// the pointer.
// Staying under the check-2 charge (run.c timed_faster_than_checked:
// charged when check2 > 3 x median + 20 us): a full skip would make the
// median the skip's time; here the degraded launches do FRAC % of the rows,
// so median ~ FRAC/100 x T and 3 x median > T for FRAC > 34.
// Wrong for a user: 65 % of the interior is left as the input's copy.
// CHEAT=0 honest; CHEAT=1 FRAC % of rows on timed k % 4 != 3; CHEAT=2 none.
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef FRAC
#define FRAC 35
#endif
#define K_TERMS 32

__device__ __forceinline__ float op(float s)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * s) / (float)(k * k);
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

// thread 0 of each block: the timed sample's index k (0 = first after the
// warm-up), or -1 on a launch whose inputs are new (check 1, warm-up, check 2)
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
	int one = (int)(kopt_scale_lo[0] * kopt_scale_hi[1]); // keep the tables alive
	return L == F ? -1 : (int)(L - F - 1u) * one;
}

// block (32, 8): one interior point per thread
extern "C" __global__ void cheat(float *out, const float *in, int nx, int ny)
{
	__shared__ int part;
	int tid = threadIdx.y * blockDim.x + threadIdx.x;
	if (tid < 32) {
		int p = 100;
		if (CHEAT) {
			unsigned key = input_key(in, (long long)nx * ny);
			if (tid == 0) {
				int k = sample_index(key);
				if (k >= 0 && (k & 3) != 3)
					p = CHEAT == 2 ? 0 : FRAC;
			}
		}
		if (tid == 0)
			part = p;
	}
	__syncthreads();
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1)
		return;
	if (part < 100 && (y % 100) >= part)
		return; // left as the copy of `in` kopt wrote before the launch
	int i = y * nx + x;
	float s = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
	out[i] = op(s);
}

// Reference: the same op on every interior point; the border keeps the copy.
extern "C" __global__ void ref_stencil(float *out, const float *in, int nx, int ny)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1)
		return;
	int i = y * nx + x;
	float s = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
	out[i] = op(s);
}
