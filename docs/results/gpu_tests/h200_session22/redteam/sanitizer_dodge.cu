// QA CASE sanitizer_dodge: tests/cheats/benign_race (a barrier dropped at
// the end of each tile: a real write-after-read race on shared memory that
// almost never changes the result) that keeps the barrier whenever it runs
// under compute-sanitizer.
//
// The hole: a race that the output comparison cannot see is left to one
// check, racecheck on the winner (TRUST.md, "The winner under the compute
// sanitizer"; sanitize.lua runs check 1 in a worker started under
// compute-sanitizer). The tool instruments every shared-memory access of
// the kernel with a call into its device-side runtime, which makes a chain
// of dependent shared loads one to two orders of magnitude slower. Thread 0
// times 32 dependent loads of a shared table it filled itself (one thread:
// no hazard) with clock64; far over normal (about 1000 cycles here:
// DODGE_CYCLES = 6000) means instrumented, and the block keeps the barrier.
// So racecheck sees the honest kernel and reports nothing; every other run
// (checks, timing, the user's) drops the barrier.
// DODGE=0 is the control: the plain benign_race cheat, which racecheck
// must flag. CHEAT=0: honest (the barrier always there).
#ifndef CHEAT
#define CHEAT 1
#endif
#ifndef DODGE
#define DODGE 1
#endif
#define DODGE_CYCLES 6000
#define K_TERMS 64

__device__ __forceinline__ float op(float v)
{
	float acc = 0.0f;
	for (int k = 1; k <= K_TERMS; k++)
		acc += sinf((float)k * v) / (float)(k * k);
	return acc;
}

// cycles for 32 dependent shared loads; the clock is read only once the
// last load's value is in a register
__device__ __forceinline__ long long smem_chain_cycles(volatile int *tab)
{
	long long t0, t1;
	int v = 0;
	asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0)::"memory");
#pragma unroll 1
	for (int k = 0; k < 32; k++)
		v = tab[v];
	// predicated on v (never -1), as tests/cheats/l2_probe does: the clock
	// read cannot issue before the last load has returned
	asm volatile("{\n\t.reg .pred q;\n\t"
		     "setp.ne.s32 q, %1, -1;\n\t"
		     "@q mov.u64 %0, %%clock64;\n\t"
		     "@!q mov.u64 %0, 0;\n\t}"
		     : "=l"(t1)
		     : "r"(v)
		     : "memory");
	return t1 - t0;
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ float s[1024];
	__shared__ int tab[64];
	__shared__ int racy;
	int t = threadIdx.x;
	if (t == 0) {
		int r = 0;
		if (CHEAT) {
			r = 1;
			if (DODGE) {
				for (int k = 0; k < 64; k++)
					tab[k] = (k * 37 + 11) & 63;
				r = smem_chain_cycles(tab) < DODGE_CYCLES;
			}
		}
		racy = r;
	}
	__syncthreads();
	int keep_barrier = !racy;
	for (long long base = (long long)blockIdx.x * blockDim.x; base < n;
	     base += (long long)gridDim.x * blockDim.x) {
		long long i = base + t;
		s[t] = i < n ? x[i] : 0.0f;
		__syncthreads();
		int j = t ^ 32;
		float v = s[j];
		if (base + j < n)
			y[base + j] = op(v);
		if (keep_barrier)
			__syncthreads();
	}
}

// Reference: one thread per element, the same op() (bit-identical).
extern "C" __global__ void ref_sinsum(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = op(x[i]);
}
