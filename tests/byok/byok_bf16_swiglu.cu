// byok_bf16_swiglu: the SwiGLU gate of an MLP in bf16, on the fused
// gate/up projection layout: x is [rows, 2H] bf16 with the gate in columns
// [0, H) and the up projection in [H, 2H); out[r, c] = silu(gate) * up,
// [rows, H] bf16. H = 2751 is odd, so
//   - a row of x starts on an even element: gate pairs (c, c+1), c even,
//     are 4-byte aligned and load as one __nv_bfloat162;
//   - the up half starts on an odd element: its pairs are misaligned and
//     load as two scalars, packed with __halves2bfloat162;
//   - out rows start on an odd element for odd r: those pairs are stored
//     as two scalars, the others as one __nv_bfloat162;
//   - the last column (c = H - 1) has no partner: scalar tail.
// silu is computed in float. MATH bf162: silu rounded to bf16, then
// __hmul2 with the up pair (bit-identical to the reference's scalar
// __hmul); MATH f32: the product in float, rounded once (differs from the
// reference by at most one bf16 ulp on some elements).
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#define bf162 1
#define f32 2
#ifndef MATH
#define MATH bf162
#endif
static_assert(MATH == bf162 || MATH == f32, "MATH is bf162 or f32");

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

extern "C" __global__ void __launch_bounds__(BLOCK)
	swiglu(const __nv_bfloat16 *__restrict__ x, __nv_bfloat16 *__restrict__ out, int H)
{
	const size_t r = blockIdx.y;
	const __nv_bfloat16 *g = x + r * 2 * H;
	const __nv_bfloat16 *u = g + H;
	__nv_bfloat16 *o = out + r * H;
	const bool out_aligned = ((r * H) & 1) == 0;
	const bool up_aligned = (H & 1) == 0;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int p = (blockIdx.x * ITEMS + k) * BLOCK + threadIdx.x; // pair index
		const int c = 2 * p;
		if (c + 1 < H) {
			const float2 gf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(g + c));
			const __nv_bfloat162 u2 = up_aligned ? *reinterpret_cast<const __nv_bfloat162 *>(u + c)
							     : __halves2bfloat162(u[c], u[c + 1]);
#if MATH == bf162
			const __nv_bfloat162 res = __hmul2(__floats2bfloat162_rn(silu(gf.x), silu(gf.y)), u2);
#else
			const float2 uf = __bfloat1622float2(u2);
			const __nv_bfloat162 res = __floats2bfloat162_rn(silu(gf.x) * uf.x, silu(gf.y) * uf.y);
#endif
			if (out_aligned) {
				*reinterpret_cast<__nv_bfloat162 *>(o + c) = res;
			} else {
				o[c] = __low2bfloat16(res);
				o[c + 1] = __high2bfloat16(res);
			}
		} else if (c < H) {
#if MATH == bf162
			o[c] = __hmul(__float2bfloat16_rn(silu(__bfloat162float(g[c]))), u[c]);
#else
			o[c] = __float2bfloat16_rn(silu(__bfloat162float(g[c])) * __bfloat162float(u[c]));
#endif
		}
	}
}

// Reference: one thread per output element, scalar bf16.
extern "C" __global__ void swiglu_ref(const __nv_bfloat16 *x, __nv_bfloat16 *out, int H)
{
	const size_t r = blockIdx.y;
	const int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= H)
		return;
	const __nv_bfloat16 s = __float2bfloat16_rn(silu(__bfloat162float(x[r * 2 * H + c])));
	out[r * H + c] = __hmul(s, x[r * 2 * H + H + c]);
}
