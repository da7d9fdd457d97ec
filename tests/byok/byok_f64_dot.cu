// byok_f64_dot: f64 row dot products, out[r] = sum_c a[r][c] * b[r][c].
// One block per row; cols (100003) is odd and no multiple of any block size,
// so every config has a partial last round. Knobs: BLOCK_SIZE threads,
// UNROLL independent partial sums, METHOD (string knob, arrives as the token
// shfl or smem) picks the block-level reduction.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 128
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef METHOD
#define METHOD shfl
#endif

constexpr int shfl = 0, smem = 1; // the values METHOD can take

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	dot_rows(const double *__restrict__ a, const double *__restrict__ b, double *__restrict__ out,
		 int rows, int cols)
{
	const int r = blockIdx.x, t = threadIdx.x;
	if (r >= rows)
		return;
	const double *ar = a + (size_t)r * cols, *br = b + (size_t)r * cols;
	double acc[UNROLL];
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		acc[u] = 0.0;
	int c = t;
	for (; c + (UNROLL - 1) * BLOCK_SIZE < cols; c += UNROLL * BLOCK_SIZE) {
#pragma unroll
		for (int u = 0; u < UNROLL; u++)
			acc[u] = fma(ar[c + u * BLOCK_SIZE], br[c + u * BLOCK_SIZE], acc[u]);
	}
	for (; c < cols; c += BLOCK_SIZE)
		acc[0] = fma(ar[c], br[c], acc[0]);
	double s = 0.0;
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		s += acc[u];

	if constexpr (METHOD == smem) {
		__shared__ double buf[BLOCK_SIZE];
		buf[t] = s;
		__syncthreads();
		for (int off = BLOCK_SIZE / 2; off > 0; off >>= 1) {
			if (t < off)
				buf[t] += buf[t + off];
			__syncthreads();
		}
		if (t == 0)
			out[r] = buf[0];
	} else {
		__shared__ double warp_sums[BLOCK_SIZE / 32];
		for (int off = 16; off > 0; off >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, off);
		if (t % 32 == 0)
			warp_sums[t / 32] = s;
		__syncthreads();
		if (t == 0) {
			double total = 0.0;
			for (int w = 0; w < BLOCK_SIZE / 32; w++)
				total += warp_sums[w];
			out[r] = total;
		}
	}
}

// Reference: one thread per row, a plain loop.
extern "C" __global__ void dot_rows_ref(const double *a, const double *b, double *out, int rows,
					int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	double s = 0.0;
	for (int c = 0; c < cols; c++)
		s += a[(size_t)r * cols + c] * b[(size_t)r * cols + c];
	out[r] = s;
}
