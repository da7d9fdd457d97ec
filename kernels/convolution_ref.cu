// Reference for convolution.cu: one thread per output pixel, the plain double
// loop over the filter. Launch: grid (cdiv(width, 16), cdiv(height, 16)),
// block (16, 16).
#ifndef filter_width
#define filter_width 15
#endif
#ifndef filter_height
#define filter_height 15
#endif

__constant__ float d_filter[filter_height * filter_width];

extern "C" __global__ void convolution_ref(float *output, const float *input, int width, int height)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	if (x >= width || y >= height)
		return;
	const int in_w = width + filter_width - 1;
	float sum = 0.0f;
	for (int i = 0; i < filter_height; i++)
		for (int j = 0; j < filter_width; j++)
			sum += input[(size_t)(y + i) * in_w + x + j] * d_filter[i * filter_width + j];
	output[(size_t)y * width + x] = sum;
}
