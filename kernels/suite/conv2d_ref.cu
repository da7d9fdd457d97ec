// Reference for conv2d.cu: one thread per output element, the sum in double.
// Launch: grid (cdiv(Wo, 16), cdiv(Ho, 16), N * Cout), block (16, 16).
#ifndef CIN
#define CIN 3
#endif
#ifndef KS
#define KS 3
#endif

extern "C" __global__ void conv2d_ref(const float *x, const float *w, float *y, int N, int Cout, int H, int W)
{
	const int Ho = H - KS + 1, Wo = W - KS + 1;
	const int ox = blockIdx.x * blockDim.x + threadIdx.x, oy = blockIdx.y * blockDim.y + threadIdx.y;
	const int n = blockIdx.z / Cout, co = blockIdx.z % Cout;
	(void)N;
	if (ox >= Wo || oy >= Ho)
		return;
	double s = 0.0;
	for (int ci = 0; ci < CIN; ci++)
		for (int ky = 0; ky < KS; ky++)
			for (int kx = 0; kx < KS; kx++)
				s += (double)x[(((long)n * CIN + ci) * H + oy + ky) * W + ox + kx] *
				     w[((co * CIN + ci) * KS + ky) * KS + kx];
	y[(((long)n * Cout + co) * Ho + oy) * Wo + ox] = (float)s;
}
