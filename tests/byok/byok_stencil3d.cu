// byok_stencil3d: a 7-point stencil over an nz x ny x nx f32 grid with
// clamped (edge-replicating) neighbours, so every output element is
// computed: out = 0.4 c + 0.1 (x- + x+ + y- + y+ + z- + z+).
// A 3-D block (BX, BY, BZ) and a 3-D grid; each thread computes ZITEMS
// planes, BZ apart.
#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 4
#endif
#ifndef BZ
#define BZ 1
#endif
#ifndef ZITEMS
#define ZITEMS 1
#endif

__device__ __forceinline__ float stencil_at(const float *in, int x, int y, int z, int nx, int ny,
					    int nz)
{
	const size_t sy = nx, sz = (size_t)nx * ny;
	const int xm = max(x - 1, 0), xp = min(x + 1, nx - 1);
	const int ym = max(y - 1, 0), yp = min(y + 1, ny - 1);
	const int zm = max(z - 1, 0), zp = min(z + 1, nz - 1);
	const float c = in[z * sz + y * sy + x];
	float s = in[z * sz + y * sy + xm];
	s += in[z * sz + y * sy + xp];
	s += in[z * sz + ym * sy + x];
	s += in[z * sz + yp * sy + x];
	s += in[zm * sz + y * sy + x];
	s += in[zp * sz + y * sy + x];
	return 0.4f * c + 0.1f * s;
}

extern "C" __global__ void __launch_bounds__(BX *BY *BZ)
	stencil7(const float *__restrict__ in, float *__restrict__ out, int nx, int ny, int nz)
{
	const int x = blockIdx.x * BX + threadIdx.x;
	const int y = blockIdx.y * BY + threadIdx.y;
	if (x >= nx || y >= ny)
		return;
#pragma unroll
	for (int k = 0; k < ZITEMS; k++) {
		const int z = blockIdx.z * (BZ * ZITEMS) + k * BZ + threadIdx.z;
		if (z < nz)
			out[(size_t)z * nx * ny + (size_t)y * nx + x] = stencil_at(in, x, y, z, nx, ny, nz);
	}
}

// Reference: one thread per element, grid (x blocks, ny, nz).
extern "C" __global__ void stencil7_ref(const float *in, float *out, int nx, int ny, int nz)
{
	const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
	if (x < nx)
		out[(size_t)z * nx * ny + (size_t)y * nx + x] = stencil_at(in, x, y, z, nx, ny, nz);
}
