// Reference for rmsnorm.cu: one thread per (b, pixel), the mean of squares
// in double. Launch: grid cdiv(B * P, 256), block 256.
extern "C" __global__ void rmsnorm_ref(const float *x, float *y, int B, int F, int P, float eps)
{
	long t = (long)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= (long)B * P)
		return;
	long b = t / P, p = t % P;
	const float *xp = x + b * F * P + p;
	float *yp = y + b * F * P + p;
	double q = 0.0;
	for (int f = 0; f < F; f++)
		q += (double)xp[(long)f * P] * xp[(long)f * P];
	double r = 1.0 / sqrt(q / F + (double)eps);
	for (int f = 0; f < F; f++)
		yp[(long)f * P] = (float)(xp[(long)f * P] * r);
}
