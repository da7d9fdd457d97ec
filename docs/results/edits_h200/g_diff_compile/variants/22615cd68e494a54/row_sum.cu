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
    int lane = threadIdx.x & 31;
    int warps = (gridDim.x * blockDim.x) >> 5;
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < M; row += warps) {
        float acc = 0.0f;
#pragma unroll 4
        for (int c = lane; c < N; c += 32)
            acc += x[(size_t)row * N + c];
        for (int o = 16; o > 0; o >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (lane == 0)
            y[row] = acc;
    }
}
