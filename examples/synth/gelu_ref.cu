// GELU (tanh approximation) of every element, one thread per element.
__device__ float gelu_tanh(float v)
{
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

extern "C" __global__ void gelu_ref(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = gelu_tanh(x[i]);
}
