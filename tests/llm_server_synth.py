"""Synthesis replies of tests/llm_server.py (the s_* scenarios): a row
softmax kernel written from the reference of examples/synth/row_softmax.json,
in kopt synthesize's reply format, shaped as each scenario says."""
import json
import re


SYNTH_SOFTMAX = r"""#define WARPS 4
#define UNROLL 2
// Softmax of each row: a warp per row, shuffle reductions for the maximum
// and the sum, WARPS rows per block.
extern "C" __global__ void __launch_bounds__(WARPS * 32) ENTRY(float *__restrict__ y, const float *__restrict__ x,
                                                                int rows, int cols)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;
    float m = -3.402823466e38f;
#pragma unroll UNROLL
    for (int c = lane; c < cols; c += 32)
        m = fmaxf(m, xr[c]);
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
#pragma unroll UNROLL
    for (int c = lane; c < cols; c += 32)
        s += __expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    const float inv = 1.0f / s;
#pragma unroll UNROLL
    for (int c = lane; c < cols; c += 32)
        yr[c] = __expf(xr[c] - m) * inv;
}
"""

SYNTH_SOFTMAX_VEC = r"""#define WARPS 4
#define UNROLL 2
// Softmax of each row: a warp per row reading float4s, shuffle reductions
// for the maximum and the sum, WARPS rows per block (cols % 4 == 0).
extern "C" __global__ void __launch_bounds__(WARPS * 32) ENTRY(float *__restrict__ y, const float *__restrict__ x,
                                                                int rows, int cols)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    const float4 *xr = reinterpret_cast<const float4 *>(x + (size_t)row * cols);
    float4 *yr = reinterpret_cast<float4 *>(y + (size_t)row * cols);
    const int n4 = cols / 4;
    float m = -3.402823466e38f;
#pragma unroll UNROLL
    for (int c = lane; c < n4; c += 32) {
        const float4 v = xr[c];
        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
#pragma unroll UNROLL
    for (int c = lane; c < n4; c += 32) {
        const float4 v = xr[c];
        s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
    }
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    const float inv = 1.0f / s;
#pragma unroll UNROLL
    for (int c = lane; c < n4; c += 32) {
        float4 v = xr[c];
        v.x = __expf(v.x - m) * inv;
        v.y = __expf(v.y - m) * inv;
        v.z = __expf(v.z - m) * inv;
        v.w = __expf(v.w - m) * inv;
        yr[c] = v;
    }
}
"""


def synth_reply(req, scenario):
    """A kernel written from the reference of a row softmax spec
    (examples/synth/row_softmax.json), in kopt synthesize's reply format."""
    msgs = req.get("messages", [])
    turn = sum(1 for m in msgs if m.get("role") == "assistant")
    first = next((m.get("content") or "" for m in msgs if m.get("role") == "user"), "")
    names = re.findall(r'extern "C" __global__ void ([A-Za-z_][A-Za-z0-9_]*)\(', first)
    entry = names[-1] if names else "row_softmax_synth"  # the signature asked for, after the reference
    src = SYNTH_SOFTMAX
    knobs = [{"name": "WARPS", "values": [1, 2, 4, 8], "default": 4},
             {"name": "UNROLL", "values": [1, 2, 4], "default": 2}]
    constraints = []
    plan = "a warp per row with shuffle reductions"
    if scenario == "s_never":
        src = src.replace("const int lane = threadIdx.x & 31;", "const int lane = undefined_step_%d & 31;" % turn)
    elif scenario == "s_flow" and turn == 0:
        src = src.replace("const int lane = threadIdx.x & 31;", "const int lane = threadIdx.x & 31")
    elif scenario == "s_flow" and turn == 1:
        src = src.replace("yr[c] = __expf(xr[c] - m) * inv;", "yr[c] = __expf(xr[c] - m);")
    elif turn >= 3 or (scenario == "s_prose" and turn >= 1):
        src, plan = SYNTH_SOFTMAX_VEC, "float4 loads on the warp-per-row kernel"
        constraints = ["cols % 4 == 0"]
    src = src.replace("ENTRY", entry)
    doc = {"analysis": plan, "entry": entry, "source": src, "knobs": knobs, "constraints": constraints,
           "launch": {"grid": ["cdiv(rows, WARPS)", 1, 1], "block": ["WARPS * 32", 1, 1], "smem": 0}}
    if scenario == "s_quoteref":
        # the kernel, then the reference quoted back in a fence of its own,
        # and no entry: the kernel is what the writer meant
        ref = 'extern "C" __global__ void row_softmax_ref(float *y, const float *x, int rows, int cols) { }\n'
        doc["source"] = "Here:\n```cuda\n" + src + "```\nThe reference, for comparison:\n```cuda\n" + ref + "```"
        del doc["entry"]
    elif scenario == "s_named":
        # the entry named; its block first, an unrelated kernel after it
        other = 'extern "C" __global__ void helper_copy(float *y, const float *x, int rows, int cols) { }\n'
        doc["source"] = "```cuda\n" + src + "```\nand a helper:\n```cuda\n" + other + "```"
    elif scenario == "s_big" and turn == 0:
        doc["source"] = src + "// " + "x" * (300 * 1024) + "\n"
    elif scenario == "s_slow":
        doc["source"] = src + "// KOPT_TEST_SLOW\n"
    elif scenario == "s_constexpr":
        doc["source"] = "constexpr int WARPS = 4;\n" + src.replace("#define WARPS 4\n", "")
    if scenario == "s_prose":
        # lenient reading: prose around a fence, knobs as an object, the
        # source fenced inside its string, numbers as strings
        doc["knobs"] = {"WARPS": ["1", "2", "4", "8"], "UNROLL": [1, 2, 4]}
        doc["source"] = "```cuda\n" + src + "```"
        del doc["entry"]
        return "Here is the kernel:\n\n```json\n" + json.dumps(doc, indent=1) + "\n```\nIt should be fast."
    return json.dumps(doc)
