-- What a kernel includes is what the spec's folders hold, wherever kopt
-- runs, and the compile cache follows it (kopt.compile, offline with
-- NVRTC):
--  1. a quoted #include is found next to the kernel, not in the folder kopt
--     runs in (NVRTC looks first in its program name's folder: the name is
--     the kernel's real path), and the compiler's messages name the file alone;
--  2. a header reached through a -I of the spec's options, or an #include
--     of a macro's value, is in the cache key: a changed header is compiled
--     again, never served stale;
--  3. a relative -I in kernel.options is the spec's folder's, not the
--     current one's (specs/README.md: paths are relative to the spec file);
--  4. a float knob the reference declares is defined for it as for the
--     kernel (ALPHA=2.0, not 2: y = ALPHA / 4 is 0.5, not 0);
--  5. a compile that ptxas fails says why (its error is left out of the log
--     of a compile with -v: kopt compiles again without it to read it);
--  6. the entry's spills and stack frame are its own, not those of a
--     __noinline__ function it calls (reported later in the same block);
--  7. __launch_bounds__ is read for an entry whose mangled name is long;
--  8. a knob used only as a template argument of the entry gets no
--     "appears nowhere" note;
--  9. a pipeline whose compiler log passes the 64 KiB cap (hundreds of
--     warnings) keeps ptxas's report of its later kernels: they are
--     checked, not reported missing.
local T = require("testlib")

local tmp = T.tmpdir("compile-includes")
local cache = "KOPT_CACHE_DIR=" .. tmp .. "/cache"
-- smem is 4 bytes per SIZE (`__shared__ float s[SIZE]`): the header read
local KERNEL = '#include "params.h"\nextern "C" __global__ void k(float *y, int n)\n' ..
               '{\n  __shared__ float s[SIZE];\n  s[threadIdx.x % SIZE] = n;\n  __syncthreads();\n' ..
               '  if (threadIdx.x < n) y[threadIdx.x] = s[(threadIdx.x + 1) % SIZE];\n}\n'
local function spec(dir, extra)
  T.write(dir .. "/spec.json", string.format([[{ "name": "inc",
  "kernel": { "source": "k.cu", "entry": "k"%s },
  "problem": { "n": 128 },
  "knobs": [ { "name": "BS", "values": [128], "default": 128 } ],
  "launch": { "grid": [1], "block": ["BS"] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "n", "type": "i32", "value": "n" } ] }]],
    extra or ""))
end
local function smem(code, out, err, what)
  T.eq(code, 0, (what or "") .. ": kopt compile (" .. err .. ")")
  return tonumber(out:match("smem%s+(%d+)%+"))
end
local function mkdir(d) assert(os.execute("mkdir -p '" .. d .. "'")) end

-- 1. the kernel's own header, from any folder
mkdir(tmp .. "/a/spec")
mkdir(tmp .. "/a/elsewhere")
T.write(tmp .. "/a/spec/k.cu", KERNEL)
T.write(tmp .. "/a/spec/params.h", "#define SIZE 4\n")
T.write(tmp .. "/a/elsewhere/params.h", "#define SIZE 8192\n")
spec(tmp .. "/a/spec")
for _, where in ipairs({ "spec", "elsewhere" }) do
  T.eq(smem(T.run("compile " .. tmp .. "/a/spec/spec.json --no-cache", cache, tmp .. "/a/" .. where)), 16,
       "run from " .. where .. ": the kernel's params.h (SIZE 4)")
end
T.write(tmp .. "/a/spec/k.cu", KERNEL:gsub("__syncthreads%(%);", "__syncthreads()"))
local code, out = T.run("compile " .. tmp .. "/a/spec/spec.json --no-cache", cache, tmp .. "/a/elsewhere")
T.eq(code, 1, "a kernel that does not compile")
T.check(out:find("%sk%.cu%(7%): error"), "the message names the file alone:\n%s", out)
T.check(not out:find(tmp .. "/a/spec/k.cu", 1, true), "the message does not name the folder:\n%s", out)

