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
--     kernel (ALPHA=2.0, not 2: y = ALPHA / 4 is 0.5, not 0).
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
  defs[#defs + 1] = table.concat(job.options, " "):match("%-DALPHA=%S+")
end
T.eq(defs[1], "-DALPHA=2.0", "the kernel's define")
T.eq(defs[2], defs[1], "the reference's define is the kernel's")

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
