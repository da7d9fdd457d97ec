// Out-of-place transpose of a rows x cols f32 matrix: out[c][r] = in[r][c].
//
// A block of TILE x BLOCK_ROWS threads moves one TILE x TILE tile through
// shared memory, each thread TILE / BLOCK_ROWS elements, so both the reads of
// `in` and the writes of `out` run along rows (coalesced). PAD = 1 adds a
// column to the shared tile, which spreads a column of it over all banks.
// Edges are checked, so any rows and cols work.
//
// Launch: grid (cdiv(cols, TILE), cdiv(rows, TILE)), block (TILE, BLOCK_ROWS).
#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
#ifndef PAD
#define PAD 1
#endif

static_assert(TILE % BLOCK_ROWS == 0, "TILE must be a multiple of BLOCK_ROWS");

extern "C" __global__ void __launch_bounds__(TILE *BLOCK_ROWS)
	transpose(const float *__restrict__ in, float *__restrict__ out, int rows, int cols)
{
	__shared__ float tile[TILE][TILE + PAD];
	const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
	const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
	for (int i = 0; i < TILE; i += BLOCK_ROWS) {
		int r = r0 + ty + i, c = c0 + tx;
		if (r < rows && c < cols)
			tile[ty + i][tx] = in[(size_t)r * cols + c];
	}
	__syncthreads();
	// out has cols rows of length rows; this block writes its rows c0.. and
	// columns r0..
#pragma unroll
	for (int i = 0; i < TILE; i += BLOCK_ROWS) {
		int orow = c0 + ty + i, ocol = r0 + tx;
		if (orow < cols && ocol < rows)
			out[(size_t)orow * rows + ocol] = tile[tx][ty + i];
	}
}