-- 2. a header through -I, and through a macro's value: never stale
mkdir(tmp .. "/b/hdrs")
T.write(tmp .. "/b/k.cu", KERNEL)
T.write(tmp .. "/b/hdrs/params.h", "#define SIZE 4\n")
spec(tmp .. "/b", string.format(', "options": ["-I%s/b/hdrs"]', tmp))
T.eq(smem(T.run("compile " .. tmp .. "/b/spec.json", cache)), 16, "-I: the first compile")
T.write(tmp .. "/b/hdrs/params.h", "#define SIZE 4096\n")
local c, o, e = T.run("compile " .. tmp .. "/b/spec.json", cache)
T.eq(smem(c, o, e, "-I"), 16384, "-I: a changed header is compiled again, not served from the cache")
mkdir(tmp .. "/m")
T.write(tmp .. "/m/k.cu", '#define HEADER "params.h"\n' .. KERNEL:gsub('#include "params.h"', "#include HEADER"))
T.write(tmp .. "/m/params.h", "#define SIZE 4\n")
spec(tmp .. "/m")
T.eq(smem(T.run("compile " .. tmp .. "/m/spec.json", cache)), 16, "#include HEADER: the first compile")
T.write(tmp .. "/m/params.h", "#define SIZE 1024\n")
T.eq(smem(T.run("compile " .. tmp .. "/m/spec.json", cache)), 4096, "#include HEADER: a changed header is compiled again")

-- 3. a relative -I is the spec's folder's
spec(tmp .. "/b", ', "options": ["-Ihdrs"]')
T.eq(smem(T.run("compile " .. tmp .. "/b/spec.json --no-cache", cache, "/")), 16384,
     "-Ihdrs, run from /: the spec's hdrs/ folder")
spec(tmp .. "/b", ', "options": ["--include-path", "hdrs"]')
T.eq(smem(T.run("compile " .. tmp .. "/b/spec.json --no-cache", cache, "/")), 16384,
     "--include-path hdrs, run from /: the spec's hdrs/ folder")

-- 4. a float knob the reference declares
local spec_mod = require("kopt.spec")
local compile = require("kopt.compile")
mkdir(tmp .. "/r")
T.write(tmp .. "/r/k.cu", 'extern "C" __global__ void k(float *y) { y[0] = ALPHA / 4; }\n' ..
                          'extern "C" __global__ void kref(float *y) { y[0] = ALPHA / 4; }\n')
T.write(tmp .. "/r/spec.json", [[{ "name": "refdef", "kernel": { "source": "k.cu", "entry": "k" },
  "knobs": [ { "name": "ALPHA", "values": [0.5, 2.0] } ],
  "launch": { "grid": [1], "block": [1] },
  "args": [ { "name": "y", "type": "f32", "shape": [1], "output": true } ],
  "reference": { "source": "k.cu", "entry": "kref", "knobs": ["ALPHA"], "launch": { "grid": [1], "block": [1] } } }]])
