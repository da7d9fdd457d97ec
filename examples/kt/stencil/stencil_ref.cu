// The obviously correct stencil: one thread per interior point.
extern "C" __global__ void stencil_ref(float *out, const float *in, int nx, int ny)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x < 1 || x >= nx - 1 || y < 1 || y >= ny - 1)
		return;
	int i = y * nx + x;
	out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
}
