// Reference for rowwise.cu: one thread per row, three plain passes (max, sum
// in double, write). OP_LOG selects log-softmax. Launch: grid cdiv(rows, 128),
// block 128.
extern "C" __global__ void rowwise_ref(const float *x, float *y, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	const float *xr = x + (long)r * cols;
	float *yr = y + (long)r * cols;
	double m = xr[0];
	for (int c = 1; c < cols; c++)
		m = fmax(m, (double)xr[c]);
	double s = 0.0;
	for (int c = 0; c < cols; c++)
		s += exp((double)xr[c] - m);
	for (int c = 0; c < cols; c++)
#if defined(OP_LOG)
		yr[c] = (float)((double)xr[c] - m - log(s));
#else
		yr[c] = (float)(exp((double)xr[c] - m) / s);
#endif
}
