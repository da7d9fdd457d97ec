-- What a model's edit may do, in the shapes models write it: the knobs stay
-- settable (a define outside its #ifndef guard is refused even when the edit
-- adds no line), global __device__ state in its less common spellings, file
-- names hidden from the include allow-list, device-side `new`, whole sources
-- with code elided, edit fields kopt cannot read (refused with a reason, not
-- measured as a knob change), a repair reply whose first proposal fails, and
-- log text cut inside a UTF-8 character.
local T = require("testlib")
local json = require("kopt.json")
local patch = require("kopt.patch")
local device_only = require("kopt.device_only")
local experts = require("kopt.experts")

-- 1. knob guards, judged on the sources before and after
local BASE = table.concat({
  "#ifndef VEC", "#define VEC 4", "#endif",
  "#if !defined(UNROLL)", "#define UNROLL 2", "#endif",
  'extern "C" __global__ void k(float *y) { y[threadIdx.x] = VEC * UNROLL; }', "" }, "\n")
local function guard_check(new, knobs)
  return patch.check_kernel_only(patch.diff(BASE, new), { knobs = knobs or { "VEC", "UNROLL" }, base = BASE, new = new })
end
local unguarded = BASE:gsub("#ifndef VEC\n", ""):gsub("#define VEC 4\n#endif\n", "#define VEC 4\n")
local ok, why = guard_check(unguarded)
T.check(not ok and why:find("VEC", 1, true) and why:find("#ifndef", 1, true),
        "a diff that deletes the guard only: %s", tostring(why))
ok, why = guard_check((BASE:gsub("#endif\n#if !defined", "#else\n#define VEC 8\n#endif\n#if !defined", 1)))
T.check(not ok and why:find("VEC", 1, true), "a define in the #else of its own guard: %s", tostring(why))
ok, why = guard_check(BASE .. "#undef UNROLL\n")
T.check(not ok and why:find("UNROLL", 1, true), "an #undef of a knob: %s", tostring(why))
ok, why = guard_check((BASE:gsub("y%[threadIdx.x%]", "y[threadIdx.x + 0]")))
T.check(ok, "an edit that keeps the guards: %s", tostring(why))
ok, why = guard_check((BASE:gsub("#ifndef VEC\n#define VEC 4\n", "#ifdef VEC\n#else\n#define VEC 4\n")))
T.check(ok, "a default in the #else of #ifdef: %s", tostring(why))
ok, why = guard_check(unguarded, { "UNROLL" })
T.check(ok, "a define of a name that is no knob: %s", tostring(why))
-- a base that already defines a knob unguarded is not blamed on the edit
local ok2, why2 = device_only.check_knob_guards(unguarded, unguarded:gsub("y%[", "y [", 1), { "VEC" })
T.check(ok2, "an unguarded define the base had: %s", tostring(why2))

-- 2. global __device__ variables, however spelled; functions still pass
local function policy(line)
  return patch.check_kernel_only(patch.diff(BASE, BASE .. line), { knobs = { "VEC" } })
end
for _, bad in ipairs({
  "__device__ __align__(16) float g_scratch[1024];\n",
  "__device__ unsigned int g_retire __attribute__((aligned(4)));\n",
  "__device__ int g_count(0);\n",
  "__device__ cuda::atomic<int> g_flag(0);\n",
  "__device__ unsigned int g_count\n{0};\n",
  "__device__ float g_last = -1.0f;\n",
  "__device__ float *g_cache = nullptr;\n",
  -- a const word that is no specifier of the variable
  "template <const int N> __device__ int g_st[N];\n",
  "__device__ Foo<const int> g_state;\n",
  "static __device__ float g_acc[4];\n",
}) do
  ok, why = policy(bad)
  T.check(not ok and why:find("__device__ variable", 1, true), "refuses %q (%s)", bad, tostring(why))
