// byok_workqueue_segsum: per-row sums over ragged rows. vals is a padded
// [rows, maxlen] f32 matrix of which only the first len[r] entries of row r
// count (len: i32, skewed: most rows short, a few near maxlen, some empty):
//   sums[r] = sum_{c < len[r]} vals[r, c]          (f32, warp shuffles)
//   npos[r] = #{c < len[r] : vals[r, c] > 0}        (i32, __reduce_add_sync)
// The padding past len[r] holds data too and must be ignored.
//
// A dynamic work queue balances the skew: a persistent grid (BPS blocks per
// SM) of WARPS warps per block, where each warp takes GRAB rows at a time
// from the module variable kopt_next_row with atomicAdd until the rows run
// out. kopt_next_row is listed in the spec's kernel.state, so kopt resets it
// to 0 before every launch. Warps never synchronise with each other.
#ifndef WARPS
#define WARPS 4
#endif
#ifndef BPS
#define BPS 2
#endif
#ifndef GRAB
#define GRAB 1
#endif

__device__ unsigned int kopt_next_row; // the queue head; 0 at the start of each launch

extern "C" __global__ void __launch_bounds__(WARPS * 32)
	segsum(const float *__restrict__ vals, const int *__restrict__ len, float *__restrict__ sums,
	       int *__restrict__ npos, int rows, int maxlen)
{
	const unsigned lane = threadIdx.x & 31;
	for (;;) {
		unsigned first = 0;
		if (lane == 0)
			first = atomicAdd(&kopt_next_row, (unsigned)GRAB);
		first = __shfl_sync(0xffffffffu, first, 0);
		if (first >= (unsigned)rows)
			break;
		const unsigned last = min(first + GRAB, (unsigned)rows);
		for (unsigned r = first; r < last; r++) {
			const int n = len[r];
			const float *v = vals + (size_t)r * maxlen;
			float s = 0.f;
			unsigned c = 0;
			for (int k = lane; k < n; k += 32) {
				const float x = v[k];
				s += x;
				c += x > 0.f;
			}
#pragma unroll
			for (int o = 16; o > 0; o >>= 1)
				s += __shfl_down_sync(0xffffffffu, s, o);
			c = __reduce_add_sync(0xffffffffu, c);
			if (lane == 0) {
				sums[r] = s;
				npos[r] = (int)c;
			}
		}
	}
}

// Reference: one thread per row, the sum in double.
extern "C" __global__ void segsum_ref(const float *vals, const int *len, float *sums, int *npos, int rows,
				      int maxlen)
{
	const int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	double s = 0.0;
	int c = 0;
	for (int k = 0; k < len[r]; k++) {
		const float x = vals[(size_t)r * maxlen + k];
		s += x;
		c += x > 0.f;
	}
	sums[r] = (float)s;
	npos[r] = c;
}
