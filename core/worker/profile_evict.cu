// The GPU worker's L2 eviction before a profiled launch (worker_profile.c),
// embedded as PTX by tools/gen_ptx_header.sh profile_evict compute_75.
//
// Reads a never-written buffer twice the L2 size with L2-only loads: every
// dirty line left by earlier work (output poisoning, memset flushes) is
// written back now instead of during the profiled kernel, and the L2 ends up
// holding clean lines the kernel does not use — what Nsight Compute's
// --cache-control all gives, so DRAM write counts compare.
extern "C" __global__ void kopt_l2_evict(const uint4 *p, unsigned long long n, unsigned int *sink)
{
	uint4 acc = make_uint4(0u, 0u, 0u, 0u);
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		uint4 v = __ldcg(p + i);
		acc.x ^= v.x;
		acc.y ^= v.y;
		acc.z ^= v.z;
		acc.w ^= v.w;
	}
	// keeps the loads alive; the buffer's contents never match
	if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u && acc.x == 0x7f4a7c15u)
		*sink = 1u;
}
