// 2D convolution written the Kernel Tuner way: every tunable is a lowercase
// preprocessor define, so a spec alone makes it tunable (the same tunables as
// Kernel Tuner's convolution example and its recorded A100 cache).
//
//   output[y][x] = sum_{i < filter_height, j < filter_width}
//                  input[y + i][x + j] * d_filter[i][j]
//
// input is the border-padded image, (height + filter_height - 1) rows of
// (width + filter_width - 1) floats; output is height x width. d_filter is a
// __constant__ symbol the harness fills (use_cmem is the only supported
// value, 1).
//
// Tunables: block_size_x, block_size_y (threads), tile_size_x, tile_size_y
// (outputs per thread in x and y, strided by the block size so neighbouring
// threads stay on neighbouring pixels), use_shmem (stage the input tile plus
// its border in shared memory), use_padding (one extra shared column against
// bank conflicts), read_only (load input through the read-only cache).
// Launch: grid (cdiv(width, block_size_x*tile_size_x), cdiv(height, block_size_y*tile_size_y)).
#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 16
#endif
#ifndef tile_size_x
#define tile_size_x 1
#endif
#ifndef tile_size_y
#define tile_size_y 1
#endif
#ifndef filter_width
#define filter_width 15
#endif
#ifndef filter_height
#define filter_height 15
#endif
#ifndef use_shmem
#define use_shmem 1
#endif
#ifndef use_padding
#define use_padding 0
#endif
#ifndef read_only
#define read_only 0
#endif
#ifndef use_cmem
#define use_cmem 1
#endif

static_assert(use_cmem == 1, "this kernel reads the filter from __constant__ memory only");

#define OUT_W (block_size_x * tile_size_x)
#define OUT_H (block_size_y * tile_size_y)
#define SH_W (OUT_W + filter_width - 1 + use_padding)
#define SH_H (OUT_H + filter_height - 1)

__constant__ float d_filter[filter_height * filter_width];

__device__ __forceinline__ float load_input(const float *p)
{
#if read_only
	return __ldg(p);
#else
	return *p;
#endif
}

extern "C" __global__ void __launch_bounds__(block_size_x *block_size_y)
	convolution_kernel(float *output, const float *input, int width,
					      int height)
{
	const int in_w = width + filter_width - 1, in_h = height + filter_height - 1;
	const int x0 = blockIdx.x * OUT_W, y0 = blockIdx.y * OUT_H;
	const int tx = threadIdx.x, ty = threadIdx.y;

#if use_shmem
	__shared__ float sh[SH_H][SH_W];
	for (int i = ty; i < OUT_H + filter_height - 1; i += block_size_y) {
		for (int j = tx; j < OUT_W + filter_width - 1; j += block_size_x) {
			int y = y0 + i, x = x0 + j;
			sh[i][j] = y < in_h && x < in_w ? load_input(input + (size_t)y * in_w + x) : 0.0f;
		}
	}
	__syncthreads();
#endif

	float sum[tile_size_y][tile_size_x];
#pragma unroll
	for (int ti = 0; ti < tile_size_y; ti++)
#pragma unroll
		for (int tj = 0; tj < tile_size_x; tj++)
			sum[ti][tj] = 0.0f;

	for (int i = 0; i < filter_height; i++) {
		for (int j = 0; j < filter_width; j++) {
			const float f = d_filter[i * filter_width + j];
#pragma unroll
			for (int ti = 0; ti < tile_size_y; ti++) {
#pragma unroll
				for (int tj = 0; tj < tile_size_x; tj++) {
					const int ly = ty + ti * block_size_y + i;
					const int lx = tx + tj * block_size_x + j;
#if use_shmem
					sum[ti][tj] += sh[ly][lx] * f;
#else
					const int y = min(y0 + ly, in_h - 1), x = min(x0 + lx, in_w - 1);
					sum[ti][tj] += load_input(input + (size_t)y * in_w + x) * f;
#endif
				}
			}
		}
	}

#pragma unroll
	for (int ti = 0; ti < tile_size_y; ti++) {
#pragma unroll
		for (int tj = 0; tj < tile_size_x; tj++) {
			const int y = y0 + ty + ti * block_size_y, x = x0 + tx + tj * block_size_x;
			if (y < height && x < width)
				output[(size_t)y * width + x] = sum[ti][tj];
		}
	}
}
