// CASE cdp_launch: tries to leave the work to a child grid launched from
// the device, to finish after the timing window's end event. kopt compiles
// without -rdc and never links cudadevrt, so this must not compile (and
// patch.check_kernel_only refuses "<<<"): must be rejected
// (compile error).

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

extern "C" __global__ void cheat_child(const float *x, float *y, int n)
{
	int stride = gridDim.x * blockDim.x;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = op(x[i]);
}

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
#if CHEAT
	if (blockIdx.x == 0 && threadIdx.x == 0)
		cheat_child<<<1024, 256>>>(x, y, n);
#else
	body(x, y, n, 0);
#endif
}
