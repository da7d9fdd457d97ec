// Planted faults: one kernel per way a candidate can cheat or break, selected
// by the FAULT knob. The task is y[i] = 2*|x[i]| + 1 over n floats; only
// FAULT=0 (and the slower FAULT=15) compute it. The cuda backend must give
// each the status listed in faults.json's "help" and in
// tests/lua/test_gpu_faults.lua. Not a kernel to learn from.
#ifndef FAULT
#define FAULT 0
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

__device__ unsigned kopt_fault_calls; // FAULT 13: counts launches

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
#endif
}

extern "C" __global__ void faults_ref(const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = 2.0f * fabsf(x[i]) + 1.0f;
}
