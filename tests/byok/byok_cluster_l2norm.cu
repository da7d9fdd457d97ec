// byok_cluster_l2norm: row-wise L2 normalisation of a 64 x 131071 f32
// matrix, y = x / ||x_row||, and norms[row] = ||x_row||.
//
// Rows are long and few, so each row is shared by a thread-block cluster of
// CL blocks (launch.cluster = (CL, 1, 1), grid = (CL, rows)): block rank r
// sums the squares of its contiguous chunk of the row, the blocks exchange
// their partial sums through distributed shared memory, and each block then
// scales its own chunk. Written with the sm_90 cluster intrinsics
// (__cluster_map_shared_rank, __cluster_barrier_arrive / _wait), not
// cooperative_groups.
//   MODE gather: every block reads all CL partials from its peers' shared
//                memory in rank order (the same sum in every block).
//   MODE atomic: every block atomically adds its partial into rank 0's
//                shared accumulator (DSMEM atomics), then reads it back.
// The second barrier (arrive after the last remote read, wait before the
// block exits) keeps a block's shared memory alive while peers read it.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef CL
#define CL 1
#endif
#define gather 1
#define atomic 2
#ifndef MODE
#define MODE gather
#endif
static_assert(BLOCK % 32 == 0, "whole warps");
static_assert(MODE == gather || MODE == atomic, "MODE is gather or atomic");

__device__ __forceinline__ void cluster_sync()
{
	__cluster_barrier_arrive();
	__cluster_barrier_wait();
}

// Block sum, valid in thread 0.
__device__ __forceinline__ float block_sum(float v)
{
	__shared__ float sh[BLOCK / 32];
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	float r = 0.f;
	if (threadIdx.x < 32) {
		r = threadIdx.x < BLOCK / 32 ? sh[threadIdx.x] : 0.f;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			r += __shfl_down_sync(0xffffffffu, r, o);
	}
	return r;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	l2norm_rows(const float *__restrict__ x, float *__restrict__ y, float *__restrict__ norms, int cols)
{
	__shared__ float part; // this block's sum of squares (gather) / the cluster's (atomic, rank 0)
	__shared__ float s_inv;
	const unsigned rank = __clusterRelativeBlockRank();
	const unsigned nrank = __clusterSizeInBlocks();
	const int chunk = (cols + nrank - 1) / nrank;
	const int lo = rank * chunk, hi = min(cols, lo + chunk);
	const size_t row = blockIdx.y;
	const float *xr = x + row * cols;
	float *yr = y + row * cols;

	float s = 0.f;
	for (int i = lo + threadIdx.x; i < hi; i += BLOCK)
		s = fmaf(xr[i], xr[i], s);
	s = block_sum(s);

#if MODE == gather
	if (threadIdx.x == 0)
		part = s;
	cluster_sync(); // every partial written
	if (threadIdx.x == 0) {
		float t = 0.f;
		for (unsigned r = 0; r < nrank; r++)
			t += *static_cast<const float *>(__cluster_map_shared_rank(&part, r));
		const float nrm = sqrtf(t);
		s_inv = 1.f / nrm;
		if (rank == 0)
			norms[row] = nrm;
	}
#else
	if (threadIdx.x == 0 && rank == 0)
		part = 0.f;
	cluster_sync(); // rank 0's accumulator is zero
	if (threadIdx.x == 0)
		atomicAdd(static_cast<float *>(__cluster_map_shared_rank(&part, 0)), s);
	cluster_sync(); // every partial added
	if (threadIdx.x == 0) {
		const float t = *static_cast<const float *>(__cluster_map_shared_rank(&part, 0));
		const float nrm = sqrtf(t);
		s_inv = 1.f / nrm;
		if (rank == 0)
			norms[row] = nrm;
	}
#endif
	__cluster_barrier_arrive(); // done reading peers' shared memory
	__syncthreads();
	const float inv = s_inv;
	for (int i = lo + threadIdx.x; i < hi; i += BLOCK)
		yr[i] = xr[i] * inv;
	__cluster_barrier_wait(); // no block leaves while a peer may still read it
}

// Reference: one block per row (no cluster), sum of squares in double.
extern "C" __global__ void l2norm_rows_ref(const float *x, float *y, float *norms, int cols)
{
	__shared__ double sh[256];
	__shared__ float s_nrm;
	const size_t row = blockIdx.x;
	double s = 0.0;
	for (int i = threadIdx.x; i < cols; i += blockDim.x)
		s += (double)x[row * cols + i] * x[row * cols + i];
	sh[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0.0;
		for (int k = 0; k < blockDim.x; k++)
			t += sh[k];
		s_nrm = (float)sqrt(t);
		norms[row] = s_nrm;
	}
	__syncthreads();
	for (int i = threadIdx.x; i < cols; i += blockDim.x)
		y[row * cols + i] = x[row * cols + i] / s_nrm;
}
