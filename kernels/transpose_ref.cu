// Reference for transpose.cu: one thread per element, out[c][r] = in[r][c].
// Launch: grid (cdiv(cols, 16), cdiv(rows, 16)), block (16, 16).
extern "C" __global__ void transpose_ref(const float *in, float *out, int rows, int cols)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int r = blockIdx.y * blockDim.y + threadIdx.y;
	if (r < rows && c < cols)
		out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
