// atomic_rowsum: split-row reduction with float atomics, the usual way to
// fill a machine when rows are few and long. x is [rows, cols] f32;
// rowsum[r] = sum_c x[r, c] and sumsq[0] = sum of all x^2 (an MSE-style
// loss). The row is cut into SPLIT chunks, one block each (grid SPLIT x
// rows); each block reduces its chunk (per-thread sums, warp shuffles, one
// smem pass) and adds it with atomicAdd into rowsum[r] and into the single
// sumsq word. Both outputs start at zero before every launch ("copy:" from
// a fixed zero input that is no kernel parameter).
//
// The order in which the atomics land changes from launch to launch, so
// the f32 results differ run to run in their last bits: honest, and the
// verifier must absorb it. rowsum gets SPLIT partials per row (default f32
// tolerance is ample); sumsq gets rows * SPLIT partials on one address, a
// sum near rows*cols: about sqrt(rows*SPLIT) roundings of ulp(rows*cols),
// ~1e-5 relative at SPLIT 32, so its spec tolerance is 1e-4.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef SPLIT
#define SPLIT 8
#endif
#ifndef VEC
#define VEC 4
#endif

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	rowsum_atomic(const float *__restrict__ x, float *rowsum, float *sumsq, int rows, int cols)
{
	const int r = blockIdx.y;
	const int chunk = (cols + SPLIT - 1) / SPLIT;
	const int c0 = blockIdx.x * chunk;
	const int c1 = min(c0 + chunk, cols);
	const float *xr = x + (size_t)r * cols;
	float s = 0.0f, q = 0.0f;
#if VEC == 4
	// chunk is a multiple of 4 when cols is (the spec's constraint), so
	// c0 is 16-byte aligned; a tail of fewer than 4 goes one by one
	const int nvec = (c1 - c0) / 4;
	const float4 *xv = reinterpret_cast<const float4 *>(xr + c0);
	for (int k = threadIdx.x; k < nvec; k += BLOCK) {
		float4 v = xv[k];
		s += (v.x + v.y) + (v.z + v.w);
		q += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
	}
	for (int c = c0 + 4 * nvec + threadIdx.x; c < c1; c += BLOCK) {
		float v = xr[c];
		s += v;
		q += v * v;
	}
#else
	for (int c = c0 + threadIdx.x; c < c1; c += BLOCK) {
		float v = xr[c];
		s += v;
		q += v * v;
	}
#endif
	s = warp_sum(s);
	q = warp_sum(q);
	__shared__ float ws[BLOCK / 32], wq[BLOCK / 32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) {
		ws[warp] = s;
		wq[warp] = q;
	}
	__syncthreads();
	if (warp == 0) {
		s = lane < BLOCK / 32 ? ws[lane] : 0.0f;
		q = lane < BLOCK / 32 ? wq[lane] : 0.0f;
		s = warp_sum(s);
		q = warp_sum(q);
		if (lane == 0) {
			atomicAdd(&rowsum[r], s);
			atomicAdd(sumsq, q);
		}
	}
}

// Reference: one block of 1024 threads, one warp per row at a time, sums
// in double (deterministic); the total of squares reduced in double at the
// end.
extern "C" __global__ void rowsum_ref(const float *x, float *rowsum, float *sumsq, int rows, int cols)
{
	__shared__ double part[32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	double qtot = 0.0;
	for (int r = warp; r < rows; r += 32) {
		double s = 0.0;
		for (int c = lane; c < cols; c += 32) {
			double v = x[(size_t)r * cols + c];
			s += v;
			qtot += v * v;
		}
		for (int o = 16; o > 0; o >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0)
			rowsum[r] = (float)s;
	}
	for (int o = 16; o > 0; o >>= 1)
		qtot += __shfl_xor_sync(0xffffffffu, qtot, o);
	if (lane == 0)
		part[warp] = qtot;
	__syncthreads();
	if (threadIdx.x == 0) {
		double t = 0.0;
		for (int w = 0; w < 32; w++)
			t += part[w];
		sumsq[0] = (float)t;
	}
}