end
for _, good in ipairs({
  "__device__ __forceinline__ float twice(float x) { return 2 * x; }\n",
  "__device__ float half(float x);\n",
  "struct Acc {\n  float s;\n  __device__ Acc() : s(0.f) {}\n  __device__ Acc(const Acc &) = default;\n" ..
    "  __device__ float operator()(float v) const { return s + v; }\n};\n",
  "template <int N> __device__ __noinline__ int pick(const int (&v)[N], int i) { return v[i]; }\n",
  -- honest code that looks like a variable to a careless reader
  "__device__ __forceinline__ float4 &operator+=(float4 &a, const float4 &b) { a.x += b.x; return a; }\n",
  "struct K { float s; __device__ K &operator+=(float v) { s += v; return *this; }\n" ..
    "  __device__ bool operator<=(const K &o) const { return s <= o.s; } };\n",
  "template <int N>\n__device__ cuda::std::enable_if_t<(N >= 2), float2> load2(const float *p) { return {p[0], p[1]}; }\n",
  "__device__ decltype(0.f) zero() { return 0.f; }\n",
  "__device__ inline float mad3(float a, float b, float c) noexcept(true) { return a * b + c; }\n",
  "struct P { float v; __device__ P(float x) : v(x * 2.0f) {} };\n",
  "__host__ __device__ inline int ceil_div(int a, int b) { return (a + b - 1) / b; }\n",
  "__device__ const float kWeights[4] = { 0.1f, 0.2f, 0.3f, 0.4f };\n",
  -- the specifiers in any order
  "constexpr __device__ float kOne = 1.0f;\n",
  "static constexpr __device__ float kT[4] = { 1.f, 2.f, 3.f, 4.f };\n",
  "__device__ static const float kW[4] = { 1.f, 2.f, 3.f, 4.f };\n",
  "__host__ __forceinline__ __device__ float sq(float x) { return x * x; }\n",
  "__device__ inline __host__ float cube(float x) { return x * x * x; }\n",
  -- a helper named like the driver API's prefix
  "__device__ float cuSq(float x) { return x * x; }\n",
  "__device__ float shout(float v) { printf(\"new row sum %f\\n\", v); return v; }\n",
  "static_assert(VEC <= 8, \"VEC > 8 would need a new register budget\");\n",
}) do
  ok, why = policy(good)
  T.check(ok, "allows %q (%s)", good, tostring(why))
end
T.check(device_only.device_variable("auto f = [] __device__ (int i) { return i; };") == nil, "a device lambda")
-- a line inside a block comment the diff does not show opening is comment,
-- read in the new source's context
do
  local base = "/* The kernel:\n * one row per block\n */\n" .. BASE
  local new = base:gsub(" %* one row per block", " * one row per block; a new <<<grid>>> needs main() (none here)")
  ok, why = patch.check_kernel_only(patch.diff(base, new), { knobs = { "VEC" }, base = base, new = new })
  T.check(ok, "words inside a block comment: %s", tostring(why))
end
-- a knob's default may change inside its guard, and guards of several knobs
-- may share one #if
ok, why = guard_check((BASE:gsub("#define VEC 4", "#define VEC 8")))
T.check(ok, "a default changed inside its guard: %s", tostring(why))
ok, why = guard_check((BASE:gsub("#ifndef VEC\n#define VEC 4\n#endif\n#if !defined%(UNROLL%)",
                                 "#if !defined(VEC) && !defined(UNROLL)\n#define VEC 4")))
T.check(ok, "two guards in one #if: %s", tostring(why))
for _, cond in ipairs({ "!defined(VEC) || 1", "!defined(VEC) or 1", "!defined(VEC) | 1", "!defined(VEC) + 1",
                        "!defined(VEC) ? 1 : 1", "!defined(VEC) == 0", "!!defined(VEC)", "!defined(VEC) && 1 || 1" }) do
  ok, why = guard_check((BASE:gsub("#ifndef VEC\n", "#if " .. cond .. "\n")))
  T.check(not ok and why:find("VEC", 1, true), "#if %s guards nothing: %s", cond, tostring(why))
