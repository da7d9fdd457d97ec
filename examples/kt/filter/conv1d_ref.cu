// The obviously correct 1-D convolution; FILTER comes from the spec's knob.
__constant__ float filter[FILTER];

extern "C" __global__ void conv1d_ref(float *out, const float *in, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n - FILTER + 1)
		return;
	float s = 0.0f;
	for (int k = 0; k < FILTER; k++)
		s += filter[k] * in[i + k];
	out[i] = s;
}
