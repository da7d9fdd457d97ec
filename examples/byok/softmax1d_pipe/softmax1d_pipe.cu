// softmax1d_pipe: y = exp(x - max) / sum(exp(x - max)) over one vector of n
// floats, as a pipeline of two kernels:
//   softmax_partial: each block of BLOCK threads reduces BLOCK * ITEMS
//     elements to a (max, sum of exp(x - max)) pair in the scratch arrays;
//   softmax_apply: a persistent grid (BPS blocks per multiprocessor); each
//     block first merges all partial pairs (the same order in every block,
//     so every block gets the same M and S), then normalises a grid-strided
//     share of the vector.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#define APPLY_BLOCK 512
#define KOPT_NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ void merge(float &m, float &s, float om, float os)
{
	float nm = fmaxf(m, om);
	if (nm == KOPT_NEG_INF)
		return;
	s = s * __expf(m - nm) + os * __expf(om - nm);
	m = nm;
}

template <int THREADS>
__device__ __forceinline__ void block_merge(float &m, float &s)
{
	__shared__ float sm[THREADS / 32], ss[THREADS / 32];
	for (int o = 16; o > 0; o >>= 1) {
		float om = __shfl_xor_sync(0xffffffffu, m, o);
		float os = __shfl_xor_sync(0xffffffffu, s, o);
		merge(m, s, om, os);
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
	if (lane == 0) {
		sm[warp] = m;
		ss[warp] = s;
	}
	__syncthreads();
	if (warp == 0) {
		m = lane < THREADS / 32 ? sm[lane] : KOPT_NEG_INF;
		s = lane < THREADS / 32 ? ss[lane] : 0.0f;
		for (int o = 16; o > 0; o >>= 1) {
			float om = __shfl_xor_sync(0xffffffffu, m, o);
			float os = __shfl_xor_sync(0xffffffffu, s, o);
			merge(m, s, om, os);
		}
		__syncwarp();
		if (lane == 0) {
			sm[0] = m;
			ss[0] = s;
		}
	}
	__syncthreads();
	m = sm[0];
	s = ss[0];
	__syncthreads();
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	softmax_partial(const float *__restrict__ x, float *__restrict__ pmax, float *__restrict__ psum,
			int n)
{
	float m = KOPT_NEG_INF, s = 0.0f;
	long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		long long i = base + (long long)k * BLOCK;
		if (i < n)
			merge(m, s, x[i], 1.0f);
	}
	block_merge<BLOCK>(m, s);
	if (threadIdx.x == 0) {
		pmax[blockIdx.x] = m;
		psum[blockIdx.x] = s;
	}
}

extern "C" __global__ void __launch_bounds__(APPLY_BLOCK)
	softmax_apply(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ pmax,
		      const float *__restrict__ psum, int n, int parts)
{
	float m = KOPT_NEG_INF, s = 0.0f;
	for (int p = threadIdx.x; p < parts; p += APPLY_BLOCK)
		merge(m, s, pmax[p], psum[p]);
	block_merge<APPLY_BLOCK>(m, s);
	const float inv = 1.0f / s;
	for (long long i = (long long)blockIdx.x * APPLY_BLOCK + threadIdx.x; i < n;
	     i += (long long)gridDim.x * APPLY_BLOCK)
		y[i] = __expf(x[i] - m) * inv;
}

// The reference: one block; the max, the sum in double, then the outputs.
extern "C" __global__ void softmax1d_ref(float *y, const float *x, int n)
{
	__shared__ float smax[1024];
	__shared__ double ssum[1024];
	int t = threadIdx.x;
	float m = KOPT_NEG_INF;
	for (int i = t; i < n; i += blockDim.x)
		m = fmaxf(m, x[i]);
	smax[t] = m;
	__syncthreads();
	for (int h = blockDim.x / 2; h > 0; h >>= 1) {
		if (t < h)
			smax[t] = fmaxf(smax[t], smax[t + h]);
		__syncthreads();
	}
	m = smax[0];
	double s = 0.0;
	for (int i = t; i < n; i += blockDim.x)
		s += exp((double)x[i] - (double)m);
	ssum[t] = s;
	__syncthreads();
	for (int h = blockDim.x / 2; h > 0; h >>= 1) {
		if (t < h)
			ssum[t] += ssum[t + h];
		__syncthreads();
	}
	s = ssum[0];
	for (int i = t; i < n; i += blockDim.x)
		y[i] = (float)(exp((double)x[i] - (double)m) / s);
}
