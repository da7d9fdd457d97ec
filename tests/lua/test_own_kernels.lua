-- Specs and kernels of the kinds users bring, through `kopt compile`, `kopt
-- ptx` and the spec loader (NVRTC, no GPU); each check failed before its
-- fix:
-- * kopt ptx of a template entry analysed another instance, or none;
-- * kopt compile of a pipeline checked its first kernel only (a misspelt
--   later entry, or one whose launch bounds its block breaks, passed);
-- * a float knob's whole values were defined as integers (-DALPHA=2);
-- * --config could not give a value with a space, or an empty one;
-- * a knob named T, type or x broke NVRTC's own header in every config;
-- * a key given twice in a spec was dropped silently;
-- * a NUL in a string value cut its define short;
-- * an architecture NVRTC does not know was a compile error of each
--   config; a grid past the device's limits passed.
local T = require("testlib")
local tmp = T.tmpdir("own-kernels")

local function spec(name, fields)
  local parts = {}
  for k, v in pairs(fields) do parts[#parts + 1] = string.format("%q: %s", k, v) end
  T.write(tmp .. "/" .. name .. ".json", "{" .. table.concat(parts, ", ") .. "}")
  return tmp .. "/" .. name .. ".json"
end
local ARGS = '[{"name": "y", "type": "f32", "shape": [256], "output": true}]'

-- a template entry in a namespace, with an unrelated instance in the file
T.write(tmp .. "/tk.cu", [[
namespace qa {
template <typename F, int B, int R> __global__ void gemv(F *y) { y[threadIdx.x] = F(B * R); }
template __global__ void gemv<float, 128, 1>(float *);
}
]])
do
  local p = spec("tk", { name = '"tk"', kernel = '{"source": "tk.cu", "entry": "qa::gemv<float, BLOCK, ROWS>"}',
                         knobs = '[{"name": "BLOCK", "values": [128, 256]}, {"name": "ROWS", "values": [1, 4]}]',
                         launch = '{"grid": [1, 1, 1], "block": ["BLOCK", 1, 1]}', args = ARGS })
  local code, out, err = T.run("ptx " .. p .. " --config BLOCK=256,ROWS=4")
  T.eq(code, 0, "ptx of a template entry: exit code\n" .. err)
  T.check(out:find("_ZN2qa4gemvIfLi256ELi4EEEvPT_", 1, true) and not out:find("Li128ELi1E", 1, true),
          "ptx of a template entry analyses gemv<float, 256, 4> alone:\n%s", out)
  -- its PTX, saved and read back: a file takes --function, not --config
  T.run("ptx " .. p .. " --save " .. tmp .. "/tk.ptx")
  code, out, err = T.run("ptx " .. tmp .. "/tk.ptx")
  T.check(code == 0 and out:find("Li128ELi1E", 1, true), "ptx of a PTX file: exit %d\n%s%s", code, out, err)
  code, out, err = T.run("ptx " .. tmp .. "/tk.ptx --config BLOCK=256")
  T.check(code == 2 and err:find("--config and --arch are for a spec", 1, true), "--config on a PTX file: %s%s", out, err)
end

-- a pipeline whose second kernel is misspelt, or bound below its block
T.write(tmp .. "/pl.cu", [[
extern "C" __global__ void first(float *y) { y[threadIdx.x] = 1.0f; }
extern "C" __global__ void __launch_bounds__(128) second(float *y) { y[threadIdx.x] += 1.0f; }
]])
for _, case in ipairs({ { "second", 1024, "pipeline[2] (second) cannot launch: block of 1024 threads, at most 128" },
                        -- (a misspelt stage is refused when the spec is read, as a kernel's entry is)
                        { "secnd", 64, "pipeline[2].entry: 'secnd' appears nowhere in", 2 },
                        { "second", 64, nil } }) do
  local p = spec("pl", { name = '"pl"', kernel = '{"source": "pl.cu"}',
                         knobs = '[{"name": "B", "values": [256]}]', args = ARGS,
                         pipeline = string.format('[{"entry": "first", "launch": {"grid": [1, 1, 1], "block": ["B", 1, 1]}, ' ..
                                                  '"args": ["y"]}, {"entry": "%s", "launch": {"grid": [1, 1, 1], ' ..
                                                  '"block": [%d, 1, 1]}, "args": ["y"]}]', case[1], case[2]) })
  local code, out, err = T.run("compile " .. p)
  if case[3] then
    T.check(code == (case[4] or 1) and (out .. err):find(case[3], 1, true), "pipeline %s/%d: exit %d\n%s%s", case[1],
            case[2], code, out, err)
  else
    T.check(code == 0, "pipeline %s/%d that can launch: exit %d\n%s%s", case[1], case[2], code, out, err)
  end
end

-- a float knob: 1 / ALPHA is a float division in every config
T.write(tmp .. "/fl.cu", [[
static_assert(1 / ALPHA > 0.4, "integer division: ALPHA was defined as an integer");
extern "C" __global__ void k(float *y) { y[threadIdx.x] = ALPHA; }
]])
do
  local p = spec("fl", { name = '"fl"', kernel = '{"source": "fl.cu", "entry": "k"}',
                         knobs = '[{"name": "ALPHA", "values": [0.5, 1.0, 2.0]}]',
                         launch = '{"grid": [1, 1, 1], "block": [256, 1, 1]}', args = ARGS })
  local code, out, err = T.run("compile " .. p .. " --all --log")
  T.check(code == 0 and not out:find("FAIL", 1, true), "a float knob: exit %d\n%s%s", code, out, err)
end

-- --config values with a space, or empty
T.write(tmp .. "/st.cu", [[
extern "C" __global__ void k(float *y) { QUAL DTYPE v = 1; y[threadIdx.x] = (float)v; }
]])
do
  local p = spec("st", { name = '"st"', kernel = '{"source": "st.cu", "entry": "k"}',
                         knobs = '[{"name": "DTYPE", "values": ["unsigned int", "long long", "float"]}, ' ..
                                 '{"name": "QUAL", "values": ["", "const"], "default": "const"}]',
                         launch = '{"grid": [1, 1, 1], "block": [256, 1, 1]}', args = ARGS })
  local code, out, err = T.run("compile " .. p .. " --config 'DTYPE=long long' --config 'QUAL='")
  -- (each --config is one config; the knobs it does not name keep their
  -- default, QUAL's const, or their first value, DTYPE's unsigned int)
  T.check(code == 0 and out:find("DTYPE=long long QUAL=const", 1, true) and
          out:find("DTYPE=unsigned int QUAL=\n", 1, true) and not out:find("FAIL", 1, true),
          "--config with a space and an empty value: exit %d\n%s%s", code, out, err)
  code, out, err = T.run("compile " .. p .. " --config 'DTYPE=long long NOPE=1'")
  T.check(code == 2 and err:find("NOPE is not a knob", 1, true), "--config with an unknown knob after a spaced value: %s%s",
          out, err)
end

-- knob names that break CUDA's headers, or C++ reserves; a NUL in a value;
-- a key given twice
T.write(tmp .. "/k.cu", 'extern "C" __global__ void k(float *y) { y[threadIdx.x] = 1.0f; }\n')
local function load_error(name, fields, want)
  local base = { name = '"' .. name .. '"', kernel = '{"source": "k.cu", "entry": "k"}',
                 launch = '{"grid": [1, 1, 1], "block": [256, 1, 1]}', args = ARGS }
  for k, v in pairs(fields) do base[k] = v end
  local code, _, err = T.run("compile " .. spec(name, base))
  T.check(code == 2 and err:find(want, 1, true), "%s: exit %d: %s", name, code, err)
end
load_error("knob_T", { knobs = '[{"name": "T", "values": [1]}]' }, "'T' is a C++ keyword, a CUDA built-in or a name CUDA's headers use")
load_error("knob_x", { knobs = '[{"name": "x", "values": [1]}]' }, "'x' is a C++ keyword, a CUDA built-in or a name CUDA's headers use")
load_error("knob_reserved", { knobs = '[{"name": "__half", "values": [1]}]' }, "'__half' is a name C++ reserves")
load_error("knob_nul", { knobs = '[{"name": "BS", "values": ["a\\u0000b"]}]' }, "knobs[1].values[1]: a NUL character")
do
  T.write(tmp .. "/dup.json", '{"name": "dup", "kernel": {"source": "k.cu", "entry": "k"},\n' ..
          '"knobs": [{"name": "B", "values": [1, 2]}],\n"constraints": ["B == 9"],\n"constraints": [],\n' ..
          '"launch": {"grid": [1, 1, 1], "block": [256, 1, 1]}, "args": ' .. ARGS .. '}')
  local code, _, err = T.run("compile " .. tmp .. "/dup.json")
  T.check(code == 2 and err:find("dup.json: line 4: 'constraints' is given twice", 1, true), "a key given twice: exit %d: %s",
          code, err)
end

-- an architecture NVRTC does not know; a grid past the device's limits
do
  local p = spec("ok", { name = '"ok"', kernel = '{"source": "k.cu", "entry": "k"}',
                         knobs = '[{"name": "G", "values": [1, 4294967296]}]',
                         launch = '{"grid": ["G", 1, 1], "block": [256, 1, 1]}', args = ARGS })
  local code, _, err = T.run("compile " .. p .. " --arch sm_999")
  T.check(code == 2 and err:find("--arch sm_999: NVRTC", 1, true), "--arch sm_999: exit %d: %s", code, err)
  local out
  code, out = T.run("compile " .. p .. " --all")
  T.check(code == 1 and out:find("cannot launch: grid 4294967296 x 1 x 1", 1, true), "a grid of 2^32 blocks: exit %d\n%s",
          code, out)
  code, _, err = T.run("compile " .. p .. " --all --sample 2")
  T.check(code == 2 and err:find("--all compiles every config", 1, true), "--all with --sample: %s", err)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
