// prune24: 2:4 structured pruning, the preparation of a weight matrix for
// Hopper's sparse tensor cores: in every group of 4 consecutive weights of
// a row, keep the 2 of largest magnitude (ties: the lower index), as
//   vals[r, 2g + 0..1]  the kept weights in index order (f32), and
//   meta[r, g]          i0 | i1 << 2 (u8, i0 < i1), the positions kept.
// The weights are int4-style quantized (k/8, k in [-7, 7], generated and
// redrawn for check 2), so equal magnitudes are common and the tie rule
// matters. Both outputs are exact (a selection computes nothing): vals has
// tolerance 0, meta is an integer. Half of all weights are kept, so a nudge
// (one ulp on one weight) shows in vals on about every second timed launch,
// and moves meta where it breaks a tie.
// Kernel: float4 loads (one group), GPT groups per thread, float2 and byte
// stores; the selection rule is one helper shared with the reference.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef GPT
#define GPT 1
#endif

// a beats b (a at index ia, b at ib): larger magnitude, or equal and lower
__device__ __forceinline__ bool beats(float a, int ia, float b, int ib)
{
	const float fa = fabsf(a), fb = fabsf(b);
	return fa > fb || (fa == fb && ia < ib);
}

__device__ __forceinline__ void select24(const float w[4], float &v0, float &v1, unsigned char &m)
{
	int kept[2], nk = 0;
	for (int k = 0; k < 4; k++) {
		int beaten = 0;
		for (int j = 0; j < 4; j++)
			beaten += j != k && beats(w[j], j, w[k], k);
		if (beaten < 2 && nk < 2)
			kept[nk++] = k;
	}
	v0 = w[kept[0]];
	v1 = w[kept[1]];
	m = (unsigned char)(kept[0] | kept[1] << 2);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
	prune24(const float *__restrict__ W, float *__restrict__ vals, unsigned char *__restrict__ meta, int groups)
{
	const int g0 = (blockIdx.x * BLOCK + threadIdx.x) * GPT;
#pragma unroll
	for (int k = 0; k < GPT; k++) {
		const int g = g0 + k;
		if (g < groups) {
			const float4 q = reinterpret_cast<const float4 *>(W)[g];
			const float w[4] = {q.x, q.y, q.z, q.w};
			float v0, v1;
			unsigned char m;
			select24(w, v0, v1, m);
			reinterpret_cast<float2 *>(vals)[g] = make_float2(v0, v1);
			meta[g] = m;
		}
	}
}

// Reference: one thread per group, scalar loads and stores.
extern "C" __global__ void prune24_ref(const float *W, float *vals, unsigned char *meta, int groups)
{
	const int g = blockIdx.x * blockDim.x + threadIdx.x;
	if (g >= groups)
		return;
	const float w[4] = {W[4 * g], W[4 * g + 1], W[4 * g + 2], W[4 * g + 3]};
	float v0, v1;
	unsigned char m;
	select24(w, v0, v1, m);
	vals[2 * g] = v0;
	vals[2 * g + 1] = v1;
	meta[g] = m;
}
