// kopt-template {"name": "coarsen", "shape": "coarsen", "knobs": [{"name": "BLOCK", "values": [128, 256, 512], "default": 256}, {"name": "ITEMS", "values": [1, 2, 4, 8], "default": 4}, {"name": "WAVES", "values": [4, 16, 64], "default": 16}], "launch": {"grid": ["min(cdiv(KOPT_VTHREADS, BLOCK * ITEMS), device.sm_count * WAVES)"], "block": ["BLOCK"], "smem": 0}}
// The reference, coarsened: each thread runs ITEMS threads of the
// reference's 1-D grid per step of a grid-stride loop over all of them, so a
// grid of a few waves does the work of the reference's whole grid. The
// reference's kernel becomes a device function of its virtual thread and
// block index (kopt.synth_templates rewrites threadIdx.x, blockIdx.x,
// blockDim.x and gridDim.x in it). Applies to references that use no shared
// memory, barriers or warp operations, on a 1-D launch.
KOPT_REFERENCE_BODY

extern "C" __global__ void __launch_bounds__(BLOCK) KOPT_ENTRY(KOPT_PARAMS)
{
    const long long total = KOPT_VTHREADS;
    const long long stride = (long long)gridDim.x * BLOCK * ITEMS;
    for (long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x; base < total; base += stride) {
#pragma unroll
        for (int u = 0; u < ITEMS; ++u) {
            const long long e = base + (long long)u * BLOCK;
            if (e < total)
                kopt_reference_body(KOPT_ARGS, (unsigned)(e % KOPT_VBLOCK), (unsigned)(e / KOPT_VBLOCK));
        }
    }
}