end
ok, why = guard_check((BASE:gsub("#ifndef VEC\n", "#if !defined(VEC) && __CUDA_ARCH__ >= 800\n")))
T.check(ok, "a guard in a conjunction: %s", tostring(why))
ok, why = guard_check((BASE:gsub("#ifndef VEC\n#define VEC 4", "#ifndef VEC\n#define VEC 4\n#endif\n#def\\\nine VEC 8\n#if 1")))
T.check(not ok and why:find("VEC", 1, true), "a define spliced over two lines: %s", tostring(why))

-- what the line mapping must not lose: an edited continuation line of a
-- multi-line macro (read as the joined line), an added line that begins
-- "++ " (no file header inside a hunk), a digit separator (no character
-- literal), a macro chain that doubles at each step
do
  local base = "#define LOAD(i) \\\n  (y[i])\n" .. BASE
  local new = base:gsub("  %(y%[i%]%)", "  (y[(size_t)malloc(4) + i])")
  ok, why = patch.check_kernel_only(patch.diff(base, new), { knobs = { "VEC" }, base = base, new = new })
  T.check(not ok and why:find("allocation", 1, true), "a continuation line: %s", tostring(why))
  local base2 = BASE .. "__device__ int bump(int i)\n{\n  return i;\n}\n"
  local new2 = base2:gsub("  return i;\n}\n", "++ i;\n  return i;\n}\n__device__ int g_state;\n")
  ok, why = patch.check_kernel_only(patch.diff(base2, new2), { knobs = { "VEC" }, base = base2, new = new2 })
  T.check(not ok and why:find("__device__ variable", 1, true), "after a line beginning ++: %s", tostring(why))
end
do
  -- a declaration split around a blank line the base already has
  local base = BASE .. "\n__device__ float half(float x) { return x / 2; }\n"
  local new = base:gsub("\n\n__device__ float half", "__device__ unsigned int\n\ng_count;\n__device__ float half")
  ok, why = patch.check_kernel_only(patch.diff(base, new), { knobs = { "VEC" }, base = base, new = new })
  T.check(not ok and why:find("__device__ variable", 1, true), "around a kept blank line: %s", tostring(why))
end
ok, why = policy("__device__ int scaled(int i) { const int N = 1'000; return i * N; } __device__ int g_hidden;\n")
T.check(not ok and why:find("__device__ variable", 1, true), "after a digit separator: %s", tostring(why))
do
  -- (Ma is Mb Mb, Mb is Mc Mc, ...: in the order the names are expanded)
  local defs = {}
  for i = 1, 24 do
    local a, b = string.char(96 + i), string.char(97 + i)
    defs[i] = string.format("#define M%s M%s M%s", a, b, b)
  end
  local t0 = os.clock()
  ok, why = policy(table.concat(defs, "\n") .. "\n__device__ int f(int x) { return Ma; }\n")
  T.check(not ok and why:find("expand", 1, true) and os.clock() - t0 < 5, "a macro chain: %s in %.1f s",
          tostring(why), os.clock() - t0)
end

-- 3. includes the allow-list cannot read, and device-side new
ok, why = policy("#include /* io */ <stdio.h>\n")
T.check(not ok and why:find("stdio.h", 1, true), "an include behind a comment: %s", tostring(why))
ok, why = policy("#define HDR <stdio.h>\n#include HDR\n")
T.check(not ok and why:find("macro", 1, true), "an include named by a macro: %s", tostring(why))
ok, why = policy("#include <math_constants.h>\n")
T.check(ok, "math_constants.h is device-side: %s", tostring(why))
ok, why = policy("__device__ float *grow(int n) { return new float[n]; }\n")
T.check(not ok and why:find("new", 1, true), "device-side new: %s", tostring(why))
ok, why = policy("/* a new value per thread */\n__device__ float keep(float v) { return v; }\n")
T.check(ok, "the word new in a comment: %s", tostring(why))

-- 4. comments stripped in one pass
local text = device_only.strip_comments("int a; // see /* below\nint b; /* x */ int c;\n")
T.check(text:find("int b;", 1, true) and text:find("int c;", 1, true), "a /* inside a line comment: %q", text)
local t0 = os.clock()
device_only.strip_comments(string.rep("/* open ", 30000))
T.check(os.clock() - t0 < 1, "unclosed comments took %.2f s", os.clock() - t0)

