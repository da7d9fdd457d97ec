// 2-D convolution, f32, nn.Conv2d(CIN, Cout, KS, stride 1, no padding, no
// bias): y[n][co][oy][ox] = sum_{ci,ky,kx} x[n][ci][oy+ky][ox+kx] w[co][ci][ky][kx]
// with x (N, CIN, H, W), w (Cout, CIN, KS, KS), y (N, Cout, H-KS+1, W-KS+1).
// CIN and KS are compile-time (-DCIN=3 -DKS=3 in the spec's options).
//
// A block of BX x BY threads computes a (BX * PX) x BY tile of output pixels
// for CO output channels of one image; each thread holds PX pixels (BX
// apart, so stores are contiguous across the warp) times CO channels in
// registers. The block's CO x CIN x KS x KS weights are staged in shared
// memory; the inputs come through the L1.
// Requires Cout % CO == 0. Launch: grid (cdiv(Wo, BX * PX), cdiv(Ho, BY), N * Cout / CO),
// block (BX, BY).
#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 8
#endif
#ifndef PX
#define PX 2
#endif
#ifndef CO
#define CO 8
#endif
#ifndef CIN
#define CIN 3
#endif
#ifndef KS
#define KS 3
#endif

extern "C" __global__ void __launch_bounds__(BX *BY)
	conv2d(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y, int N, int Cout, int H,
	       int W)
{
	__shared__ float ws[CO][CIN * KS * KS];
	(void)N;
	const int Ho = H - KS + 1, Wo = W - KS + 1;
	const int groups = Cout / CO;
	const int n = blockIdx.z / groups, co0 = (blockIdx.z % groups) * CO;
	const int tid = threadIdx.y * BX + threadIdx.x;
	for (int e = tid; e < CO * CIN * KS * KS; e += BX * BY)
		ws[e / (CIN * KS * KS)][e % (CIN * KS * KS)] = w[(long)co0 * CIN * KS * KS + e];
	__syncthreads();

	const int oy = blockIdx.y * BY + threadIdx.y;
	const int ox0 = blockIdx.x * BX * PX + threadIdx.x;
	if (oy >= Ho)
		return;
	float acc[CO][PX];
#pragma unroll
	for (int c = 0; c < CO; c++)
#pragma unroll
		for (int p = 0; p < PX; p++)
			acc[c][p] = 0.0f;
	const float *xn = x + (long)n * CIN * H * W;
#pragma unroll
	for (int ci = 0; ci < CIN; ci++)
#pragma unroll
		for (int ky = 0; ky < KS; ky++) {
			const float *row = xn + ((long)ci * H + oy + ky) * W;
#pragma unroll
			for (int kx = 0; kx < KS; kx++) {
				float in[PX];
#pragma unroll
				for (int p = 0; p < PX; p++) {
					const int ox = ox0 + p * BX;
					in[p] = ox < Wo ? row[ox + kx] : 0.0f;
				}
#pragma unroll
				for (int c = 0; c < CO; c++) {
					const float wv = ws[c][(ci * KS + ky) * KS + kx];
#pragma unroll
					for (int p = 0; p < PX; p++)
						acc[c][p] = fmaf(in[p], wv, acc[c][p]);
				}
			}
		}
#pragma unroll
	for (int c = 0; c < CO; c++) {
		float *yc = y + (((long)n * Cout + co0 + c) * Ho + oy) * Wo;
#pragma unroll
		for (int p = 0; p < PX; p++) {
			const int ox = ox0 + p * BX;
			if (ox < Wo)
				yc[ox] = acc[c][p];
		}
	}
}
