// Softmax over each row of a [rows, cols] matrix, one thread per row: plain
// and obviously correct (three passes over the row), and slow (a warp reads
// 32 rows at once, so no load is coalesced).
extern "C" __global__ void row_softmax_ref(float *y, const float *x, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    const float *xr = x + (size_t)r * cols;
    float *yr = y + (size_t)r * cols;
    float m = xr[0];
    for (int c = 1; c < cols; ++c)
        m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c)
        s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c)
        yr[c] = expf(xr[c] - m) / s;
}
