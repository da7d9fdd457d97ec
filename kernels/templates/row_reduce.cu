// kopt-template {"name": "row_reduce", "shape": "row_reduce", "ops": ["sum", "mean", "max"], "knobs": [{"name": "WARPS", "values": [1, 2, 4, 8, 16], "default": 4}, {"name": "VEC", "values": [1, 2, 4], "default": 4}], "constraints": ["KOPT_COLS % VEC == 0"], "launch": {"grid": ["KOPT_ROWS"], "block": ["WARPS * 32"], "smem": 0}}
// One block per row of a [ROWS, COLS] input, reduced over the last dimension
// (KOPT_OP 0: sum, 1: mean, 2: max): VEC-wide loads strided over the block,
// a shuffle reduction per warp, then one across the warps.
#if KOPT_OP == 2
#define KOPT_INIT (-__int_as_float(0x7f800000))
#define KOPT_COMBINE(a, b) fmaxf((a), (b))
#else
#define KOPT_INIT 0.0f
#define KOPT_COMBINE(a, b) ((a) + (b))
#endif

extern "C" __global__ void __launch_bounds__(WARPS * 32) KOPT_ENTRY(KOPT_PARAMS)
{
    const long long row = blockIdx.x;
    const float *in = KOPT_IN0 + row * (long long)KOPT_COLS;
    float acc = KOPT_INIT;
    if (VEC == 4) {
        const float4 *in4 = reinterpret_cast<const float4 *>(in);
        for (int c = threadIdx.x; c < KOPT_COLS / 4; c += WARPS * 32) {
            const float4 v = in4[c];
            acc = KOPT_COMBINE(acc, KOPT_COMBINE(KOPT_COMBINE(v.x, v.y), KOPT_COMBINE(v.z, v.w)));
        }
    } else if (VEC == 2) {
        const float2 *in2 = reinterpret_cast<const float2 *>(in);
        for (int c = threadIdx.x; c < KOPT_COLS / 2; c += WARPS * 32) {
            const float2 v = in2[c];
            acc = KOPT_COMBINE(acc, KOPT_COMBINE(v.x, v.y));
        }
    } else {
        for (int c = threadIdx.x; c < KOPT_COLS; c += WARPS * 32)
            acc = KOPT_COMBINE(acc, in[c]);
    }
    for (int o = 16; o > 0; o >>= 1)
        acc = KOPT_COMBINE(acc, __shfl_xor_sync(0xffffffffu, acc, o));
    __shared__ float part[WARPS];
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = part[0];
        for (int w = 1; w < WARPS; ++w)
            r = KOPT_COMBINE(r, part[w]);
#if KOPT_OP == 1
        r = r / (float)KOPT_COLS;
#endif
        KOPT_OUT[row] = r;
    }
}
