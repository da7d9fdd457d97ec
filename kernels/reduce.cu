// Row sums: y[r] = sum over c of x[r][c], f32 in and out.
//
// A block of BLOCK_SIZE threads reduces ROWS_PER_BLOCK rows; each row gets
// BLOCK_SIZE / ROWS_PER_BLOCK threads (a power of two, at least 4) that read
// VEC consecutive floats per load and keep UNROLL independent partial sums,
// so UNROLL loads are in flight per thread. The group then adds its partials
// through warp shuffles and, when wider than a warp, shared memory.
//
// Requires cols % VEC == 0. Launch: grid cdiv(rows, ROWS_PER_BLOCK), block BLOCK_SIZE.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 1
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

#define GROUP (BLOCK_SIZE / ROWS_PER_BLOCK)
#define GROUP_WARPS ((GROUP + 31) / 32)

static_assert(BLOCK_SIZE % ROWS_PER_BLOCK == 0, "BLOCK_SIZE must be a multiple of ROWS_PER_BLOCK");
static_assert(GROUP >= 4 && (GROUP & (GROUP - 1)) == 0, "threads per row must be a power of two >= 4");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");
static_assert(UNROLL >= 1, "UNROLL must be at least 1");

struct __align__(4 * VEC) vec_t {
	float v[VEC];
};

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	reduce_rows(const float *__restrict__ x, float *__restrict__ y, int rows, int cols)
{
	__shared__ float part[ROWS_PER_BLOCK][GROUP_WARPS];
	const int local_row = threadIdx.x / GROUP, t = threadIdx.x % GROUP;
	const int row = blockIdx.x * ROWS_PER_BLOCK + local_row;
	const bool active = row < rows;
	const int nvec = cols / VEC;
	const vec_t *xr = reinterpret_cast<const vec_t *>(x + (size_t)(active ? row : 0) * cols);

	float acc[UNROLL];
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		acc[u] = 0.0f;
	if (active) {
		int i = t;
		// whole rounds: UNROLL loads issued before any is added
		for (; i + (UNROLL - 1) * GROUP < nvec; i += UNROLL * GROUP) {
			vec_t v[UNROLL];
#pragma unroll
			for (int u = 0; u < UNROLL; u++)
				v[u] = xr[i + u * GROUP];
#pragma unroll
			for (int u = 0; u < UNROLL; u++)
#pragma unroll
				for (int k = 0; k < VEC; k++)
					acc[u] += v[u].v[k];
		}
		for (; i < nvec; i += GROUP) {
			vec_t v = xr[i];
#pragma unroll
			for (int k = 0; k < VEC; k++)
				acc[0] += v.v[k];
		}
	}
	float s = 0.0f;
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		s += acc[u];
#pragma unroll
	for (int off = (GROUP < 32 ? GROUP : 32) / 2; off > 0; off /= 2)
		s += __shfl_xor_sync(0xffffffffu, s, off);
	if (GROUP > 32) {
		if (t % 32 == 0)
			part[local_row][t / 32] = s;
		__syncthreads();
		s = 0.0f;
		for (int k = 0; k < GROUP_WARPS; k++)
			s += part[local_row][k];
	}
	if (active && t == 0)
		y[row] = s;
}
