// A 1-D convolution whose filter size is a knob (FILTER): it changes the
// problem (the output has n - FILTER + 1 elements), so the reference sees it
// too (the spec's reference.knobs). The filter lives in constant memory.
__constant__ float filter[FILTER];

extern "C" __global__ void conv1d(float *out, const float *in, int n)
{
	int i = (blockIdx.x * block_size_x + threadIdx.x) * items;
#pragma unroll
	for (int t = 0; t < items; t++, i++) {
		if (i >= n - FILTER + 1)
			return;
		float s = 0.0f;
#pragma unroll
		for (int k = 0; k < FILTER; k++)
			s += filter[k] * in[i + k];
		out[i] = s;
	}
}