-- 5. a whole source with code elided is refused; a base that has the same
-- words is not blamed on the edit
local entry = { entry = "k" }
local elided = BASE:gsub("y%[threadIdx.x%] = VEC %* UNROLL;", "// ... rest of the kernel unchanged ...")
local new, err = patch.apply_edit(BASE, { kind = "source", text = elided }, entry)
T.check(not new and err:find("leaves code out", 1, true), "an elided source: %s", tostring(err))
for _, honest in ipairs({ "// same as before for the tail: one vector per step", "// ... then fold the partial sums",
                         "// lane 0 writes; the rest of y stays unchanged", "// keeps the existing code path for VEC == 1" }) do
  local src_h = BASE:gsub("(extern)", honest .. "\n%1")
  new, err = patch.apply_edit(BASE, { kind = "source", text = src_h }, entry)
  T.check(new, "an honest comment %q: %s", honest, tostring(err))
end
for _, elision in ipairs({ "    // ...", "  /* ... */", "...", "// (rest of the kernel unchanged)", "// existing code" }) do
  local src_e = BASE:gsub("(extern)", elision .. "\n%1")
  new, err = patch.apply_edit(BASE, { kind = "source", text = src_e }, entry)
  T.check(not new and err:find("leaves code out", 1, true), "an elision %q: %s", elision, tostring(err))
end
-- a diff or a search/replace that puts an elision where code was deletes
-- that code: refused as the whole source would be; an honest comment added
-- by either form is not
do
  local base = 'extern "C" __global__ void k(float *y, int n)\n{\n    int i = threadIdx.x;\n' ..
               '    if (i < n)\n        y[i] = 2.0f * i;\n}\n'
  local body = "    if (i < n)\n        y[i] = 2.0f * i;"
  local function sr(replacement)
    return { kind = "search_replace", text = "<<<<<<< SEARCH\n" .. body .. "\n=======\n" .. replacement ..
             "\n>>>>>>> REPLACE\n" }
  end
  new, err = patch.apply_edit(base, sr("    // ... rest unchanged"), entry)
  T.check(not new and err:find("replaces code with an elision", 1, true), "an elided search/replace: %s", tostring(err))
  local diff = patch.diff(base, (base:gsub("    if %(i < n%)\n        y%[i%] = 2.0f %* i;", "    // ... rest of the kernel unchanged")))
  new, err = patch.apply_edit(base, { kind = "diff", text = diff }, entry)
  T.check(not new and err:find("replaces code with an elision", 1, true), "an elided diff: %s", tostring(err))
  new, err = patch.apply_edit(base, sr("    // ... then store the doubled index\n" .. body), entry)
  T.check(new, "an honest comment by search/replace: %s", tostring(err))
end
-- a diff of several files edits the kernel's: a script or a new header
-- named first is not taken for it
do
  local base = 'extern "C" __global__ void k(float *y, int n)\n{\n    int i = threadIdx.x;\n' ..
               '    if (i < n)\n        y[i] = 2.0f * i;\n}\n'
  local kernel_hunk = "--- a/k.cu\n+++ b/k.cu\n@@ -4,2 +4,2 @@\n     if (i < n)\n-        y[i] = 2.0f * i;\n" ..
                      "+        y[i] = 3.0f * i;\n"
  for what, first in pairs({
    ["a script first"] = "--- a/bench.py\n+++ b/bench.py\n@@ -1,1 +1,1 @@\n-import numpy as np\n+import numpy\n",
    ["a new header first"] = "--- a/common.cuh\n+++ b/common.cuh\n@@ -0,0 +1,2 @@\n+#pragma once\n+#define FAST 1\n",
    ["a created file first"] = "--- /dev/null\n+++ b/util.cuh\n@@ -0,0 +1,1 @@\n+#pragma once\n",
    ["a host .cpp first"] = "--- a/main.cpp\n+++ b/main.cpp\n@@ -1,1 +1,1 @@\n-int main() {}\n+int main() { return 0; }\n",
  }) do
    local note
    new, err, note = patch.apply_edit(base, { kind = "diff", text = first .. kernel_hunk }, entry)
    T.check(new and new:find("3.0f * i", 1, true), "%s: the kernel's hunk is applied (%s)", what, tostring(err))
    -- the other file's hunks are left out with a note naming it, not unsaid
    local other = first:match("%+%+%+ b/(%S+)")
    T.check(note and note:find(other, 1, true) and note:find("left out", 1, true), "%s: a note names %s: %s", what,
            other, tostring(note))
  end
  local _, _, alone = patch.apply_edit(base, { kind = "diff", text = kernel_hunk }, entry)
  T.eq(alone, nil, "a diff of the kernel alone has no note")
