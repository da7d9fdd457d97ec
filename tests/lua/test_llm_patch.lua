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
-- Edits in the shapes other models write them.
do
  local va = table.concat({
    "extern \"C\" __global__ void scale(float *y, const float *x, int n)",
    "{",
    "    int i = blockIdx.x * BLOCK + threadIdx.x;",
    "    if (i < n)",
    "        y[i] = 2.0f * x[i];",
    "}",
  }, "\n") .. "\n"
  local fast = va:gsub("2%.0f %* x%[i%]", "x[i] + x[i]")
  local opts = { entry = "scale" }
  -- a SEARCH part that matches twice is refused, naming the lines
  local twice = va .. va:gsub("scale", "scale2")
  local out, e = patch.apply_edit(twice, "<<<<<<< SEARCH\n    if (i < n)\n=======\n    if (i < n && i >= 0)\n>>>>>>> REPLACE\n", opts)
  check(not out and e:find("matches 2 places (source lines 4, 10)", 1, true), "ambiguous SEARCH: %s", tostring(e))
  -- a block cut off before its REPLACE marker says so
  out, e = patch.apply_edit(va, "<<<<<<< SEARCH\n        y[i] = 2.0f * x[i];\n=======\n        y[i] = x[i] + x[i];\n", opts)
  check(not out and e:find("no >>>>>>> REPLACE end", 1, true), "cut-off block: %s", tostring(e))
  -- context indented with no-break spaces still matches
  out, e = patch.apply(va, "@@ -4,2 +4,2 @@\n \194\160\194\160\194\160\194\160if (i < n)\n-        y[i] = 2.0f * x[i];\n+        y[i] = x[i] + x[i];\n")
  check(out == fast, "no-break-space context: %s", tostring(e))
  -- a diff that creates the file replaces the source
  local created = "--- /dev/null\n+++ b/scale.cu\n@@ -0,0 +1,6 @@\n"
  for line in fast:gmatch("([^\n]*)\n") do created = created .. "+" .. line .. "\n" end
  out, e = patch.apply_edit(va, created, opts)
  check(out == fast, "whole-file diff: %s", tostring(e or out))
  -- renaming or deleting the entry kernel is refused, in every format
  out, e = patch.apply_edit(va, "@@ -1,1 +1,1 @@\n-extern \"C\" __global__ void scale(float *y, const float *x, int n)\n" ..
                                "+extern \"C\" __global__ void scale_v2(float *y, const float *x, int n)\n", opts)
  check(not out and e:find("removes or renames the entry kernel scale", 1, true), "renaming diff: %s", tostring(e))
  out, e = patch.apply_edit(va, { kind = "source", text = "// a faster scale\n" .. va:gsub("void scale", "void other") }, opts)
  check(not out and e:find("does not define the entry kernel scale", 1, true), "entry only in a comment: %s", tostring(e))
  -- a source quoted before and after: the last block defining the entry
  out, e = patch.apply_edit(va, { kind = "source", text = "Before:\n```cuda\n" .. va .. "```\nAfter:\n~~~ cuda\n" .. fast .. "~~~\n" }, opts)
  check(out == fast, "before/after blocks: %s", tostring(e or out))
  -- a diff split over two fences, one indented in a list
  local two = "1. First:\n   ```diff\n   @@ -3,1 +3,1 @@\n   -    int i = blockIdx.x * BLOCK + threadIdx.x;\n" ..
              "   +    const int i = blockIdx.x * BLOCK + threadIdx.x;\n   ```\n2. Then:\n```diff\n@@ -5,1 +5,1 @@\n" ..
              "-        y[i] = 2.0f * x[i];\n+        y[i] = x[i] + x[i];\n```\n"
  out, e = patch.apply_edit(va, two, opts)
  check(out == fast:gsub("    int i", "    const int i"), "two fences: %s", tostring(e or out))
  -- a template entry: the function's name is what must stay defined
  local tpl = "template <typename T, int B>\n__global__ void stencil(T *y, const T *x, int n)\n{\n    y[0] = x[0];\n}\n"
  out, e = patch.apply_edit(tpl, "<<<<<<< SEARCH\n    y[0] = x[0];\n=======\n    y[0] = x[0] + x[0];\n>>>>>>> REPLACE\n",
                            { entry = "stencil<float, 128>" })
  check(out and out:find("x[0] + x[0]", 1, true), "template entry edit: %s", tostring(e))
  out, e = patch.apply_edit(tpl, "<<<<<<< SEARCH\n__global__ void stencil(T *y, const T *x, int n)\n=======\n" ..
                            "__global__ void stencil2(T *y, const T *x, int n)\n>>>>>>> REPLACE\n", { entry = "stencil<float, 128>" })
  check(not out and e:find("removes or renames the entry kernel", 1, true), "template entry renamed: %s", tostring(e))
  -- not a diff, blocks or a source at all
  out, e = patch.apply_edit(va, { kind = "source", text = "Use a larger block size." }, opts)
  check(not out and e:find("no __global__ function", 1, true), "prose as a source: %s", tostring(e))
