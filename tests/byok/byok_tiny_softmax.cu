// byok_tiny_softmax: softmax of a 37-element f32 vector in one block, a
// problem where launch overhead is all there is. Each thread holds up to
// cdiv(37, BLOCK) elements; the block's max and sum go through warp
// shuffles (METHOD shfl) or a shared-memory loop over all elements
// (METHOD smem: thread 0 reduces, others wait).
#ifndef BLOCK
#define BLOCK 64
#endif
#ifndef METHOD
#define METHOD shfl
#endif

constexpr int shfl = 0, smem = 1; // the values METHOD can take
constexpr int PER = 4;		  // elements a thread can hold (n <= BLOCK * PER)

__device__ __forceinline__ float warp_max(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
	return v;
}
__device__ __forceinline__ float warp_sum(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK) tiny_softmax(const float *__restrict__ x, float *__restrict__ y, int n)
{
	constexpr int WARPS = BLOCK / 32;
	__shared__ float part[WARPS > 0 ? WARPS : 1];
	__shared__ float buf[BLOCK * PER];
	__shared__ float bcast[2];
	const int t = threadIdx.x;
	float v[PER];
	float m = -__int_as_float(0x7f800000);
#pragma unroll
	for (int k = 0; k < PER; k++) {
		const int i = t + k * BLOCK;
		v[k] = i < n ? x[i] : m;
		m = fmaxf(m, v[k]);
	}
	if constexpr (METHOD == smem) {
#pragma unroll
		for (int k = 0; k < PER; k++)
			buf[t + k * BLOCK] = v[k];
		__syncthreads();
		if (t == 0) {
			float mm = buf[0];
			for (int i = 1; i < n; i++)
				mm = fmaxf(mm, buf[i]);
			float s = 0.0f;
			for (int i = 0; i < n; i++)
				s += expf(buf[i] - mm);
			bcast[0] = mm;
			bcast[1] = s;
		}
		__syncthreads();
	} else {
		m = warp_max(m);
		if (t % 32 == 0)
			part[t / 32] = m;
		__syncthreads();
		if (t == 0) {
			float mm = part[0];
			for (int w = 1; w < WARPS; w++)
				mm = fmaxf(mm, part[w]);
			bcast[0] = mm;
		}
		__syncthreads();
		float s = 0.0f;
#pragma unroll
		for (int k = 0; k < PER; k++)
			if (t + k * BLOCK < n)
				s += expf(v[k] - bcast[0]);
		s = warp_sum(s);
		__syncthreads();
		if (t % 32 == 0)
			part[t / 32] = s;
		__syncthreads();
		if (t == 0) {
			float ss = 0.0f;
			for (int w = 0; w < WARPS; w++)
				ss += part[w];
			bcast[1] = ss;
		}
		__syncthreads();
	}
	const float mm = bcast[0], inv = 1.0f / bcast[1];
#pragma unroll
	for (int k = 0; k < PER; k++) {
		const int i = t + k * BLOCK;
		if (i < n)
			y[i] = expf(v[k] - mm) * inv;
	}
}

// Reference: one output per thread (looping over blockDim, since the
// reference runs with the kernel's own launch: one block of BLOCK threads).
extern "C" __global__ void tiny_softmax_ref(const float *x, float *y, int n)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		float m = x[0];
		for (int j = 1; j < n; j++)
			m = fmaxf(m, x[j]);
		float s = 0.0f;
		for (int j = 0; j < n; j++)
			s += expf(x[j] - m);
		y[i] = expf(x[i] - m) / s;
	}
}