local s = spec_mod.load(tmp .. "/r/spec.json")
local defs = {}
for _, job in ipairs({ compile.job_for(s, { ALPHA = 2 }, "sm_90"), compile.reference_job(s, "sm_90", { ALPHA = 2 }) }) do
  defs[#defs + 1] = job.source:match("#define ALPHA [^\n]+")
end
T.eq(defs[1], "#define ALPHA 2.0", "the kernel's define")
T.eq(defs[2], defs[1], "the reference's define is the kernel's")
-- a knob with define = false that the reference declares is a template
-- argument there too: no -D for it (-DR=1 made `template <int R>` read
-- `template <int 1>`)
mkdir(tmp .. "/nd")
T.write(tmp .. "/nd/k.cu", 'template <int R> __global__ void box(const float *x, float *y, int n) {\n' ..
  '  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = R * x[i];\n}\n' ..
  'template <int R> __global__ void box_ref(const float *x, float *y, int n) {\n' ..
  '  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = R * x[i];\n}\n')
T.write(tmp .. "/nd/spec.json", [[{ "name": "nd", "kernel": { "source": "k.cu", "entry": "box<R>" },
  "problem": { "n": 4096 }, "knobs": [ { "name": "R", "values": [1, 2], "define": false } ],
  "launch": { "grid": ["cdiv(n, 128)"], "block": [128] },
  "args": [ { "name": "x", "type": "f32", "shape": ["n"] }, { "name": "y", "type": "f32", "shape": ["n"], "output": true },
            { "name": "n", "type": "i32", "value": "n" } ],
  "reference": { "source": "k.cu", "entry": "box_ref<R>", "knobs": ["R"], "launch": { "grid": ["cdiv(n, 256)"], "block": [256] } } }]])
code, out = T.run("compile " .. tmp .. "/nd/spec.json --all --no-cache", cache)
T.eq(code, 0, "a define = false knob in reference.knobs: every build compiles:\n" .. out)

-- each of its two reference builds in a CUBIN file of its own (one file
-- was written over)
T.eq((T.run("compile " .. tmp .. "/r/spec.json --all --cubin " .. tmp .. "/r/cubins", cache)), 0, "--cubin")
local files = require("kopt.sys").list_dir(tmp .. "/r/cubins") or {}
table.sort(files)
T.eq(table.concat(files, " "), "refdef-1.cubin refdef-2.cubin refdef-ref-2.cubin refdef-ref.cubin", "--cubin files")

-- 5. ptxas's own error
mkdir(tmp .. "/p")
T.write(tmp .. "/p/k.cu", KERNEL:gsub('#include "params.h"', "#define SIZE 16384"))
spec(tmp .. "/p")
code, out = T.run("compile " .. tmp .. "/p/spec.json --no-cache", cache)
T.eq(code, 1, "64 KiB of static shared memory does not compile")
T.check(out:find("ptxas error", 1, true) and out:find("uses too much shared data", 1, true), "ptxas says why:\n%s", out)

-- 6. the entry's own spills
mkdir(tmp .. "/s")
T.write(tmp .. "/s/k.cu", [[
__device__ __noinline__ float helper(const float *y, int j) { return y[j] * 2.0f; }
extern "C" __global__ void __launch_bounds__(1024, 2) k(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[48];
  #pragma unroll
  for (int j = 0; j < 48; j++) acc[j] = y[i + j * n];
  float s = 0;
  #pragma unroll
  for (int r = 0; r < 4; r++)
  #pragma unroll
  for (int j = 0; j < 48; j++) { acc[j] = acc[j] * acc[(j + r) % 48] + 1.0f; }
  #pragma unroll
  for (int j = 0; j < 48; j++) s += acc[j] * y[j];
  y[i] = s + helper(y, i);
}
]])
spec(tmp .. "/s")
code, out = T.run("compile " .. tmp .. "/s/spec.json --no-cache --log", cache)
T.eq(code, 0, "the spill kernel compiles")
local frame = tonumber(out:match("Function properties for k\n[^\n]-(%d+) bytes stack frame"))
T.check(frame and frame > 0, "ptxas reports the entry's stack frame:\n%s", out)
T.check(frame and out:find(string.format("[local %d B]", frame), 1, true), "the entry's stack frame (%s B) is reported:\n%s",
        tostring(frame), out)

-- 7 and 8. a template entry with a long mangled name: its launch bounds,
-- and its knob used only as a template argument
mkdir(tmp .. "/t")
local tags = {}
for i = 1, 12 do tags[i] = string.format("struct Tag%d_WithAVeryLongDescriptiveNameForTheMangledSymbol {};", i) end
T.write(tmp .. "/t/k.cu", table.concat(tags, "\n") .. [[

template <int THREADS, class A, class B, class C, class D, class E, class F, class G, class H, class I, class J,
          class K, class L>
__global__ void __launch_bounds__(THREADS) tk(float *y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 1.0f; }
]])
local targs = {}
for i = 1, 12 do targs[i] = string.format("Tag%d_WithAVeryLongDescriptiveNameForTheMangledSymbol", i) end
T.write(tmp .. "/t/spec.json", string.format([[{ "name": "tmpl", "kernel": { "source": "k.cu", "entry": "tk<LB, %s>" },
  "problem": { "n": 64 }, "knobs": [ { "name": "LB", "values": [64, 256] } ],
  "launch": { "grid": [1], "block": [256] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "n", "type": "i32", "value": "n" } ] }]],
  table.concat(targs, ", ")))
local err
code, out, err = T.run("compile " .. tmp .. "/t/spec.json --all --no-cache", cache)
T.eq(code, 1, "LB=64 cannot launch 256 threads")
T.check(out:find("cannot launch: block of 256 threads, at most 64", 1, true), "the launch bounds are read:\n%s", out)
T.check(not (out .. err):find("appears nowhere", 1, true), "no note for a knob in the entry:\n%s%s", out, err)
-- a knob with define = false, no options and named nowhere in the spec
-- compiles every value to one kernel: noted as a knob named nowhere is
-- (define = false left it out of the check)
T.write(tmp .. "/t/spec2.json", [[{ "name": "nodef", "kernel": { "source": "k.cu", "entry": "tk<64, Tag>" },
  "problem": { "n": 64 }, "knobs": [ { "name": "UNROLLL", "values": [1, 2, 4], "define": false } ],
  "launch": { "grid": [1], "block": [64] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "n", "type": "i32", "value": "n" } ] }]])
