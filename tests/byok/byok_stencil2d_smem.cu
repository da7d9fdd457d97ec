// byok_stencil2d_smem: a radius-2 cross stencil (9 points: centre, +-1 and
// +-2 in x and in y) on a 777 x 1000 f32 grid (ny x nx, neither a multiple
// of a block dimension), clamp-to-edge at the borders:
//   out = C0*c + C1*(w1 + e1 + n1 + s1) + C2*(w2 + e2 + n2 + s2).
// 2-D blocks of BX x BY threads; each block stages a (BY*TY + 4) x (BX + 4)
// tile with its halo in static shared memory (a cooperative strided load,
// clamped indices), then each thread computes TY outputs down a column.
// Partial tiles at the right and bottom edges are masked.
#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 8
#endif
#ifndef TY
#define TY 1
#endif
#define R 2
#define TILE_W (BX + 2 * R)
#define TILE_H (BY * TY + 2 * R)

#define C0 0.4f
#define C1 0.1f
#define C2 0.05f

__device__ __forceinline__ float cross9(float c, float w1, float e1, float n1, float s1, float w2, float e2,
					float n2, float s2)
{
	return C0 * c + C1 * (((w1 + e1) + n1) + s1) + C2 * (((w2 + e2) + n2) + s2);
}

extern "C" __global__ void __launch_bounds__(BX * BY)
	stencil2d(const float *__restrict__ in, float *__restrict__ out, int nx, int ny)
{
	__shared__ float tile[TILE_H][TILE_W + 1]; // +1: no bank conflicts down columns
	const int x0 = blockIdx.x * BX - R, y0 = blockIdx.y * (BY * TY) - R;
	const int tid = threadIdx.y * BX + threadIdx.x;
	for (int i = tid; i < TILE_W * TILE_H; i += BX * BY) {
		const int ty = i / TILE_W, tx = i % TILE_W;
		const int gx = min(max(x0 + tx, 0), nx - 1);
		const int gy = min(max(y0 + ty, 0), ny - 1);
		tile[ty][tx] = in[(size_t)gy * nx + gx];
	}
	__syncthreads();
	const int gx = blockIdx.x * BX + threadIdx.x;
	if (gx >= nx)
		return;
	const int sx = threadIdx.x + R;
#pragma unroll
	for (int k = 0; k < TY; k++) {
		const int ly = threadIdx.y * TY + k; // row of this output within the tile body
		const int gy = blockIdx.y * (BY * TY) + ly;
		if (gy >= ny)
			break;
		const int sy = ly + R;
		out[(size_t)gy * nx + gx] =
		    cross9(tile[sy][sx], tile[sy][sx - 1], tile[sy][sx + 1], tile[sy - 1][sx], tile[sy + 1][sx],
			   tile[sy][sx - 2], tile[sy][sx + 2], tile[sy - 2][sx], tile[sy + 2][sx]);
	}
}

// Reference: one thread per point, straight from global memory.
extern "C" __global__ void stencil2d_ref(const float *in, float *out, int nx, int ny)
{
	const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
	if (x >= nx)
		return;
#define AT(yy, xx) in[(size_t)min(max((yy), 0), ny - 1) * nx + min(max((xx), 0), nx - 1)]
	out[(size_t)y * nx + x] = cross9(AT(y, x), AT(y, x - 1), AT(y, x + 1), AT(y - 1, x), AT(y + 1, x),
					 AT(y, x - 2), AT(y, x + 2), AT(y - 2, x), AT(y + 2, x));
#undef AT
}
