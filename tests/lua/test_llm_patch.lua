-- kopt.patch: unified diffs made and applied (round trips, sloppy model
-- diffs, hunks that do not match), and the kernel-only policy for edits.
local patch = require("kopt.patch")
local rng = require("kopt.rng").new(5)

local function check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

local kernel = table.concat({
  "#include <cuda_fp16.h>",
  "",
  "extern \"C\" __global__ void scale(float *y, const float *x, int n)",
  "{",
  "    int i = blockIdx.x * BLOCK + threadIdx.x;",
  "    if (i < n)",
  "        y[i] = 2.0f * x[i];",
  "}",
  "",
  "extern \"C\" __global__ void shift(float *y, const float *x, int n)",
  "{",
  "    int i = blockIdx.x * BLOCK + threadIdx.x;",
  "",
  "    if (i < n)",
  "        y[i] = x[i] + 1.0f;",
  "}",
}, "\n") .. "\n"

-- Round trips: random line edits, diffed and applied back.
local base = {}
for l in kernel:gmatch("(.-)\n") do base[#base + 1] = l end
for trial = 1, 200 do
  local lines = {}
  for i, l in ipairs(base) do lines[i] = l end
  for _ = 1, rng:random(1, 4) do
    local op, at = rng:random(1, 3), rng:random(1, #lines)
    if op == 1 then table.remove(lines, at)
    elseif op == 2 then table.insert(lines, at, "    // edit " .. rng:random(1, 1000))
    else lines[at] = lines[at] .. " /* changed */" end
  end
  local new = table.concat(lines, "\n") .. "\n"
  local d = patch.diff(kernel, new)
  local got, err = kernel, nil
  if d ~= "" then got, err = patch.apply(kernel, d) end
  check(got == new, "trial %d: round trip failed (%s)\n%s", trial, tostring(err), d)
end
check(patch.diff(kernel, kernel) == "", "equal texts give an empty diff")

-- A model-style diff: wrong line numbers, blank context line without its space.
local sloppy = table.concat({
  "--- a/kernel.cu",
  "+++ b/kernel.cu",
  "@@ -40,5 +40,6 @@",
  "     int i = blockIdx.x * BLOCK + threadIdx.x;",
  "",
  "-    if (i < n)",
  "-        y[i] = x[i] + 1.0f;",
  "+    if (i < n) {",
  "+        y[i] = __fadd_rn(x[i], 1.0f);",
  "+    }",
  " }",
}, "\n")
local got, err = patch.apply(kernel, sloppy)
check(got, "sloppy diff: %s", tostring(err))
check(got:find("__fadd_rn", 1, true) and got:find("2.0f * x[i]", 1, true), "sloppy diff changed the wrong place")

-- Context that is not in the source: a clear error naming the hunk and line.
local bad = "--- a/k.cu\n+++ b/k.cu\n@@ -1,3 +1,3 @@\n #include <cuda_fp16.h>\n" ..
            "@@ -5,2 +5,2 @@\n-    int j = 0;\n+    int j = 1;\n"
got, err = patch.apply(kernel, bad)
check(not got and err:find("hunk 2", 1, true) and err:find("int j = 0;", 1, true), "bad context: %s", tostring(err))
got, err = patch.apply(kernel, "just some words")
check(not got and err:find("no @@ hunks", 1, true), "not a diff: %s", tostring(err))

-- Kernel-only policy.
local function added(line) return "--- a/k\n+++ b/k\n@@ -1,1 +1,2 @@\n #include <cuda_fp16.h>\n+" .. line .. "\n" end
local rejected = {
  ["#include <stdio.h>"] = "allow%-list",
  ["    cudaMalloc(&p, 4);"] = "runtime API",
  ["    scale<<<1, 32>>>(y, x, n);"] = "kernel launch",
  ["__device__ float cache[1024];"] = "global __device__ variable",
  ["__host__ void helper() {}"] = "host code",
  ["#define BLOCK 4"] = "tuning knob BLOCK",
  ["int main() { return 0; }"] = "main function",
  ["    FILE *f = fopen(\"x\", \"w\");"] = "file access",
}
for line, why in pairs(rejected) do
  local ok, e = patch.check_kernel_only(added(line), { knobs = { "BLOCK" } })
  check(not ok and e:find(why), "%q should be rejected for %s, got %s", line, why, tostring(e))
end
for _, line in ipairs({ "#include <cuda_bf16.h>", "__device__ __forceinline__ float twice(float x) { return 2 * x; }",
                        "    __shared__ float tile[BLOCK];", "    asm volatile(\"membar.gl;\");",
                        "#define UNROLL_HELPER 4", "    // cudaMalloc is not called here" }) do
  local ok, e = patch.check_kernel_only(added(line), { knobs = { "BLOCK" } })
  check(ok, "%q should be accepted: %s", line, tostring(e))
end
print("ok")
