-- Replies a model can write that kopt once mishandled (found by writing them;
-- each check failed before its fix):
-- * an "edits" list mixing prose with search/replace pairs (or a patch list
--   holding null) ended the run with a traceback;
-- * "none needed", "(none)", "N/A (knob change only)" and the like were
--   read as an edit that does not apply, losing the knob change;
-- * a one-knob recap or an echo of the current best after the answer, or a
--   sketch with TODO after a whole kernel, replaced the answer;
-- * more than 32 JSON objects in prose before the answer lost it;
-- * a diff whose context is in two kernels went to the first one; prose
--   bullets after a diff read as "-" lines; a diff fence followed by the
--   whole kernel "for reference", or a second file (bench.py) in the diff,
--   mixed other text into the kernel; "the original, for comparison" after
--   a new kernel was taken as the edit;
-- * a __device__ variable split over lines, hidden in a macro or with a
--   parenthesised initializer, and malloc split from its "(", passed the
--   device-code-only policy;
-- * the entry check matched the entry's name in a comment;
-- * synthesis: constraints written as {"expr": ...} were dropped silently,
--   and NVRTC's line numbers were one off where kopt added a knob's #define.
local T = require("testlib")
local X = require("kopt.experts")
local llm = require("kopt.llm")
local patch = require("kopt.patch")
local synth = require("kopt.synth")
local cjson = require("cjson")

local VA = T.slurp("tests/data/specs/vector_add.cu")
local view = { knobs = { { name = "block_size_x", values = { 128, 256, 512, 1024 }, family = "block" } }, edits = true }

