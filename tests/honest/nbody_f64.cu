// nbody_f64: all-pairs gravitational accelerations in double precision,
// a long (~5 ms) kernel with long f64 accumulations:
//   acc[i] = sum_j m_j (r_j - r_i) / (|r_j - r_i|^2 + eps2)^(3/2)
// (j = i adds zero). pos is [N, 3], mass [N]. The classic shared-memory
// tiling: each block stages BLOCK bodies at a time; each thread owns one
// body (SPLIT 1), or two threads own one body and take every other body
// of each tile, their sums added at the end (SPLIT 2: another summation
// order, off by a few ulps, within f64's 1e-12). The interaction is one
// helper with explicit rounding, shared with the reference.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef SPLIT
#define SPLIT 1
#endif

__device__ __forceinline__ void interact(double xi, double yi, double zi, double xj, double yj, double zj,
					 double mj, double eps2, double &ax, double &ay, double &az)
{
	const double dx = __dsub_rn(xj, xi), dy = __dsub_rn(yj, yi), dz = __dsub_rn(zj, zi);
	const double r2 = __fma_rn(dx, dx, __fma_rn(dy, dy, __fma_rn(dz, dz, eps2)));
	const double inv = rsqrt(r2);
	const double s = __dmul_rn(mj, __dmul_rn(inv, __dmul_rn(inv, inv)));
	ax = __fma_rn(s, dx, ax);
	ay = __fma_rn(s, dy, ay);
	az = __fma_rn(s, dz, az);
}

struct __align__(32) body {
	double x, y, z, m;
};

extern "C" __global__ void __launch_bounds__(BLOCK)
	nbody(const double *__restrict__ pos, const double *__restrict__ mass, double *__restrict__ acc, int n, double eps2)
{
	__shared__ body tile[BLOCK];
	const int bodies_per_block = BLOCK / SPLIT;
	const int i = blockIdx.x * bodies_per_block + threadIdx.x / SPLIT;
	const int part = threadIdx.x % SPLIT;
	const bool live = i < n;
	const double xi = live ? pos[3 * i] : 0.0, yi = live ? pos[3 * i + 1] : 0.0, zi = live ? pos[3 * i + 2] : 0.0;
	double ax = 0.0, ay = 0.0, az = 0.0;
	for (int j0 = 0; j0 < n; j0 += BLOCK) {
		const int j = j0 + threadIdx.x;
		tile[threadIdx.x] = j < n ? body{pos[3 * j], pos[3 * j + 1], pos[3 * j + 2], mass[j]} : body{0.0, 0.0, 0.0, 0.0};
		__syncthreads();
		const int cnt = min(BLOCK, n - j0);
#pragma unroll 4
		for (int k = part; k < cnt; k += SPLIT) {
			const body b = tile[k];
			interact(xi, yi, zi, b.x, b.y, b.z, b.m, eps2, ax, ay, az);
		}
		__syncthreads();
	}
#if SPLIT == 2
	ax = __dadd_rn(ax, __shfl_down_sync(0xffffffffu, ax, 1));
	ay = __dadd_rn(ay, __shfl_down_sync(0xffffffffu, ay, 1));
	az = __dadd_rn(az, __shfl_down_sync(0xffffffffu, az, 1));
#endif
	if (live && part == 0) {
		acc[3 * i] = ax;
		acc[3 * i + 1] = ay;
		acc[3 * i + 2] = az;
	}
}

// Reference: one thread per body, bodies read from global memory in order.
extern "C" __global__ void nbody_ref(const double *pos, const double *mass, double *acc, int n, double eps2)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	double ax = 0.0, ay = 0.0, az = 0.0;
	for (int j = 0; j < n; j++)
		interact(pos[3 * i], pos[3 * i + 1], pos[3 * i + 2], pos[3 * j], pos[3 * j + 1], pos[3 * j + 2], mass[j],
			 eps2, ax, ay, az);
	acc[3 * i] = ax;
	acc[3 * i + 1] = ay;
	acc[3 * i + 2] = az;
}
