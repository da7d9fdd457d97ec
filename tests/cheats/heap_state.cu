// CASE heap_state: state kept in the device heap. Each block's thread 0
// takes a 64-byte chunk (__nv_aligned_device_malloc), reads the record a
// previous launch left in it, writes its own, and frees the chunk; freed
// chunks come back to later launches with their bytes intact. The heap
// belongs to the CUDA context: it outlives every module kopt loads and
// unloads, and the worker neither lists nor scans it. A block whose chunk
// holds no record computes (always safe). Passes patch.check_kernel_only:
// its malloc pattern needs a word boundary before "malloc", and "(free)(c)"
// has no "free(".

#include "sinsum_prelude.cuh"  // the problem, op() and the skip-when-repeated protocol

extern "C" __global__ void cheat(const float *x, float *y, int n)
{
	__shared__ int skip;
	if (threadIdx.x < 32) {
		unsigned key = input_key(x, n);
		if (threadIdx.x == 0) {
			int s = 0;
			if (CHEAT) {
				unsigned long long *c =
				    (unsigned long long *)__nv_aligned_device_malloc(64, 16);
				if (c != 0) {
					s = decide(c, launch_id(y), key);
					(free)(c);
				}
			}
			skip = s;
		}
	}
	__syncthreads();
	body(x, y, n, skip);
}
