// LayerNorm over everything but the first dimension, nn.LayerNorm(shape) of a
// (rows, L) f32 view, elementwise affine w, b of length L:
//   y = (x - mean) / sqrt(var + eps) * w + b,  biased variance, per row.
//
// KernelBench's rows are few and long (16 rows of 4 M elements), so one
// block per row starves the GPU. Here a thread block cluster of CLUSTER
// blocks shares a row: each block sums its chunk (sum and sum of squares,
// per thread in f32, then in f64), the blocks of the cluster read each
// other's totals through distributed shared memory, and each normalises its
// own chunk. CLUSTER = 1 is the one-block-per-row kernel.
// Requires L % (CLUSTER * VEC) == 0. Launch: grid (CLUSTER, rows), block BLOCK_SIZE.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 512
#endif
#ifndef CLUSTER
#define CLUSTER 8
#endif
#ifndef VEC
#define VEC 4
#endif

static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");
static_assert(BLOCK_SIZE % 32 == 0, "whole warps");

struct __align__(sizeof(float) * VEC) vec_t {
	float v[VEC];
};

#if CLUSTER > 1
#define CLUSTER_ATTR __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_ATTR
#endif

// The cluster primitives in PTX (sm_90), without cooperative_groups, whose
// header leaves hundreds of module variables in the CUBIN.
// Every thread of every block of the cluster arrives, then waits; the
// release/acquire pair orders shared-memory writes before the barrier with
// the reads after it.
__device__ __forceinline__ void cluster_sync()
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// *p in the shared memory of block `rank` of this cluster (distributed
// shared memory).
__device__ __forceinline__ double peer_load(const double *p, unsigned rank)
{
	unsigned local = (unsigned)__cvta_generic_to_shared(p), remote;
	double v;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
	asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(remote) : "memory");
	return v;
}

extern "C" __global__ void CLUSTER_ATTR __launch_bounds__(BLOCK_SIZE)
	layernorm(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ b,
		  float *__restrict__ y, int rows, int L, float eps)
{
	__shared__ double warp_part[BLOCK_SIZE / 32][2];
	__shared__ double total[2]; /* this block's sum and sum of squares, read by the cluster */
	__shared__ float stats[2];  /* mean, 1/std of the row */
	(void)rows;
	const int row = blockIdx.y, rank = blockIdx.x;
	const long chunk = L / CLUSTER;
	const long base = (long)row * L + rank * chunk;
	const vec_t *xv = reinterpret_cast<const vec_t *>(x + base);
	const int nvec = (int)(chunk / VEC);

	float s = 0.0f, ss = 0.0f;
	for (int i = threadIdx.x; i < nvec; i += BLOCK_SIZE) {
		vec_t v = xv[i];
#pragma unroll
		for (int k = 0; k < VEC; k++) {
			s += v.v[k];
			ss += v.v[k] * v.v[k];
		}
	}
	double ds = s, dss = ss;
#pragma unroll
	for (int off = 16; off > 0; off /= 2) {
		ds += __shfl_xor_sync(0xffffffffu, ds, off);
		dss += __shfl_xor_sync(0xffffffffu, dss, off);
	}
	if (threadIdx.x % 32 == 0) {
		warp_part[threadIdx.x / 32][0] = ds;
		warp_part[threadIdx.x / 32][1] = dss;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		double a = 0.0, q = 0.0;
		for (int k = 0; k < BLOCK_SIZE / 32; k++) {
			a += warp_part[k][0];
			q += warp_part[k][1];
		}
		total[0] = a;
		total[1] = q;
	}
#if CLUSTER > 1
	cluster_sync(); /* every block's total is written */
	if (threadIdx.x == 0) {
		double a = 0.0, q = 0.0;
		for (unsigned r = 0; r < CLUSTER; r++) {
			a += peer_load(&total[0], r);
			q += peer_load(&total[1], r);
		}
		const double mean = a / L, var = q / L - mean * mean;
		stats[0] = (float)mean;
		stats[1] = (float)(1.0 / sqrt(var + (double)eps));
	}
	cluster_sync(); /* no block leaves while a peer may still read its total */
#else
	__syncthreads();
	if (threadIdx.x == 0) {
		const double mean = total[0] / L, var = total[1] / L - mean * mean;
		stats[0] = (float)mean;
		stats[1] = (float)(1.0 / sqrt(var + (double)eps));
	}
	__syncthreads();
#endif
	const float mean = stats[0], rstd = stats[1];
	const vec_t *wv = reinterpret_cast<const vec_t *>(w + rank * chunk);
	const vec_t *bv = reinterpret_cast<const vec_t *>(b + rank * chunk);
	vec_t *yv = reinterpret_cast<vec_t *>(y + base);
	for (int i = threadIdx.x; i < nvec; i += BLOCK_SIZE) {
		vec_t v = xv[i], ww = wv[i], bb = bv[i], o;
#pragma unroll
		for (int k = 0; k < VEC; k++)
			o.v[k] = (v.v[k] - mean) * rstd * ww.v[k] + bb.v[k];
		yv[i] = o;
	}
}
