// topk_rows: the K largest values of each row of a rows x cols f32 matrix,
// in descending order, with their column indices (ties: the lower index
// first). One warp per row: every lane keeps a sorted list of its K best
// (registers, fully unrolled insertion), then K rounds of a warp argmax over
// the lanes' heads; the winning lane pops its head.
#define KOPT_INF __int_as_float(0x7f800000)
#ifndef WARPS
#define WARPS 4
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef K
#define K 8
#endif

__device__ __forceinline__ bool better(float a, int ai, float b, int bi)
{
	return a > b || (a == b && ai < bi);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
	topk_rows(const float *__restrict__ x, float *__restrict__ val, int *__restrict__ idx,
		  int rows, int cols)
{
	int row = blockIdx.x * WARPS + threadIdx.x / 32;
	int lane = threadIdx.x & 31;
	if (row >= rows)
		return;
	const float *r = x + (long long)row * cols;
	float tv[K];
	int ti[K];
#pragma unroll
	for (int s = 0; s < K; s++) {
		tv[s] = -KOPT_INF;
		ti[s] = 0x7fffffff;
	}
	for (int base = lane * VEC; base < cols; base += 32 * VEC) {
		float v[VEC];
#if VEC == 4
		float4 q = *reinterpret_cast<const float4 *>(r + base);
		v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
#elif VEC == 2
		float2 q = *reinterpret_cast<const float2 *>(r + base);
		v[0] = q.x; v[1] = q.y;
#else
		v[0] = r[base];
#endif
#pragma unroll
		for (int e = 0; e < VEC; e++) {
			float cv = v[e];
			int ci = base + e;
#pragma unroll
			for (int s = 0; s < K; s++) {
				if (better(cv, ci, tv[s], ti[s])) {
					float t = tv[s]; tv[s] = cv; cv = t;
					int u = ti[s]; ti[s] = ci; ci = u;
				}
			}
		}
	}
	for (int k = 0; k < K; k++) {
		float bv = tv[0];
		int bi = ti[0];
		for (int o = 16; o > 0; o >>= 1) {
			float ov = __shfl_xor_sync(0xffffffffu, bv, o);
			int oi = __shfl_xor_sync(0xffffffffu, bi, o);
			if (better(ov, oi, bv, bi)) {
				bv = ov;
				bi = oi;
			}
		}
		if (ti[0] == bi) {
#pragma unroll
			for (int s = 0; s < K - 1; s++) {
				tv[s] = tv[s + 1];
				ti[s] = ti[s + 1];
			}
			tv[K - 1] = -KOPT_INF;
			ti[K - 1] = 0x7fffffff;
		}
		if (lane == 0) {
			val[(long long)row * K + k] = bv;
			idx[(long long)row * K + k] = bi;
		}
	}
}

// The reference: one thread per row; K passes, each picking the best element
// that ranks below the previous pick in the order (value desc, index asc).
extern "C" __global__ void topk_rows_ref(const float *x, float *val, int *idx, int rows, int cols)
{
	int row = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= rows)
		return;
	const float *r = x + (long long)row * cols;
	float pv = KOPT_INF;
	int pi = -1;
	for (int k = 0; k < K; k++) {
		float bv = -KOPT_INF;
		int bi = 0x7fffffff;
		for (int j = 0; j < cols; j++) {
			float v = r[j];
			bool below_prev = v < pv || (v == pv && j > pi);
			if (below_prev && (v > bv || (v == bv && j < bi))) {
				bv = v;
				bi = j;
			}
		}
		val[(long long)row * K + k] = bv;
		idx[(long long)row * K + k] = bi;
		pv = bv;
		pi = bi;
	}
}
