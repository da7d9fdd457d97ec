// A sum in two kernels, run as one pipeline: reduce_partial leaves one sum
// per block in `partial` (a scratch buffer), reduce_final adds them up.
// block_size_x and items are Kernel Tuner-style defines; the final kernel
// runs as one block of final_block threads.
extern "C" __global__ void reduce_partial(float *partial, const float *in, int n)
{
	__shared__ float s[block_size_x];
	int base = blockIdx.x * block_size_x * items + threadIdx.x;
	float acc = 0.0f;
#pragma unroll
	for (int k = 0; k < items; k++) {
		int i = base + k * block_size_x;
		if (i < n)
			acc += in[i];
	}
	s[threadIdx.x] = acc;
	__syncthreads();
	for (int o = block_size_x / 2; o > 0; o /= 2) {
		if (threadIdx.x < o)
			s[threadIdx.x] += s[threadIdx.x + o];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s[0];
}

extern "C" __global__ void reduce_final(float *out, const float *partial, int blocks)
{
	__shared__ float s[final_block];
	float acc = 0.0f;
	for (int i = threadIdx.x; i < blocks; i += final_block)
		acc += partial[i];
	s[threadIdx.x] = acc;
	__syncthreads();
	for (int o = final_block / 2; o > 0; o /= 2) {
		if (threadIdx.x < o)
			s[threadIdx.x] += s[threadIdx.x + o];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[0] = s[0];
}