end

-- an edit that changes comments or white space only is the same code (not
-- measured as a new kernel); any change to code is not
do
  local base = 'extern "C" __global__ void k(float *y, int n)\n{\n    int i = threadIdx.x;\n' ..
               '    if (i < n)\n        y[i] = 2.0f * i;\n}\n'
  T.check(patch.same_code(base, base:gsub("    int i", "    // the thread's element\n    int i")),
          "a comment added is the same code")
  T.check(patch.same_code(base, base:gsub("\n}", "   \n\n}"):gsub("    if", "\tif")), "white space is the same code")
  T.check(patch.same_code(base, base:gsub("2.0f %* i;", "2.0f * i; /* doubled */")), "a block comment is the same code")
  T.check(not patch.same_code(base, base:gsub("2.0f", "3.0f")), "a changed constant is other code")
  T.check(not patch.same_code(base, base:gsub("%(i < n%)", "(i <= n)")), "a changed condition is other code")
end
-- a source longer than a prompt shows is cut at a line end, the prompt says
-- how much it shows, and a whole source sent back with the marker is refused
do
  local X = require("kopt.experts")
  local long = {}
  for i = 1, 3000 do long[i] = string.format("    float v%d = x[%d] * 2.0f; // line %d", i, i, i) end
  local view = { name = "k", problem = {}, knobs = { { name = "VEC", values = { 1, 2 }, family = "vector" } },
                 config = { VEC = 1 }, edits = true, source = table.concat(long, "\n") .. "\n", symptoms = {},
                 history = {}, n = 2 }
  local prompt = X.user_prompt(view)
  -- an expert whose format is a whole source is asked for a diff there
  local asked = X.user_prompt(view, nil, "source")
  T.check(not asked:find(X.EDIT_FORMATS.source, 1, true) and asked:find(X.EDIT_FORMATS.diff, 1, true),
          "a cut source: a whole-source expert is asked for a diff")
  view.source = "__global__ void k() {}\n"
  T.check(X.user_prompt(view, nil, "source"):find(X.EDIT_FORMATS.source, 1, true),
          "a short source: a whole-source expert is asked for the whole source")
  view.source = table.concat(long, "\n") .. "\n"
  local shown = tonumber(prompt:match("Current best kernel source, its first (%d+) of 3000 lines"))
  T.check(shown and shown < 3000, "a long source: the prompt says how much it shows")
  T.check(prompt:find(string.format("// line %d\n// [truncated]\n", shown or -1), 1, true) ~= nil,
          "a long source is cut at a line end")
  local copied = BASE:gsub("(extern)", "// [truncated]\n%1")
  new, err = patch.apply_edit(BASE, { kind = "source", text = copied }, entry)
  T.check(not new and err:find("leaves code out", 1, true), "a whole source with the prompt's marker: %s", tostring(err))
