// Planted faults: one kernel per way a candidate can cheat or break, selected
// by the FAULT knob. The task is y[i] = 2*|x[i]| + 1 over n floats; only
// FAULT=0 (and the slower FAULT=15) compute it. The cuda backend must give
// each the status listed in faults.json's "help" and in
// tests/lua/test_gpu_faults.lua. Not a kernel to learn from.
#ifndef FAULT
#define FAULT 0
#endif
#if FAULT == 21
#include <cuda_fp16.h>
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

__device__ unsigned kopt_fault_calls;   // FAULT 13, 17: counts launches
__device__ float kopt_fault_memo[1 << 22]; // FAULT 16: results of the first launch
__device__ int kopt_fault_memo_ready;
__device__ unsigned kopt_fault_ticket;  // FAULT 23: declared in kernel.state, reset by kopt
__device__ unsigned long long kopt_fault_key; // FAULT 24: the inputs of the previous launch
__device__ unsigned kopt_fault_done;          // FAULT 24: blocks of this launch finished

__device__ __forceinline__ float op(float v) { return 2.0f * fabsf(v) + 1.0f; }

extern "C" __global__ void
#if FAULT == 10
__launch_bounds__(32) // launched with BLOCK threads: impossible -> invalid
#endif
faults(float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
#if FAULT == 12
	// race: read another warp's shared slot without a barrier; warps are
	// staggered so the slot is usually not written yet
	__shared__ float s[BLOCK];
	int t = threadIdx.x;
	long long start = clock64();
	while (clock64() - start < (long long)(t / 32) * 20000) {}
	s[t] = i < n ? op(x[i]) : 0.0f;
	int src = (t + 32) % blockDim.x;
	int j = blockIdx.x * blockDim.x + src;
	if (j < n) y[j] = s[src];
	return;
#endif
	if (i >= n) return;
#if FAULT == 0 || FAULT == 9 || FAULT == 10
	y[i] = op(x[i]);                       // correct (9, 10: launch is impossible)
#elif FAULT == 1
	// writes nothing
#elif FAULT == 2
	if (i < 1024) y[i] = op(x[i]);         // only the first row of 1024
#elif FAULT == 3
	x[i] = op(x[i]);                       // right answer, wrong buffer
#elif FAULT == 4
	y[i] = op(x[i]); x[i] = 0.0f;          // modifies its input
#elif FAULT == 5
	y[i] = i == n / 2 ? __int_as_float(0x7fc00000) : op(x[i]);  // one NaN
#elif FAULT == 6
	y[i] = op(x[i + (1 << 30)]);           // reads far out of bounds
#elif FAULT == 7
	if (i == n / 3) asm volatile("trap;");
	y[i] = op(x[i]);
#elif FAULT == 8
	for (;;) __nanosleep(1000);            // never finishes
#elif FAULT == 11
	y[i] = 2.0f * x[i] + 1.0f;             // right only for x >= 0
#elif FAULT == 13
	unsigned c = 0;
	if (i == 0) c = atomicAdd(&kopt_fault_calls, 1u);
	// right on the first launch of a loaded module, then only block 0 writes
	if (c == 0 && (kopt_fault_calls <= 1 || blockIdx.x == 0)) y[i] = op(x[i]);
#elif FAULT == 14
	float4 v = *reinterpret_cast<const float4 *>(x + 1 + 4 * (i / 4));  // misaligned
	y[i] = op(x[i]) + 0.0f * (v.x + v.y + v.z + v.w);
#elif FAULT == 15
	volatile float *yy = y;                // correct but slow: 32 stores
	for (int k = 0; k < 32; k++) yy[i] = op(x[i]);
#elif FAULT == 16
	// memoizes: the first launch computes and keeps its results; later
	// launches copy them back without reading x
	if (kopt_fault_memo_ready) { y[i] = kopt_fault_memo[i]; return; }
	y[i] = kopt_fault_memo[i] = op(x[i]);
	__threadfence();
	if (i == n - 1) kopt_fault_memo_ready = 1;
#elif FAULT == 17
	if (i == 0) atomicAdd(&kopt_fault_calls, 1u);  // always right, but counts its launches
	y[i] = op(x[i]);
#elif FAULT == 18
	y[i] = op(x[i]);
	if (i < 1024) y[n + i] = 0.0f;         // 4 KB past the end of y
#elif FAULT == 19
	y[i] = op(x[i]);
	if (i < 64) y[i - 64] = 0.0f;          // 256 B before the start of y
#elif FAULT == 20
	y[i] = op(x[i]);
	if (i < 16) x[n + i] = 1.0f;           // past the end of its input x
#elif FAULT == 21
	__half h = __float2half(x[i]);         // computes an f32 problem in f16
	y[i] = __half2float(__hadd(__hmul(__float2half(2.0f), __habs(h)), __float2half(1.0f)));
#elif FAULT == 22
	y[i] = op(x[i]);                       // correct; the spec declares 1000x its work
#elif FAULT == 23
	// a ticket counter the spec declares as state (as in a last-block-done
	// reduction): right only when kopt resets it before every launch
	unsigned t = atomicAdd(&kopt_fault_ticket, 1u);
	y[i] = t < (unsigned)n ? op(x[i]) : 0.0f;
#elif FAULT == 24
	// skips its work on timed launches: a launch whose inputs match the
	// previous launch's (32 sampled words, low bits masked so the timing
	// nudge does not change them) writes y = x; the first launch on new
	// inputs computes, so check 1 and check 2 pass. The last block to finish
	// records the key, after every block has read it (n is a multiple of
	// BLOCK: no thread leaves early).
	__shared__ int skip;
	__shared__ unsigned long long key;
	if (threadIdx.x == 0) {
		unsigned long long k = 0;
		for (int s = 0; s < 32; s++) k = k * 31 + (__float_as_uint(x[(n / 32) * s]) & ~0xFu);
		key = k;
		skip = k == kopt_fault_key;
	}
	__syncthreads();
	y[i] = skip ? x[i] : op(x[i]);
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence();
		if (atomicAdd(&kopt_fault_done, 1u) == gridDim.x - 1) {
			kopt_fault_key = key;
			kopt_fault_done = 0;
		}
	}
#endif
}

extern "C" __global__ void faults_ref(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = 2.0f * fabsf(x[i]) + 1.0f;
}