T.write(tmp .. "/t/k.cu", "struct Tag {};\n" .. T.slurp(tmp .. "/t/k.cu"))
do
  local _, nout, nerr = T.run("compile " .. tmp .. "/t/spec2.json --no-cache", cache)
  T.check((nout .. nerr):find("knob UNROLLL appears nowhere", 1, true), "a define = false knob named nowhere:\n%s%s", nout,
          nerr)
end

-- 9. a pipeline with a log past the cap
mkdir(tmp .. "/big")
local warns = {}
for i = 1, 600 do warns[i] = string.format("__device__ void unused_warn_%d() { int unused_variable_number_%d = %d; }", i, i, i) end
T.write(tmp .. "/big/scan_pipe.cu", table.concat(warns, "\n") .. "\n" .. T.slurp("tests/honest/scan_pipe.cu"))
T.write(tmp .. "/big/scan_pipe.json", T.slurp("tests/honest/scan_pipe.json"))
code, out = T.run("compile " .. tmp .. "/big/scan_pipe.json --no-cache", cache)
T.eq(code, 0, "a pipeline with a log past the cap compiles:\n" .. out)
T.check(not out:find("no kernel", 1, true), "its later kernels are found:\n%s", out)

-- 10. --sample far past the space's size stops once the space has no new
-- config (it drew 50 times per config asked: an hour for 10^8)
local t0 = os.time()
local ok_sample = os.execute(string.format("timeout 120 %s compile %s/b/spec.json --sample 100000000 " ..
                                           ">/dev/null 2>&1", T.kopt, tmp))
T.check(ok_sample and os.time() - t0 < 60, "--sample 10^8 of a one-config space took %d s", os.time() - t0)

-- 11. another architecture than the device kopt knows: its shared memory
-- is not judged by the H100's limit, and the output says so
code, out = T.run("compile specs/matmul_f16.json --arch sm_120 --config WARPS=8,BLOCK_M=128,BLOCK_N=256,STAGES=4", cache)
T.check(code == 0 and out:find("note: shared memory is not checked: kopt knows the limits of sm_90", 1, true),
        "--arch sm_120: the limits are said to be another GPU's:\n%s", out)
code, out = T.run("compile specs/matmul_f16.json --arch sm_90a --config WARPS=8,BLOCK_M=128,BLOCK_N=256,STAGES=4", cache)
T.check(code == 0 and not out:find("not checked", 1, true), "--arch sm_90a is the device's:\n%s", out)

-- 12. an #include of a device file: NVRTC refuses it; kopt's digest of the
-- included headers does not read it forever (it ran out of memory)
mkdir(tmp .. "/z")
T.write(tmp .. "/z/k.cu", '#include "/dev/zero"\n' .. KERNEL:gsub('#include "params.h"', "#define SIZE 4"))
spec(tmp .. "/z")
local zerr
code, out, zerr = T.run("compile " .. tmp .. "/z/spec.json --no-cache", cache)
T.check(code == 1 and out:find("not a regular file", 1, true) and not zerr:find("internal error", 1, true),
        "#include \"/dev/zero\": NVRTC's refusal, not kopt's internal error (%d):\n%s%s", code, out, zerr)

-- 13. --timeout: a config whose compile runs long (a deep template
-- recursion) fails after the time given, not after 10 minutes
mkdir(tmp .. "/h")
T.write(tmp .. "/h/k.cu", [[
__device__ __forceinline__ float body(float a, const float *y, int i) { return a * 1.0001f + y[i & 1023]; }
template <int D> __device__ __forceinline__ float rec(float a, const float *y, int i) {
  if constexpr (D == 0) return body(a, y, i); else return rec<D-1>(rec<D-1>(a, y, i), y, i + D);
}
extern "C" __global__ void k(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = rec<DEPTH>(y[i & 1023], y, i);
  if (i < n) y[i] = a;
}
]])
T.write(tmp .. "/h/spec.json", [[{ "name": "slow", "kernel": { "source": "k.cu", "entry": "k", "options": ["-std=c++17"] },
  "problem": { "n": 1024 }, "knobs": [ { "name": "DEPTH", "values": [18] } ],
  "launch": { "grid": ["cdiv(n, 128)"], "block": [128] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "n", "type": "i32", "value": "n" } ] }]])
