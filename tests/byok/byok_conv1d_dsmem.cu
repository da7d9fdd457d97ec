// byok_conv1d_dsmem: 1-D convolution y[i] = sum_{j=0}^{2r} w[j] * x[i + j]
// for i < n, x holding n + 2r elements. A block stages its tile of
// BLOCK * ITEMS outputs plus the 2r halo in dynamic shared memory, sized by
// the launch ("smem" in the spec); with WSMEM=1 the 2r+1 weights follow the
// tile in the same dynamic allocation. LAYOUT (string knob, token blocked or
// striped): which outputs of the tile a thread computes. The sum runs over j
// in order with fmaf, as in the reference.
#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef LAYOUT
#define LAYOUT blocked
#endif
#ifndef WSMEM
#define WSMEM 0
#endif

constexpr int blocked = 0, striped = 1; // the values LAYOUT can take

extern "C" __global__ void __launch_bounds__(BLOCK)
	conv1d(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y, int n,
	       int r)
{
	extern __shared__ float dyn[];
	constexpr int TILE = BLOCK * ITEMS;
	const int span = TILE + 2 * r;
	float *tile = dyn;
	const long long base = (long long)blockIdx.x * TILE;
	const long long nin = (long long)n + 2 * r;
	for (int i = threadIdx.x; i < span; i += BLOCK) {
		const long long g = base + i;
		tile[i] = g < nin ? x[g] : 0.0f;
	}
	const float *wt = w;
	if (WSMEM) {
		float *ws = dyn + span;
		for (int j = threadIdx.x; j <= 2 * r; j += BLOCK)
			ws[j] = w[j];
		wt = ws;
	}
	__syncthreads();
#pragma unroll
	for (int it = 0; it < ITEMS; it++) {
		const int o = LAYOUT == blocked ? threadIdx.x * ITEMS + it : it * BLOCK + threadIdx.x;
		const long long g = base + o;
		if (g < n) {
			float s = 0.0f;
			for (int j = 0; j <= 2 * r; j++)
				s = fmaf(wt[j], tile[o + j], s);
			y[g] = s;
		}
	}
}

// Reference: one thread per output.
extern "C" __global__ void conv1d_ref(const float *x, const float *w, float *y, int n, int r)
{
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float s = 0.0f;
	for (int j = 0; j <= 2 * r; j++)
		s = fmaf(w[j], x[i + j], s);
	y[i] = s;
}
