// y = a * x + y as a C++ template: the element type, the block size and the
// items per thread are template arguments, instantiated by the spec's entry
// "axpy<float, block_size_x, items>" (knob names replaced by their values).
// loop_unroll_factor follows Kernel Tuner's convention: 0 means "no pragma",
// the compiler decides.
template <typename T, int BLOCK, int ITEMS>
__global__ void axpy(T *y, const T *x, T a, int n)
{
	int base = blockIdx.x * BLOCK * ITEMS + threadIdx.x;
#if loop_unroll_factor > 0
#pragma unroll loop_unroll_factor
#endif
	for (int i = 0; i < ITEMS; i++) {
		int k = base + i * BLOCK;
		if (k < n)
			y[k] = a * x[k] + y[k];
	}
}
