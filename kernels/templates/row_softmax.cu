// kopt-template {"name": "row_softmax", "shape": "row_map", "ops": ["softmax", "log_softmax"], "knobs": [{"name": "WARPS", "values": [1, 2, 4, 8, 16, 32], "default": 8}], "launch": {"grid": ["KOPT_ROWS"], "block": ["WARPS * 32"], "smem": 0}}
// One block per row of a [ROWS, COLS] input: the row's maximum, the sum of
// exp(x - max), then the outputs (KOPT_OP 0: softmax, 1: log-softmax), each
// pass strided over the block with shuffle reductions per warp.
__device__ __forceinline__ float kopt_block_reduce(float v, bool is_max, float *part)
{
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = part[0];
    for (int w = 1; w < WARPS; ++w)
        r = is_max ? fmaxf(r, part[w]) : r + part[w];
    __syncthreads();
    return r;
}

extern "C" __global__ void __launch_bounds__(WARPS * 32) KOPT_ENTRY(KOPT_PARAMS)
{
    __shared__ float part[WARPS];
    const long long row = blockIdx.x;
    const float *in = KOPT_IN0 + row * (long long)KOPT_COLS;
    float *out = KOPT_OUT + row * (long long)KOPT_COLS;
    float m = -__int_as_float(0x7f800000);
    for (int c = threadIdx.x; c < KOPT_COLS; c += WARPS * 32)
        m = fmaxf(m, in[c]);
    m = kopt_block_reduce(m, true, part);
    float s = 0.0f;
    for (int c = threadIdx.x; c < KOPT_COLS; c += WARPS * 32)
        s += __expf(in[c] - m);
    s = kopt_block_reduce(s, false, part);
#if KOPT_OP == 1
    const float lse = logf(s);
    for (int c = threadIdx.x; c < KOPT_COLS; c += WARPS * 32)
        out[c] = in[c] - m - lse;
#else
    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < KOPT_COLS; c += WARPS * 32)
        out[c] = __expf(in[c] - m) * inv;
#endif
}
