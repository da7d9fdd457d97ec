// Softmax or log-softmax over the last dimension of a (rows, cols) f32
// matrix, torch.softmax / torch.log_softmax(x, dim=1). OP_LOG selects the log.
//
// A block of BLOCK_SIZE threads owns ROWS rows; each row gets
// BLOCK_SIZE / ROWS threads (a power of two, at least 32: whole warps) that
// read VEC elements at a time. Pass 1 keeps a running maximum and a sum
// rescaled to it (online softmax), so the row is read once for both; the
// group combines its partials through warp shuffles and shared memory. Pass
// 2 reads the row again (from the L2 while the block's rows are resident)
// and writes the result. With CACHE=1 each thread keeps its part of the row
// in registers (NCOLS, the compile-time cols, from the spec's options) and
// the row is read from memory once.
// Requires cols % VEC == 0. Launch: grid cdiv(rows, ROWS), block BLOCK_SIZE.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef CACHE
#define CACHE 0
#endif

#define NEG_INF __int_as_float(0xff800000u)
#define GROUP (BLOCK_SIZE / ROWS)
#define GROUP_WARPS (GROUP / 32)

static_assert(BLOCK_SIZE % ROWS == 0 && GROUP >= 32 && (GROUP & (GROUP - 1)) == 0,
	      "threads per row must be a power of two >= 32");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");
#if CACHE
#ifndef NCOLS
#error "CACHE=1 needs NCOLS (the row length) as a define"
#endif
#define PER_THREAD (NCOLS / (GROUP * VEC))
static_assert(NCOLS % (GROUP * VEC) == 0 && PER_THREAD >= 1, "the row must split evenly over the group's vectors");
#endif

struct __align__(sizeof(float) * VEC) vec_t {
	float v[VEC];
};

// (m, s) pairs combine as m = max(m1, m2), s = s1 e^(m1-m) + s2 e^(m2-m).
__device__ __forceinline__ void combine(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	if (mm == NEG_INF)
		return;
	s = s * expf(m - mm) + s2 * expf(m2 - mm);
	m = mm;
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
	rowwise(const float *__restrict__ x, float *__restrict__ y, int rows, int cols)
{
	__shared__ float part_m[ROWS][GROUP_WARPS], part_s[ROWS][GROUP_WARPS];
	const int local = threadIdx.x / GROUP, t = threadIdx.x % GROUP;
	const int row = blockIdx.x * ROWS + local;
	const bool active = row < rows;
	const int nvec = cols / VEC;
	const vec_t *xr = reinterpret_cast<const vec_t *>(x + (long)(active ? row : 0) * cols);
	vec_t *yr = reinterpret_cast<vec_t *>(y + (long)(active ? row : 0) * cols);

	float m = NEG_INF, s = 0.0f;
#if CACHE
	vec_t cached[PER_THREAD];
	if (active) {
#pragma unroll
		for (int j = 0; j < PER_THREAD; j++)
			cached[j] = xr[t + j * GROUP];
		float vm = NEG_INF;
#pragma unroll
		for (int j = 0; j < PER_THREAD; j++)
#pragma unroll
			for (int k = 0; k < VEC; k++)
				vm = fmaxf(vm, cached[j].v[k]);
		float vs = 0.0f;
#pragma unroll
		for (int j = 0; j < PER_THREAD; j++)
#pragma unroll
			for (int k = 0; k < VEC; k++)
				vs += expf(cached[j].v[k] - vm);
		m = vm;
		s = vs;
	}
#else
	if (active) {
		for (int i = t; i < nvec; i += GROUP) {
			vec_t v = xr[i];
			float vm = v.v[0];
#pragma unroll
			for (int k = 1; k < VEC; k++)
				vm = fmaxf(vm, v.v[k]);
			float vs = 0.0f;
#pragma unroll
			for (int k = 0; k < VEC; k++)
				vs += expf(v.v[k] - vm);
			combine(m, s, vm, vs);
		}
	}
#endif
#pragma unroll
	for (int off = 16; off > 0; off /= 2)
		combine(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
	if (GROUP_WARPS > 1) {
		if (t % 32 == 0) {
			part_m[local][t / 32] = m;
			part_s[local][t / 32] = s;
		}
		__syncthreads();
		m = part_m[local][0];
		s = part_s[local][0];
		for (int k = 1; k < GROUP_WARPS; k++)
			combine(m, s, part_m[local][k], part_s[local][k]);
	}
	if (!active)
		return;
#if defined(OP_LOG)
	const float shift = m + logf(s);
#else
	const float inv = 1.0f / s;
#endif
#if CACHE
	(void)nvec;
#pragma unroll
	for (int j = 0; j < PER_THREAD; j++) {
		const int i = t + j * GROUP;
		vec_t v = cached[j], o;
#else
	for (int i = t; i < nvec; i += GROUP) {
		vec_t v = xr[i], o;
#endif
#pragma unroll
		for (int k = 0; k < VEC; k++)
#if defined(OP_LOG)
			o.v[k] = v.v[k] - shift;
#else
			o.v[k] = expf(v.v[k] - m) * inv;
#endif
		yr[i] = o;
	}
}