end
-- the entry kernel's parameters keep their number and types (the worker
-- passes the spec's arguments by them) and its extern "C"; a pointer may
-- change its type, a parameter its name, const and sign
do
  local va = 'extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n)\n{\n' ..
             '  int i = threadIdx.x;\n  if (i < n) c[i] = a[i] + b[i];\n}\n'
  local function try(from, to)
    return patch.apply_edit(va, { kind = "source", text = (va:gsub(from, to)) }, { entry = "vector_add" })
  end
  for _, bad in ipairs({ { "int n%)", "size_t n)", "parameters from" }, { "int n%)", "int n, int stride)", "parameters from" },
                         { "int n%)", "int64_t n)", "parameters from" }, { "int n%)", "float n)", "parameters from" },
                         { "float %*c, ", "", "parameters from" }, { 'extern "C" ', "", 'drops extern "C"' } }) do
    local out, reason = try(bad[1], bad[2])
    T.check(not out and tostring(reason):find(bad[3], 1, true), "a signature edit %s -> %s: %s", bad[1], bad[2], tostring(reason))
  end
  for _, good in ipairs({ { "const float %*a", "const float4 *__restrict__ a" }, { "int n%)", "const int count)" },
                          { "int n%)", "unsigned int n)" }, { "int n%)", "int32_t n)" }, { "int n%)", "uint32_t n)" } }) do
    local out, reason = try(good[1], good[2])
    T.check(out, "an honest signature edit %s -> %s: %s", good[1], good[2], tostring(reason))
  end
  -- as a diff too
  local out, reason = patch.apply_edit(va, patch.diff(va, (va:gsub("int n%)", "long n)"))), { entry = "vector_add" })
  T.check(not out and tostring(reason):find("parameters from", 1, true), "a diff that changes a parameter: %s", tostring(reason))
end
local base2 = "// ... helpers come first\n" .. BASE
new, err = patch.apply_edit(base2, { kind = "source", text = base2:gsub("VEC %* UNROLL", "UNROLL * VEC") }, entry)
T.check(new, "a base with the same words: %s", tostring(err))
-- a SEARCH part that matches several places only once white space is ignored
local twice = BASE .. BASE:gsub("void k%(", "void k2(")
new, err = patch.apply_edit(twice, "<<<<<<< SEARCH\n#define  VEC 4\n=======\n#define VEC 4 \n>>>>>>> REPLACE\n", entry)
T.check(not new and err:find("matches 2 places compared line by line", 1, true), "loose twice: %s", tostring(err))

-- a diff with no line numbers, followed by notes after a blank line: the
-- notes' bullets are not removals
for _, head in ipairs({ "@@\n", "" }) do
  local d = head .. "#ifndef VEC\n-#define VEC 4\n+#define VEC 8\n #endif\n\nNotes:\n- a wider default\n- nothing else\n"
  new, err = patch.apply_edit(BASE, d, entry)
  T.check(new and new:find("#define VEC 8", 1, true), "a diff %s then notes: %s", head == "" and "without @@" or "with a bare @@",
          tostring(err))
end

-- 6. edit fields in other shapes: read, or refused with the field named
local DIFF = "@@ -1,1 +1,1 @@\n-#ifndef VEC\n+#ifndef VEC \n"
for what, p in pairs({
  ["edits as a string"] = { edits = DIFF },
  ["patch.unified_diff"] = { patch = { unified_diff = DIFF } },
  ["patch.content"] = { patch = { file = "kernel.cu", content = DIFF } },
  ["hunk objects"] = { patch = { { hunk = DIFF } } },
}) do
  local e, w = experts.edit_of(p)
  T.check(e and e.text == DIFF, "%s: %s", what, tostring(w))
end
for what, p in pairs({ ["patch true"] = { patch = true }, ["patch 3"] = { diff = 3 },
                       ["an object of no edit"] = { edit = { note = "see above" } } }) do
  local e, w = experts.edit_of(p)
  T.check(not e and w and w:find("not an edit kopt reads", 1, true), "%s: %s", what, tostring(w))
end
-- a patch that only points at the proposal's own kernel field: the kernel
local KSRC = 'extern "C" __global__ void k(float *y) {\n  y[0] = 1.0f;\n}\n'
for what, p in pairs({ ["see source"] = { patch = "see the source field", source = KSRC },
                       ["whole kernel below"] = { patch = "whole kernel below", kernel = KSRC } }) do
  local e, w = experts.edit_of(p)
  T.check(e and e.kind == "source" and e.text == KSRC, "%s: the kernel field is the edit (%s)", what, tostring(w))
end

