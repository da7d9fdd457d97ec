// stencil3d: one Jacobi step of the 3-D heat equation, 7-point stencil,
// on the interior of an nz x ny x nx f32 grid (the boundary is a Dirichlet
// condition: not computed). Two specs share the kernel:
//   stencil3d_region.json: out is a fresh output; only the interior is
//     written and compared (verify.outputs.out.region); the boundary keeps
//     kopt's poison;
//   stencil3d_inout.json: out starts as a copy of u ("init": "copy:u",
//     Kernel Tuner style); the kernel writes the interior, the boundary
//     keeps u's values, and the whole buffer is compared.
// 2.5-D blocking: a BX x BY block of threads marches over ZC z-planes,
// keeping the column (z-1, z, z+1) in registers; x/y neighbours come from
// global memory (L1). The point update is one helper with explicit
// rounding (no contraction differences), shared with the reference, so the
// kernel matches it bit for bit.
#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 8
#endif
#ifndef ZC
#define ZC 8
#endif

__device__ __forceinline__ float heat_point(float c, float xm, float xp, float ym, float yp, float zm, float zp)
{
	float s = __fadd_rn(__fadd_rn(__fadd_rn(xm, xp), __fadd_rn(ym, yp)), __fadd_rn(zm, zp));
	return __fmaf_rn(0.4f, c, __fmul_rn(0.1f, s));
}

extern "C" __global__ void __launch_bounds__(BX *BY)
	heat7(float *__restrict__ out, const float *__restrict__ u, int nx, int ny, int nz)
{
	const int x = blockIdx.x * BX + threadIdx.x;
	const int y = blockIdx.y * BY + threadIdx.y;
	const int z0 = 1 + blockIdx.z * ZC;
	const int z1 = min(z0 + ZC, nz - 1);
	if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1 || z0 >= z1)
		return;
	const size_t sy = nx, sz = (size_t)nx * ny;
	size_t at = (size_t)z0 * sz + (size_t)y * sy + x;
	float below = u[at - sz], here = u[at];
	for (int z = z0; z < z1; z++, at += sz) {
		const float above = u[at + sz];
		out[at] = heat_point(here, u[at - 1], u[at + 1], u[at - sy], u[at + sy], below, above);
		below = here;
		here = above;
	}
}

// Reference: one thread per interior point.
extern "C" __global__ void heat7_ref(float *out, const float *u, int nx, int ny, int nz)
{
	const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
	if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1 || z < 1 || z >= nz - 1)
		return;
	const size_t sy = nx, sz = (size_t)nx * ny, at = (size_t)z * sz + (size_t)y * sy + x;
	out[at] = heat_point(u[at], u[at - 1], u[at + 1], u[at - sy], u[at + sy], u[at - sz], u[at + sz]);
}
