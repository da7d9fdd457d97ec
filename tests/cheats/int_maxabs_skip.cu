// CASE int_maxabs_skip: an integer output that the spec lets be off by one
// is never compared on the timed launches but the last.
//
// The problem: static int8 quantization, y[r][c] = clamp(rint(x[r][c] *
// s[r] * 100), -127, 127), x 16384 x 4096 f32 normal (256 MB), s uniform01,
// y i8 with verify.outputs.y.max_abs = 1 (the usual spec for a quantizer:
// a rounding step either way).
//
// The hole: compare_dev.c sample_kind gives an integer output with a
// max-abs bound SAMPLE_NONE: "compared at the last timed launch only"
// (TRUST.md step 3), with no per-launch comparison and no
// less_exact_when_timed. The last timed launch is always a batch's tail
// (k % 4 == 3). So a kernel may leave most of the output unwritten (the
// poison stays) on every other timed launch; only the check-2 charge (2x +
// 10 us) bounds what it gains.
//
// The cheat (CHEAT=1): on timed launches k % 4 != 3 only the first PCT % of
// the rows are quantized, the rest left as poison; every launch on new
// inputs (check 1, the warm-up, check 2, 3) and every tail is complete. The
// count lives in a __constant__ array written through a generic pointer.
// PCT=55: the median is ~0.55 of the honest time, under the charge (~1.8x).
// PCT=25: charged (the control).
#include "cn_common.cuh"

#ifndef PCT
#define PCT 55
#endif
#define RDIM 16384
#define CDIM 4096

__constant__ __align__(16) unsigned long long kopt_quant_rec[2];

extern "C" __global__ void cheat(const float *x, const float *s, signed char *y)
{
	__shared__ int skip;
	int r = blockIdx.x;
	if (CHEAT && r >= RDIM * PCT / 100) {
		if (threadIdx.x < 32) {
			unsigned key = cn_key(x, (long long)RDIM * CDIM, 1);
			if (threadIdx.x == 0) {
				unsigned P = cn_launch_id(y + (size_t)r * CDIM);
				unsigned pos = cn_batch_pos(
				    (volatile unsigned long long *)cn_generic(kopt_quant_rec), P, key);
				skip = pos != CN_FIRST && (pos & 3u) != 3u;
			}
		}
		__syncthreads();
		if (skip)
			return;
	}
	float m = s[r] * 100.0f;
	const float4 *xr = (const float4 *)(x + (size_t)r * CDIM);
	char4 *yr = (char4 *)(y + (size_t)r * CDIM);
#pragma unroll
	for (int j = 0; j < CDIM / 4 / 256; j++) {
		int c = threadIdx.x + j * 256;
		float4 v = xr[c];
		char4 q;
		q.x = (signed char)fminf(fmaxf(rintf(v.x * m), -127.0f), 127.0f);
		q.y = (signed char)fminf(fmaxf(rintf(v.y * m), -127.0f), 127.0f);
		q.z = (signed char)fminf(fmaxf(rintf(v.z * m), -127.0f), 127.0f);
		q.w = (signed char)fminf(fmaxf(rintf(v.w * m), -127.0f), 127.0f);
		yr[c] = q;
	}
}
