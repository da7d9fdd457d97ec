-- The bring-your-own-kernel examples (examples/byok/): each spec loads and
-- compiles in every config for sm_90 without a GPU (NVRTC), as the README
-- there says; they ran on an H200 (docs/results/gpu_tests/h200_session26).
local T = require("testlib")
local names = { "topk_rows", "scan_lookback", "tma_transpose", "dp4a_gemv", "bgemm_bf16", "gemm_bias_gelu", "spmv_gen",
                "softmax1d_pipe" }
for _, n in ipairs(names) do
  local code, out, err = T.run(string.format("compile examples/byok/%s/%s.json --all", n, n))
  T.check(code == 0 and not out:find("FAIL", 1, true), "%s: kopt compile --all: exit %d\n%s%s", n, code, out, err)
end
return T.done()
