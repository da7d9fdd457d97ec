// kopt-template {"name": "matmul_tiled", "shape": "matmul", "knobs": [{"name": "TILE", "values": [8, 16, 32], "default": 16}, {"name": "WORK", "values": [1, 2, 4], "default": 2}], "constraints": ["TILE % WORK == 0"], "launch": {"grid": ["cdiv(KOPT_N, TILE)", "cdiv(KOPT_M, TILE)", 1], "block": ["TILE", "TILE / WORK", 1], "smem": 0}}
// C[M, N] = A[M, K] B[K, N] in fp32, row-major: TILE x TILE tiles of A and B
// staged in shared memory, each thread computing WORK outputs of a column.
extern "C" __global__ void __launch_bounds__(TILE * TILE / WORK) KOPT_ENTRY(KOPT_PARAMS)
{
    __shared__ float as[TILE][TILE + 1];
    __shared__ float bs[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * TILE + tx;
    const int row0 = blockIdx.y * TILE + ty * WORK;
    float acc[WORK];
#pragma unroll
    for (int w = 0; w < WORK; ++w)
        acc[w] = 0.0f;
    for (int k0 = 0; k0 < KOPT_K; k0 += TILE) {
#pragma unroll
        for (int w = 0; w < WORK; ++w) {
            const int r = ty * WORK + w;
            const int arow = blockIdx.y * TILE + r, acol = k0 + tx;
            as[r][tx] = (arow < KOPT_M && acol < KOPT_K) ? KOPT_IN0[(long long)arow * KOPT_K + acol] : 0.0f;
            const int brow = k0 + r;
            bs[r][tx] = (brow < KOPT_K && col < KOPT_N) ? KOPT_IN1[(long long)brow * KOPT_N + col] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            const float b = bs[k][tx];
#pragma unroll
            for (int w = 0; w < WORK; ++w)
                acc[w] += as[ty * WORK + w][k] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int w = 0; w < WORK; ++w)
        if (row0 + w < KOPT_M && col < KOPT_N)
            KOPT_OUT[(long long)(row0 + w) * KOPT_N + col] = acc[w];
}
