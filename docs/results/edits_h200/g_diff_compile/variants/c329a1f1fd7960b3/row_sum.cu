// Row sums of an M x N f32 matrix, written the slow way on purpose: one
// thread per row, so the 32 threads of a warp read 32 rows at once and every
// load touches 32 different cache lines (uncoalesced). The block size is the
// only knob, and no block size fixes the access pattern: the fast version
// needs a code edit (a warp per row, lanes striding along the row, a shuffle
// reduction), which is what the experts' edit scenarios of docs/EXPERTS.md
// find, break, repair and crown.
//
// Launch: grid cdiv(M, BLOCK), block BLOCK; rows are visited with a
// grid-stride loop, so a kernel that maps rows to threads differently works
// with the same launch.
extern "C" __global__ void row_sum(const float *x, float *y, int M, int N)
{
    int stride = gridDim.x * blockDim.x;
    for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < M; row += stride) {
        float acc = 0.0f;
        for (int c = 0; c < N; c++)
            acc += x[(size_t)row * N + c];
        y[row] = acc;
    }
}