end

-- a search/replace pair that searches whole lines (its SEARCH ends with a
-- line end) and replaces them without one keeps the line end: the next
-- source line does not join a comment
do
  local out, e = patch.apply_search_replace(kernel, { { search = "    int i = blockIdx.x * BLOCK + threadIdx.x;\n\n",
                                                        replace = "    int i = blockIdx.x * blockDim.x + threadIdx.x;  // any block" } })
  check(out and out:find("// any block\n    if (i < n)", 1, true), "a pair without its line end: %s",
        tostring(out or e))
end

-- hunks whose contexts overlap (the second begins on a line the first kept
-- as context), as models write them, apply as meant
do
  local d = "--- a/k.cu\n+++ b/k.cu\n@@ -4,3 +4,3 @@\n {\n-    int i = blockIdx.x * BLOCK + threadIdx.x;\n" ..
            "+    int i = blockIdx.x * blockDim.x + threadIdx.x;\n     if (i < n)\n@@ -6,2 +6,2 @@\n     if (i < n)\n" ..
            "-        y[i] = 2.0f * x[i];\n+        y[i] = x[i] + x[i];\n"
  local out, e = patch.apply(kernel, d)
  check(out and out:find("blockDim.x + threadIdx.x;\n    if (i < n)\n        y[i] = x[i] + x[i];", 1, true),
        "overlapping hunks: %s", tostring(out or e))
end

-- hunks out of order, each with its line number, apply in the source's order
do
  local d = "--- a/k.cu\n+++ b/k.cu\n@@ -16,2 +16,2 @@\n     if (i < n)\n-        y[i] = x[i] + 1.0f;\n" ..
            "+        y[i] = 1.0f + x[i];\n@@ -6,2 +6,2 @@\n     if (i < n)\n-        y[i] = 2.0f * x[i];\n" ..
            "+        y[i] = x[i] * 2.0f;\n"
  local out, e = patch.apply(kernel, d)
  check(out and out:find("y[i] = x[i] * 2.0f;", 1, true) and out:find("y[i] = 1.0f + x[i];", 1, true),
        "hunks out of order: %s", tostring(out or e))
end

-- a hunk of 40,000 context lines (a model that pads its diff) is refused in
-- linear time: before, its change-by-change fallback took minutes
do
  local lines = { "@@ @@" }
  for _ = 1, 40000 do lines[#lines + 1] = " {" end
  lines[#lines + 1] = "-    c[i] = a[i] + b[i];"
  lines[#lines + 1] = "+    c[i] = b[i] + a[i];"
  local t0 = os.clock()
  local out, e = patch.apply(kernel, table.concat(lines, "\n") .. "\n")
  local took = os.clock() - t0
  check(not out and e ~= nil, "a padded hunk that does not apply: refused")
  check(took < 2, "a hunk of 40000 context lines took %.1f s of CPU", took)
end

print("ok")
