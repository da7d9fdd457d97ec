// The obviously correct sum: one block of 1024 threads, strided partial sums
// in double, then a tree in shared memory.
extern "C" __global__ void reduce_ref(float *out, const float *in, int n)
{
	__shared__ double s[1024];
	double acc = 0.0;
	for (int i = threadIdx.x; i < n; i += 1024)
		acc += in[i];
	s[threadIdx.x] = acc;
	__syncthreads();
	for (int o = 512; o > 0; o /= 2) {
		if (threadIdx.x < o)
			s[threadIdx.x] += s[threadIdx.x + o];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[0] = (float)s[0];
}
