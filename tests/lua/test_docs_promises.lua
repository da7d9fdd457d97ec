-- What the docs promise, where the code did otherwise (each case failed
-- before its fix):
-- * a knob value or problem size of 2^53 + 1 was read as 2^53 (a double)
--   without a word, where specs/README.md says it is refused;
-- * `--gpus 0,0` was accepted by a run (two workers timing on one GPU);
-- * a replay's summary and REPORT.md claimed a tail effect over the assumed
--   H100's 132 SMs for a recording made on another GPU;
-- * `kopt ptx --arch` of an architecture NVRTC lacks blamed the kernel (exit
--   1), where `kopt compile` names the architecture (exit 2);
-- * synthesize under replay said "no attempt was correct" after making none;
-- * an unknown field's message offered fields that are then refused there
--   (kernel.launch, reference.state);
-- * --resume on an events.jsonl of one torn line said the file was empty;
-- * docs/TRUST.md counted the honest kernels of tests/honest (specs and
--   configs) of an earlier suite.
local T = require("testlib")
local json = require("kopt.json")

local tmp = T.tmpdir("docs-promises")
T.write(tmp .. "/k.cu", 'extern "C" __global__ void k(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = 1; }\n')
local function spec_file(name, fields)
  local s = { name = "t", kernel = { source = "k.cu", entry = "k" }, problem = { n = 8 },
              knobs = { { name = "B", values = { 32, 64 } } }, launch = { grid = { 1 }, block = { "B" } },
              args = { { name = "x", type = "f32", shape = { "n" }, output = true }, { name = "n", type = "i32", value = "n" } } }
  for k, v in pairs(fields) do s[k] = v end
  local text = json.encode(s)
  T.write(tmp .. "/" .. name .. ".json", text)
  return tmp .. "/" .. name .. ".json", text
end

local function refused(what, args, pattern)
  local code, out, err = T.run(args)
  T.check(code == 2 and (err .. out):find(pattern, 1, true), "%s: expected exit 2 and %q, got %d:\n%s%s", what,
          pattern, code, out, err)
end

-- 2^53 + 1, as a knob value and as a problem size (written into the JSON as is)
local path, text = spec_file("big_knob", {})
T.write(path, (text:gsub('%[32,64%]', "[9007199254740993,64]")))
refused("a knob value of 2^53 + 1", "compile " .. path, "9007199254740992 is 2^53 or more")
path, text = spec_file("big_size", {})
T.write(path, (text:gsub('"n":8', '"n":9007199254740993')))
refused("a problem size of 2^53 + 1", "compile " .. path, "is 2^53 or more")

-- unknown fields: only fields accepted there are offered
refused("kernel.knobs", "compile " .. spec_file("kk", { kernel = { source = "k.cu", entry = "k", knobs = {} } }),
        "kernel.knobs: unknown field (expected one of: source, entry, options, state, arch, kernel_tuner_defines)")

-- --gpus with a GPU twice
refused("--gpus 0,0", "random --backend replay:tests/data/pnpoly_RTX_3090.json --gpus 0,0 --no-db --budget 3 --out " ..
        tmp .. "/gg", "--gpus: GPU 0 is given twice")

-- a replay of a recording made on an RTX A4000: no claim over 132 SMs
do
  local code, out, err = T.run("random tests/data/specs/vector_add.json --no-db --budget 3 --out " .. tmp .. "/va")
  T.eq(code, 0, "the vector_add replay: " .. err)
  local report = T.slurp(tmp .. "/va/best/REPORT.md") or ""
  T.check(not (out .. report):find("132 SMs", 1, true), "a tail effect over the assumed 132 SMs:\n%s\n%s", out, report)
  T.check(report:find("RTX A4000 (recorded)", 1, true), "REPORT.md no longer names the recorded GPU:\n%s", report)
end

refused("ptx --arch sm_99", "ptx specs/transpose.json --arch sm_99", "ptx: --arch sm_99: NVRTC")

do
  local code, out = T.run("synthesize specs/softmax.json --opt llm=off --no-db --out " .. tmp .. "/syn")
  T.eq(code, 0, "synthesize under replay")
  T.check(out:find("no attempts: the replay backend", 1, true) and not out:find("no attempt was correct", 1, true),
          "synthesize under replay says why it made no attempts:\n%s", out)
end

do
  os.execute("mkdir -p " .. tmp .. "/torn")
  T.write(tmp .. "/torn/events.jsonl", '{"event":"sta')
  refused("a torn first line", "random --backend replay:tests/data/pnpoly_RTX_3090.json --no-db --resume --out " ..
          tmp .. "/torn", "holds only a line cut short (13 bytes)")
end

-- the honest suite as docs/TRUST.md counts it: the cases tests/honest/run.lua
-- runs, and their configs
do
  local run_text = T.slurp(T.source_dir .. "/tests/honest/run.lua")
  local cases = run_text:match("\nlocal CASES = (%b{})")
  local specs, configs = 0, 0
  for name in (cases or ""):gmatch('\n%s*{ "([%w_]+)", "') do
    local spec = require("kopt.spec").load(T.source_dir .. "/tests/honest/" .. name .. ".json")
    specs, configs = specs + 1, configs + require("kopt.run").build_space(spec):size()
  end
  local said = T.slurp(T.source_dir .. "/docs/TRUST.md"):match("`tests/honest` holds the other side: (%d+ specs %(%d+ " ..
                                                                "configs%))")
  T.eq(said, string.format("%d specs (%d configs)", specs, configs), "docs/TRUST.md's count of tests/honest")
end

T.done()