-- mixed edit lists: no error, the pair is the edit
local ok, e = pcall(X.edit_of, { edits = { "Unroll the loop", { search = "if (i < n)", replace = "if (i < n) // u" } } })
T.check(ok and e and e.kind == "search_replace" and #e.blocks == 1, "mixed edits list: %s", tostring(e))
ok, e = pcall(X.edit_of, { patch = { "@@ -5,2 +5,2 @@", "     if (i < n)", cjson.null } })
T.check(ok, "a patch list holding null: no error (%s)", tostring(e))

-- no-edit wording
for _, t in ipairs({ "none needed", "None needed.", "Not applicable", "N/A (knob change only)", "(none)", "<none>",
                     "nothing", "// no code change", "\226\128\148", "```\n```", "no-op", "knob change only" }) do
  T.eq(X.edit_of({ patch = t }), nil, "no edit: " .. t)
end

-- the most complete answer wins over a later fragment
local accept = X.schema(view).accept
local answer = '{"analysis":"a","proposals":[{"method":"tile_up","changes":{"block_size_x":128},"reason":"r"}]}'
local v = llm.extract_json(answer .. '\n\nIn short: the key change is {"changes": {"block_size_x": 256}}.', accept)
T.eq(v and v.proposals and v.proposals[1].method, "tile_up", "a recap after the answer")
v = llm.extract_json(answer .. '\nFor reference, the current best is {"config": {"block_size_x": 1024}}.', accept)
T.eq(v and v.proposals and v.proposals[1].method, "tile_up", "an echo of the current best after the answer")
v = llm.extract_json('{"proposals":[{"method":"a","changes":{"block_size_x":128}}]}\nNo wait, final: ' ..
                     '{"proposals":[{"method":"b","changes":{"block_size_x":512}}]}', accept)
T.eq(v and v.proposals[1].method, "b", "a corrected answer still wins (last of the complete ones)")
local prose = {}
for i = 1, 40 do prose[i] = string.format('Step %d sets {"x": %d}.', i, i) end
v = llm.extract_json(table.concat(prose, " ") .. "\n" .. answer, accept)
T.eq(v and v.proposals and v.proposals[1].method, "tile_up", "40 objects in prose before the answer")

-- synthesis: a whole kernel over a later sketch
local whole = { analysis = "a", entry = "k", source = 'extern "C" __global__ void k(float *y) { y[threadIdx.x] = 1.0f; }',
                knobs = {}, constraints = {}, launch = { grid = { 1, 1, 1 }, block = { 32, 1, 1 }, smem = 0 } }
local sketch = { analysis = "b", entry = "k", source = 'extern "C" __global__ void k(float *y) { /* TODO */ }',
                 knobs = {}, constraints = {}, launch = { grid = { 1, 1, 1 }, block = { 32, 1, 1 }, smem = 0 } }
T.check(synth.has_placeholders(sketch.source) and not synth.has_placeholders(whole.source), "placeholders seen")
local K = synth.parse({ analysis = "a", entry = "k", source = whole.source, knobs = {},
                        constraints = { { expr = "1 > 0" }, 7 }, launch = whole.launch })
T.eq(K and K.constraints[1], "1 > 0", "a constraint written as {expr=}")

-- diffs
local function apply(edit, src) return patch.apply_edit(src or VA, edit, { entry = "vector_add" }) end
local two = VA:gsub("vector_add", "vector_sub"):gsub("a%[i%] %+ b%[i%]", "a[i] - b[i]") .. VA
local new, err = apply("@@ @@\n     int i = blockIdx.x * block_size_x + threadIdx.x;\n-    if (i < n)\n" ..
                       "+    for (; i < n; i += gridDim.x * blockDim.x)\n", two)
T.check(not new and err:find("matches 2 places", 1, true), "an ambiguous hunk is refused: %s", tostring(err))
new = apply("@@ -12,2 +12,2 @@\n     int i = blockIdx.x * block_size_x + threadIdx.x;\n-    if (i < n)\n" ..
            "+    for (; i < n; i += gridDim.x * blockDim.x)\n", two)
T.check(new and new:find("vector_sub[^\n]*\n{\n    int i = blockIdx.x %* block_size_x %+ threadIdx.x;\n    if") and
        new:find("for %(; i < n"), "with line numbers the nearest place is taken")
new, err = apply("@@ -5,2 +5,2 @@\n     if (i < n)\n-        c[i] = a[i] + b[i];\n+        c[i] = __fadd_rn(a[i], b[i]);\n" ..
                 "\nThis change:\n- uses round-to-nearest addition\n- prevents FMA contraction\n")
T.check(new and new:find("__fadd_rn", 1, true) and not new:find("FMA", 1, true), "prose bullets after a diff: %s",
        tostring(err))
new, err = apply("```diff\n@@ -5,2 +5,2 @@\n     if (i < n)\n-        c[i] = a[i] + b[i];\n+        c[i] = b[i] + a[i];\n```\n" ..
                 "The whole kernel, for reference:\n```cuda\n" .. VA .. "```\n")
T.check(new and new:find("b%[i%] %+ a%[i%]") and select(2, new:gsub("__global__", "")) == 1,
        "a diff fence then the whole kernel: %s", tostring(err))
new, err = apply("--- a/vector_add.cu\n+++ b/vector_add.cu\n@@ -5,2 +5,2 @@\n     if (i < n)\n-        c[i] = a[i] + b[i];\n" ..
                 "+        c[i] = b[i] + a[i];\n--- a/bench.py\n+++ b/bench.py\n@@ -1,1 +1,2 @@\n import torch\n+import numpy as np\n")
T.check(new and not new:find("numpy", 1, true) and new:find("b%[i%] %+ a%[i%]"), "a second file in the diff: %s",
        tostring(err))
local newer = VA:gsub("a%[i%] %+ b%[i%]", "b[i] + a[i]")
new, err = apply("The new kernel:\n```cuda\n" .. newer .. "```\nThe original, for comparison:\n```cuda\n" .. VA .. "```\n")
T.check(new and new:find("b%[i%] %+ a%[i%]"), "new then old kernel: the new one (%s)", tostring(err))
new, err = apply("```cuda\n" .. VA:gsub("vector_add%(", "vadd(") .. "// was: extern \"C\" __global__ void vector_add(float *c)\n```\n")
T.check(not new and err:find("does not define the entry", 1, true), "the entry named in a comment: %s", tostring(err))

-- the device-code-only policy over lines joined
local function policy(added) return patch.check_kernel_only(patch.diff(VA, VA .. added)) end
for _, bad in ipairs({ "__device__ unsigned int\n g_counter;\n", "__device__ unsigned int g_counter = (0u);\n",
                       "#define KEEP __device__\nKEEP unsigned int g_counter;\n",
                       -- nested six deep
                       "#define A B\n#define B C\n#define C D\n#define D E\n#define E F\n#define F __device__\n" ..
                         "A int g_state;\n",
                       "__device__ unsigned g /* hits */;\n",
                       "__device__ void f() { void *p = malloc\n(4); }\n" }) do
  T.check(not policy(bad), "policy refuses %q", bad)
end
for _, good in ipairs({ "#define DEVICE_INLINE __device__ __forceinline__\nDEVICE_INLINE float twice(float x)\n{ return 2 * x; }\n",
                        "template <int N>\n__device__ float sum(const float (&v)[N])\n{ float s = 0; for (int i = 0; i < N; i++) s += v[i]; return s; }\n" }) do
  local okp, why = policy(good)
  T.check(okp, "policy allows %q (%s)", good, tostring(why))
end

-- an edit that defines 12,000 macros is checked in linear time (before: 41 s)
do
  local defs = {}
  for i = 1, 12000 do defs[i] = string.format("#define M%d %d", i, i) end
  local t0 = os.clock()
  local okp, why = policy(table.concat(defs, "\n") .. "\n")
  T.check(okp, "12000 defines: %s", tostring(why))
  T.check(os.clock() - t0 < 5, "12000 defines took %.1f s of CPU", os.clock() - t0)
end

-- lines the diff keeps between two added ones are not joined in: a changed
-- "__device__ float" line before an unchanged "warp_sum(float v) {" is no
-- variable with a later hunk's "float s = 0.0f;"
do
  local okp, why = patch.check_kernel_only("@@ -2,2 +2,2 @@\n-static __device__ float\n+static __device__ __forceinline__ float\n" ..
                                           " warp_sum(float v) {\n@@ -9,2 +9,2 @@\n-  float s = 0.f;\n+  float s = 0.0f;\n" ..
                                           "   if (i < n) s = x[i];\n")
  T.check(okp, "two hunks around kept lines pass the policy (%s)", tostring(why))
end

-- synthesis: the writer's line numbers survive an added #define
local Kd = synth.parse({ analysis = "a", entry = "k", source = 'extern "C" __global__ void k(float *y, const float *x, int rows, int cols)\n{\n  y[0] = W;\n}\n',
                         knobs = { { name = "W", values = { 1, 2 } } }, constraints = {},
                         launch = { grid = { 1, 1, 1 }, block = { 32, 1, 1 }, smem = 0 } })
local sspec = require("kopt.spec").load("examples/synth/row_softmax.json")
local text = Kd and synth.check(Kd, sspec) and synth.materialize(Kd, { W = 2 }, sspec)
T.check(text and text:find("^#define W 2\n#line 1\n"), "an added #define is followed by #line 1:\n%s", tostring(text))
return T.done()
