// tma_transpose: out[x][y] = in[y][x] for an ny x nx f32 matrix. One thread
// loads a TILE_Y x 32 tile of `in` with the copy engine
// (cp.async.bulk.tensor.2d through the tensor map tmIn0 or tmIn128, completion on an
// mbarrier) into shared memory, SWZ = 128: with the 128-byte swizzle (16-byte
// chunk c of row r lands at chunk c ^ (r % 8)), which spreads the column
// reads over 8 banks groups; SWZ = 0: plain rows. Then 32 x BLOCK_ROWS
// threads write the tile transposed, a warp along y for coalesced stores.
#ifndef TILE_Y
#define TILE_Y 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
#ifndef SWZ
#define SWZ 0
#endif
#define TILE_X 32
#if SWZ != 0 && SWZ != 128
#error "SWZ is 0 or 128"
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

struct __align__(64) tensor_map {
	u64 words[16];
};

__device__ __forceinline__ u32 smem_u32(const void *p)
{
	return (u32)__cvta_generic_to_shared(p);
}

extern "C" __global__ void __launch_bounds__(32 * BLOCK_ROWS)
	tma_transpose(float *__restrict__ out, const float *__restrict__ in, int nx, int ny,
		      const __grid_constant__ tensor_map tmIn0,
		      const __grid_constant__ tensor_map tmIn128)
{
	__shared__ __align__(1024) float tile[TILE_Y * TILE_X];
	__shared__ __align__(8) u64 bar;
	const int x0 = blockIdx.x * TILE_X, y0 = blockIdx.y * TILE_Y;
	if (threadIdx.x == 0 && threadIdx.y == 0) {
		asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(&bar)));
		asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
		asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
		asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
				     smem_u32(&bar)),
			     "r"((u32)(TILE_Y * TILE_X * 4)));
		asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
			     " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(tile)),
			     "l"((u64)(SWZ ? &tmIn128 : &tmIn0)), "r"(smem_u32(&bar)), "r"(x0), "r"(y0)
			     : "memory");
	}
	__syncthreads();
	asm volatile("{\n.reg .pred done;\n"
		     "WAIT_%=:\n"
		     "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
		     "@!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(&bar))
		     : "memory");
	const int lane = threadIdx.x;
	// the 128-byte swizzle XORs a 16-byte chunk's index with bits 7-9 of its
	// shared-memory address: taken from the tile's own address, so the
	// pattern holds wherever the tile starts (it is 1024-aligned anyway)
	const int rbase = (int)((smem_u32(tile) >> 7) & 7);
	for (int c = threadIdx.y; c < TILE_X; c += BLOCK_ROWS) {
#pragma unroll
		for (int r = lane; r < TILE_Y; r += 32) {
#if SWZ == 128
			int pos = r * TILE_X + (((c >> 2) ^ ((r + rbase) & 7)) << 2) + (c & 3);
#else
			int pos = r * TILE_X + c;
#endif
			out[(long long)(x0 + c) * ny + y0 + r] = tile[pos];
		}
	}
}

// The reference: one thread per element.
extern "C" __global__ void transpose_ref(float *out, const float *in, int nx, int ny)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x < nx && y < ny)
		out[(long long)x * ny + y] = in[(long long)y * nx + x];
}
