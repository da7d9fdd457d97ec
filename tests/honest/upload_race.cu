// upload_race: y = 3 a + b - c over three 1 MiB inputs the kernel only
// reads. Every input set is drawn on the host and uploaded, then hashed on
// the worker's stream before its first launch; a kernel this plain is
// honest, so any "modified its input" is the worker's own upload racing
// its hash. (A copy of a few MiB from pageable memory may return before
// its DMA lands; one of 64 MiB did not show it on an H200.)
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
    combine(const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ c,
	    float *__restrict__ y, int n)
{
	int i0 = (blockIdx.x * BLOCK + threadIdx.x) * VEC;
#pragma unroll
	for (int k = 0; k < VEC; k++) {
		int i = i0 + k;
		if (i < n)
			y[i] = 3.0f * a[i] + b[i] - c[i];
	}
}

extern "C" __global__ void combine_ref(const float *__restrict__ a, const float *__restrict__ b,
				       const float *__restrict__ c, float *__restrict__ y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = 3.0f * a[i] + b[i] - c[i];
}