-- a list of edits with an item kopt cannot read is refused whole, with the
-- item named: the rest alone is another kernel than the reply's
local PAIR = { search = "#ifndef VEC", replace = "#ifndef VEC " }
for what, p in pairs({
  ["an insert with an empty search"] = { edits = { PAIR, { search = "", replace = "#include <cuda_fp16.h>\n" } } },
  ["a null replace"] = { edits = { PAIR, { search = "#define VEC 4", replace = json.null } } },
  ["an insert_after object"] = { edits = { PAIR, { insert_after = "{", text = "  // hello" } } },
}) do
  local e, w = experts.edit_of(p)
  T.check(not e and w and w:find("\"edits\" field's item 2 is not an edit kopt reads", 1, true), "%s: %s", what,
          tostring(w))
end
local e2 = experts.edit_of({ edits = { PAIR, { search = "", replace = "" } } })
T.check(e2 and e2.kind == "search_replace" and #e2.blocks == 1, "an empty pair beside a pair is no edit of its own")
for what, p in pairs({ ["\"none\""] = { patch = "none" }, ["an empty diff"] = { patch = { diff = "" } },
                       ["empty pairs"] = { edits = { { search = "", replace = "" } } },
                       ["type none"] = { edit = { type = "none" } }, ["the kernel's name"] = { kernel = "k" },
                       ["an empty diff with its type"] = { diff = { type = "unified", diff = "" } },
                       ["an empty diff with its file"] = { patch = { file = "kernel.cu", diff = "" } } }) do
  local e, w = experts.edit_of(p)
  T.check(e == nil and w == nil, "%s is no edit, without a complaint (%s)", what, tostring(w))
end

-- 7. cut at a character boundary
local s = string.rep("a", 199) .. "\u{e9}tude"
T.eq(experts.cut(s, 200), string.rep("a", 199), "a two-byte character at the cut")
T.eq(experts.cut("abc", 10), "abc", "a short text")

-- 8. a repair reply whose first proposal does not apply: the second is
-- measured (offline: the reduce kernel on its recording, replies replayed)
local dir = T.tmpdir("edit-policy")
local function reply(id, tag, patches)
  local props = {}
  for i, d in ipairs(patches) do
    props[i] = { method = "loop_unrolling", changes = {}, reason = "r", patch = d }
  end
  return json.encode({ kind = "reply", id = id, tag = tag, status = 200, ok = true,
                       content = json.encode({ analysis = "a", proposals = props }) })
end
local wrong = "@@ -64,1 +64,1 @@\n-\t\t\tvec_t w = xr[i];\n+\t\t\tconst vec_t w = xr[i];\n"
local right = "@@ -64,1 +64,1 @@\n-\t\t\tvec_t v = xr[i];\n+\t\t\tconst vec_t v = xr[i];\n"
T.write(dir .. "/transcript.jsonl", reply(1, "throughput", { wrong }) .. "\n" ..
        reply(2, "throughput#repair", { wrong, right }) .. "\n")
local code, _, stderr = T.run(string.format(
  "experts specs/reduce.json --backend replay:tests/data/reduce_h200.t4.json --no-db --out %s/run -v " ..
  "--opt edits=on --opt llm_replay=%s/transcript.jsonl --opt experts=throughput --opt iterations=1 --opt init=1 " ..
  "--opt repairs=2", dir, dir), "KOPT_METHODS=off")
T.eq(code, 0, "the repair run (" .. stderr .. ")")
T.check(stderr:find("repair 1 of throughput/loop_unrolling: a fixed edit", 1, true),
        "the second proposal of the repair was not taken:\n%s", stderr)
local repaired = 0
for _, ev in ipairs(T.events(dir .. "/run")) do
  if type(ev.origin) == "table" and ev.origin.repair == 1 then repaired = repaired + 1 end
end
T.eq(repaired, 1, "measured repairs")

-- 9. synthesis: a knob's #define is found at a line's start only, a define
-- over several lines and a reserved name are refused, and the entry must be
-- defined in code, not named in a comment
local synth = require("kopt.synth")
local sspec = require("kopt.spec").load("examples/synth/row_softmax.json")
local function kernel(source, knob)
  return synth.parse({ analysis = "a", entry = "k", source = source, constraints = {},
                       knobs = { { name = knob or "W", values = { 1, 2 } } },
                       launch = { grid = { 1, 1, 1 }, block = { 32, 1, 1 }, smem = 0 } })
end
local K = kernel('// was: #define W 8\n#define W 1\nextern "C" __global__ void k(float *y, const float *x, int rows, int cols)\n{\n  y[0] = W;\n}\n')
local src = K and synth.check(K, sspec) and synth.materialize(K, { W = 2 }, sspec)
T.check(src and src:find("// was: #define W 8\n#define W 2\n", 1, true), "the commented define stays:\n%s",
        tostring(src))
K = kernel('#define W 1 \\\n  + 0\nextern "C" __global__ void k(float *y, const float *x, int rows, int cols)\n{\n  y[0] = W;\n}\n')
ok, why = synth.check(K, sspec)
T.check(not ok and why:find("over lines", 1, true), "a define over two lines: %s", tostring(why))
K = kernel('extern "C" __global__ void k(float *y, const float *x, int rows, int cols)\n{\n  y[0] = __CUDA_ARCH__;\n}\n', "__CUDA_ARCH__")
ok, why = synth.check(K, sspec)
T.check(not ok and why:find("reserved", 1, true), "a reserved knob name: %s", tostring(why))
K = kernel('// __global__ void k(float *y) was here\n__device__ float two() { return W; }\n')
ok, why = synth.check(K, sspec)
T.check(not ok and why:find("no __global__ function", 1, true), "an entry in a comment: %s", tostring(why))

-- 10. MCGS with expert moves says what a reply lost, once per kind of note
-- (the transcript's one reply is prose, the rest are missing)
T.write(dir .. "/prose.jsonl", json.encode({ kind = "reply", id = 1, tag = "throughput", status = 200, ok = true,
                                             content = "I would unroll the loop." }) .. "\n")
code, _, stderr = T.run(string.format(
  "mcgs specs/reduce.json --backend replay:tests/data/reduce_h200.t4.json --no-db --out %s/mcgs -v --budget 400 " ..
  "--seed 2 --opt moves=rules,experts --opt regraph=off", dir), "KOPT_METHODS=off KOPT_LLM_REPLAY=" .. dir .. "/prose.jsonl")
T.eq(code, 0, "the mcgs run (" .. stderr:sub(-300) .. ")")
local _, prose = stderr:gsub("expert throughput fell back to its heuristic: parse", "")
local _, missing = stderr:gsub("fell back to its heuristic: replay", "")
T.eq(prose, 1, "notes of the prose reply")
-- (three experts: three notes each, then one at 10 and one at 100)
T.check(missing >= 3 and missing <= 15, "notes of missing replies: %d", missing)
-- 11. a custom expert whose parse returns its moves alone (as the experts
-- module's header documents) runs; it used to end kopt with an internal error
T.write(dir .. "/myexp.lua", [[
local experts = require("kopt.experts")
local E = { name = "myexp", summary = "parse returns moves only", temperature = 0.4 }
function E.prompt(view) return { { role = "user", content = "propose" } } end
function E.parse(value, view) return (experts.parse(value, view, E.name)) end
function E.heuristic(view, rng) return {} end
return E
]])
T.write(dir .. "/myexp.jsonl", json.encode({ kind = "reply", id = 1, tag = "myexp", status = 200, ok = true,
  content = json.encode({ analysis = "a", proposals = { { method = "more_threads", changes = { BLOCK_SIZE = 128 },
                                                          reason = "r" } } }) }) .. "\n")
code, _, stderr = T.run(string.format(
  "experts specs/reduce.json --backend replay:tests/data/reduce_h200.t4.json --no-db -q --out %s/myexp " ..
  "--opt experts=%s/myexp.lua --opt llm_replay=%s/myexp.jsonl --opt iterations=1 --opt init=1", dir, dir, dir))
T.eq(code, 0, "a custom expert's moves-only parse (" .. stderr:sub(-300) .. ")")
os.execute("rm -rf '" .. dir .. "'")
return T.done()