local ht = os.time()
local hp = io.popen(string.format("timeout 100 %s compile %s/h/spec.json --no-cache --timeout 2 2>&1", T.kopt, tmp))
local hout = hp:read("a")
hp:close()
T.check(hout:find("compile timed out after 2 s", 1, true) and os.time() - ht < 60,
        "--timeout 2: the compile fails after 2 s (%d s):\n%s", os.time() - ht, hout)

-- knobs named as names NVRTC's built-in header uses (width, mode, offset):
-- as -D options they came before that header and broke every compile
-- ("expected an identifier"); written ahead of the source, they come after
-- it, as Kernel Tuner writes them. Line numbers stay the file's own.
mkdir(tmp .. "/w")
T.write(tmp .. "/w/k.cu", 'extern "C" __global__ void k(float *y)\n{\n  y[0] = (float)(width + mode + offset);\n}\n')
T.write(tmp .. "/w/spec.json", [[{ "name": "names", "kernel": { "source": "k.cu", "entry": "k" },
  "knobs": [ { "name": "width", "values": [2] }, { "name": "mode", "values": [1] }, { "name": "offset", "values": [3] } ],
  "launch": { "grid": [1], "block": [1] },
  "args": [ { "name": "y", "type": "f32", "shape": [1], "output": true } ] }]])
local wc, wout, werr = T.run("compile " .. tmp .. "/w/spec.json --no-cache", cache)
T.check(wc == 0 and wout:find(" ok ", 1, true), "knobs named width, mode, offset compile: %d\n%s%s", wc, wout, werr)
T.write(tmp .. "/w/k.cu", 'extern "C" __global__ void k(float *y)\n{\n  y[0] = (float)(width + mode + offset) + nope;\n}\n')
wc, wout, werr = T.run("compile " .. tmp .. "/w/spec.json --no-cache --log", cache)
T.check(wc ~= 0 and (wout .. werr):find("k.cu(3): error", 1, true), "the error is on the file's line 3:\n%s%s", wout, werr)
-- a message about a define itself (a knob the source defines again) is
-- not put on a line of the file: it named "k.cu(3)", a comment there
T.write(tmp .. "/w/k.cu", '// one\n// two\n// three\n#define mode 8\nextern "C" __global__ void k(float *y)\n' ..
                          '{\n  y[0] = (float)(width + mode + offset);\n}\n')
wc, wout, werr = T.run("compile " .. tmp .. "/w/spec.json --no-cache --log", cache)
T.check(wc == 0 and (wout .. werr):find("k.cu(4): warning", 1, true) and (wout .. werr):find("kopt knob defines", 1, true),
        "the redefinition is on the file's line 4, the first definition among the knob defines:\n%s%s", wout, werr)

-- a header pre-included by an option that reads a knob: the defines that
-- head the source came after it ("identifier TILE is undefined")
mkdir(tmp .. "/pre")
T.write(tmp .. "/pre/pre.h", "constexpr int kTile = TILE;\n")
T.write(tmp .. "/pre/k.cu", 'extern "C" __global__ void k(float *y, int n) { if (threadIdx.x < n) y[threadIdx.x] = kTile; }\n')
T.write(tmp .. "/pre/spec.json", [[{ "name": "pre", "kernel": { "source": "k.cu", "entry": "k",
  "options": ["--pre-include=]] .. tmp .. [[/pre/pre.h"] }, "problem": { "n": 64 },
  "knobs": [ { "name": "TILE", "values": [32, 64] } ], "launch": { "grid": [1], "block": [64] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "n", "type": "i32", "value": "n" } ] }]])
do
  local pc, pout, perr = T.run("compile " .. tmp .. "/pre/spec.json --all --no-cache", cache)
  T.check(pc == 0 and select(2, pout:gsub(" ok ", "")) == 2, "a pre-included header reads a knob: %d\n%s%s", pc, pout, perr)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
