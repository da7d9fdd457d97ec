// Test kernel for specs: c = a + b, one element per thread.
extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n)
{
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
