// Reference for cumsum.cu: one thread per row, a running sum in double.
// Launch: grid cdiv(rows, 128), block 128.
extern "C" __global__ void cumsum_ref(const float *x, float *y, int rows, int cols)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	double s = 0.0;
	for (int c = 0; c < cols; c++) {
		s += x[(long)r * cols + c];
		y[(long)r * cols + c] = (float)s;
	}
}
