-- Spec features for kernels written for Kernel Tuner (examples/kt/), without
-- a GPU: each example spec loads, its run requests carry what the worker
-- needs (in/out buffers, input files and generated data, regions and
-- per-output tolerances, parameters left out), template entries and
-- per-value compiler options reach the compile job, the reference sees the
-- knobs it declares, metrics evaluate, and a spec's own check reads the
-- worker's dumps. The requests are checked against the worker's field list.
local T = require("testlib")
local compile = require("kopt.compile")
local cuda = require("kopt.backends.cuda")
local hostdata = require("kopt.hostdata")
local spec_mod = require("kopt.spec")
local sys = require("kopt.sys")

local tmp = T.tmpdir("spec_kt")
local function request(spec, config)
  local be = cuda._offline(spec)
  be.data_dir = tmp
  local msg, err = be:request(1, config, "cubin", spec:entry(config))
  T.check(msg ~= nil, "%s: request: %s", spec.path, tostring(err))
  return msg or {}, be
end
local function has(list, x)
  for _, v in ipairs(list) do if v == x then return true end end
  return false
end

-- in/out buffer and a region: the stencil
local st = spec_mod.load("examples/kt/stencil/stencil.json")
local cfg = { block_size_x = 32, block_size_y = 4, tile_size_y = 2 }
local m = request(st, cfg)
T.eq(m["a1.copy"], 2, "stencil: out starts as a copy of argument 2 (in)")
T.eq(m["a1.output"], 1, "stencil: out is an output")
T.eq(m["a1.dims"], "4096,4096", "stencil: the region's shape")
T.eq(m["a1.region"], "1:4095,1:4095", "stencil: the interior is compared")
T.eq(m["a1.tol_rel_l2"], 1e-6, "stencil: the output's own tolerance")
T.eq(m["a2.copy"], nil, "stencil: an input is no copy")
local mt = st:metrics(cfg, 2.0)
T.check(math.abs(mt["GFLOP/s"] - 6 * 4094 * 4094 / 2e-3 / 1e9) < 1e-9, "stencil: GFLOP/s from work and time")
T.check(math.abs(mt["GB/s"] - 8 * 4096 * 4096 / 2e-3 / 1e9) < 1e-9, "stencil: GB/s from work and time")
T.eq(st.objective, nil, "stencil: time is the objective by default")

-- a template entry, per-value compiler options, a parameter left out
local ax = spec_mod.load("examples/kt/template/axpy.json")
local acfg = { block_size_x = 256, items = 4, loop_unroll_factor = 0, fast_math = 1 }
T.eq(ax:entry(acfg), "axpy<float, 256, 4>", "template: knob names replaced in the entry")
local job = compile.job_for(ax, acfg, "sm_90")
T.eq(job.entry, "axpy<float, 256, 4>", "template: the compile job's name expression")
T.check(has(job.options, "--use_fast_math"), "fast_math=1 adds --use_fast_math")
T.check(not job.source:find("#define fast_math", 1, true), "a knob with define=false is no define")
T.check(job.source:find("#define loop_unroll_factor 0\n", 1, true), "loop_unroll_factor is a define")
acfg.fast_math = 0
T.check(not has(compile.job_for(ax, acfg, "sm_90").options, "--use_fast_math"), "fast_math=0 adds nothing")
m = request(ax, acfg)
T.eq(m["a1.copy"], 5, "axpy: y starts as a copy of y0")
T.eq(m["a5.param"], 0, "axpy: y0 is no kernel parameter")
T.eq(m.entry, "axpy<float, 256, 4>", "axpy: the request's entry")
T.eq(ax.objective and ax.objective.metric, "GB/s", "axpy: the objective metric")
T.eq(ax.objective and ax.objective.goal, "max", "axpy: the objective's goal")
local fast, slow = { time_ms = 1, objective = 10 }, { time_ms = 2, objective = 30 }
T.check(ax:better(slow, fast), "a GB/s objective: more GB/s wins, though slower")
T.check(st:better(fast, slow), "without an objective, time decides")

-- inputs from .npy files and from a seeded generator
local sp = spec_mod.load("examples/kt/spmv/spmv.json")
local scfg = { block_size_x = 128, threads_per_row = 4 }
m = request(sp, scfg)
T.check(tostring(m["a2.file"]):match("row_ptr%.npy$") ~= nil, "spmv: row_ptr from its .npy file")
T.eq(m["a2.file_offset"], 128, "spmv: the data follows the 128-byte .npy header")
T.check(tostring(m["a4.file"]):find(tmp, 1, true) == 1, "spmv: the generated values are stored in the data folder")
local _, size = sys.stat(m["a4.file"] or "")
T.eq(size, 32768 * 4, "spmv: the generated file holds nnz f32 values")
local args1, args2 = sp:args(scfg), sp:args({ block_size_x = 512, threads_per_row = 1 })
T.check(args1[4].data == args2[4].data, "spmv: the generator runs once for knobs it does not read")
local vals = hostdata.unpack(args1[4].data:sub(1, 16), "f32")
T.check(#vals == 4 and vals[1] >= -1 and vals[1] < 1, "spmv: generated values in [-1, 1)")
local again = spec_mod.load("examples/kt/spmv/spmv.json"):args(scfg)
T.check(again[4].data == args1[4].data, "spmv: the generator is seeded (same bytes on every load)")

-- the filter size: a knob the reference sees
local cv = spec_mod.load("examples/kt/filter/conv1d.json")
local c7, c15 = { FILTER = 7, block_size_x = 256, items = 1 }, { FILTER = 15, block_size_x = 256, items = 1 }
local rj = compile.reference_job(cv, "sm_90", c7)
T.check(rj.source:find("#define FILTER 7\n", 1, true), "conv1d: the reference compiles with FILTER 7")
T.check(not rj.source:find("#define block_size_x", 1, true), "conv1d: the reference sees only the knobs it declares")
T.check(cv:reference_key(c7) ~= cv:reference_key(c15), "conv1d: another filter, another reference")
T.eq(cv:reference_key(c7), cv:reference_key({ FILTER = 7, block_size_x = 512, items = 4 }),
     "conv1d: the other knobs share one reference")
T.eq(cv:args(c15)[1].count, 8388608 - 14, "conv1d: the output's shape follows the filter")

-- a pipeline of two kernels with a scratch buffer between them
local rd = spec_mod.load("examples/kt/reduce/reduce2.json")
local rcfg = { block_size_x = 256, items = 4, final_block = 128 }
m = request(rd, rcfg)
T.eq(m.entry, "reduce_partial", "pipeline: the first kernel is the entry")
T.eq(m.args1, "2,3,4", "pipeline: the first kernel's arguments")
T.eq(m.stages, "reduce_final:1,1,1:128,1,1:0:1,2,5", "pipeline: the second kernel, its launch and arguments")
T.eq(m.ref_args, "1,3,4", "pipeline: the reference's arguments")
T.eq(m["a2.output"], 1, "pipeline: the scratch buffer is poisoned like an output")
T.eq(m["a2.compare"], 0, "pipeline: the scratch buffer is not compared")
T.eq(m["a5.value"], 16384, "pipeline: the block count of the first kernel")
T.eq(m.grid_x, 16384, "pipeline: the first kernel's grid")
local rm = cuda._offline(rd):request(0, rcfg, "cubin", "reduce_ref", true)
T.eq(rm.args1, "1,3,4", "pipeline: the reference timed as a candidate takes its own arguments")
T.eq(rm.stages, nil, "pipeline: the reference is one kernel")

-- half floats through the host copies (generators, dumps)
local h = hostdata.unpack(hostdata.pack({ 1.5, -2, 65504, 1e-7, 0.1 }, "f16"), "f16")
T.eq(h[1], 1.5, "f16 1.5")
T.eq(h[3], 65504.0, "f16 max")
T.check(math.abs(h[5] - 0.1) < 1e-4, "f16 0.1 rounds near")
T.eq(hostdata.unpack(hostdata.pack({ 3.0 }, "bf16"), "bf16")[1], 3.0, "bf16 3.0")
local hdr = hostdata.npy_header("examples/kt/spmv/col_idx.npy")
T.eq(hdr.dtype, "i32", ".npy dtype")
T.eq(hdr.shape[1], 32768, ".npy shape")
T.eq(hdr.fortran, false, ".npy order")

-- a spec's own check, over what the worker dumps
local dir = tmp .. "/spec"
sys.mkdir_p(dir)
T.write(dir .. "/k.cu", 'extern "C" __global__ void k(float *p, const float *x) {}')
T.write(dir .. "/sum.lua", [[
return function(out, ref, inp, sizes)
  local a, b = 0, 0
  for i = 1, #out.p do a = a + out.p[i] end
  for i = 1, #inp.x do b = b + inp.x[i] end
  if math.abs(a - b) > 1e-3 then return false, string.format("sum %g, expected %g", a, b) end
  return sizes.n == 4
end]])
T.write(dir .. "/s.json", [[{"name": "s", "kernel": {"source": "k.cu", "entry": "k"}, "problem": {"n": 4},
  "knobs": [{"name": "B", "values": [2]}], "launch": {"grid": [1], "block": ["B"]},
  "args": [{"name": "p", "type": "f32", "shape": [2], "output": true},
           {"name": "x", "type": "f32", "shape": ["n"]}],
  "reference": {"source": "k.cu", "entry": "k"},
  "verify": {"outputs": {"p": {"compare": false}}, "check": "sum.lua"}}]])
local cs = spec_mod.load(dir .. "/s.json")
local be = cuda._offline(cs)
local dump = tmp .. "/dump"
local function dump_files(total)
  sys.mkdir_p(dump)
  T.write(dump .. "/c1.p.out", hostdata.pack({ total - 1, 1 }, "f32"))
  T.write(dump .. "/c1.p.ref", hostdata.pack({ 0, 0 }, "f32"))
  T.write(dump .. "/c1.x.in", hostdata.pack({ 1, 2, 3, 4 }, "f32"))
end
dump_files(10)
local r = { status = "ok" }
be:custom_check(r, { config = { B = 2 } }, dump)
T.eq(r.status, "ok", "verify.check passes a right sum")
T.check(not T.exists(dump .. "/c1.p.out"), "the dumps are removed once read")
dump_files(11)
r = { status = "ok" }
be:custom_check(r, { config = { B = 2 } }, dump)
T.eq(r.status, "wrong", "verify.check fails a wrong sum")
T.eq(r.log, "check 1: verify.check failed: sum 11, expected 10", "verify.check's reason")
m = request(cs, { B = 2 })
T.eq(m["a1.compare"], 0, "compare=false reaches the worker")

-- through the real binary: kopt compile instantiates the template
local code, out = T.run("compile examples/kt/template/axpy.json --config block_size_x=128,items=2")
T.eq(code, 0, "kopt compile of the template example")
T.check(out:find("(axpy<float, 128, 2>)", 1, true) ~= nil, "kopt compile names the instance:\n%s", out)
code, out = T.run("compile examples/kt/filter/conv1d.json --config FILTER=15")
T.eq(code, 0, "kopt compile of the filter example")
T.check(out:find("reference conv1d_ref -DFILTER=15", 1, true) ~= nil, "the reference with the filter:\n%s", out)

-- a metric objective decides the best and the ranking: on the recorded
-- vector_add space, "block_size_x / time_ms" (max) picks another config
-- than the fastest
local vdir = tmp .. "/obj"
sys.mkdir_p(vdir)
local vroot = sys.realpath("tests/data")
local vtext = T.slurp("tests/data/specs/vector_add.json")
  :gsub('"vector_add.cu"', '"' .. vroot .. '/specs/vector_add.cu"')
  :gsub('"recording": "[^"]*"', '"metrics": {"per_thread": "block_size_x / time_ms", "GB/s": "bytes / time_s / 1e9"},\n' ..
        '  "objective": {"metric": "per_thread", "goal": "max"}')
T.write(vdir .. "/v.json", vtext)
local rec = require("cjson").decode(T.slurp("tests/data/vector_add_A4000.json")).cache
local want, want_v, fastest, fastest_t = nil, -1, nil, math.huge
for _, e in pairs(rec) do
  if e.block_size_x % 128 == 0 and type(e.time) == "number" then
    if e.block_size_x / e.time > want_v then want, want_v = e.block_size_x, e.block_size_x / e.time end
    if e.time < fastest_t then fastest, fastest_t = e.block_size_x, e.time end
  end
end
T.check(want ~= fastest, "the test needs an objective that differs from time (%s, %s)", tostring(want), tostring(fastest))
local code2, out2, err2 = T.run("exhaustive " .. vdir .. "/v.json --backend replay:tests/data/vector_add_A4000.json " ..
                                "--no-db -q --out " .. vdir .. "/run")
T.eq(code2, 0, "exhaustive with an objective on replay (" .. err2 .. ")")
local bestcfg = require("cjson").decode(T.slurp(vdir .. "/run/best/config.json"))
T.eq(bestcfg.block_size_x, want, "the best by the objective, not by time")
T.check(out2:find("(objective: per_thread, max)", 1, true) ~= nil, "the summary names the objective:\n%s", out2)
T.check(out2:find("GB/s", 1, true) ~= nil, "the summary shows the metrics:\n%s", out2)

-- Regression: generated data was stored with unchecked writes (assert on
-- open, then write, close and rename unchecked), so a folder that cannot be
-- written raised an internal error, and a full disk left a cut file under
-- the name of the whole content, trusted by every later run.
do
  local bytes = string.rep("\1\2\3\4", 8)
  local p1 = hostdata.store(tmp, bytes)
  local f = p1 and io.open(p1, "rb")
  T.check(f and f:read("a") == bytes, "store writes the bytes: %s", tostring(p1))
  if f then f:close() end
  T.eq(hostdata.store(tmp, bytes), p1, "store names a file by its content")
  local ok, p2, why = pcall(hostdata.store, tmp .. "/no/such/folder", bytes)
  T.check(ok, "store does not raise on a folder it cannot write: %s", tostring(p2))
  T.eq(p2, nil, "store fails on a folder it cannot write")
  T.check(tostring(why):find(tmp .. "/no/such/folder/", 1, true) ~= nil, "the reason names the file: %s", tostring(why))
end

os.execute("rm -rf '" .. tmp .. "'")
-- the defines Kernel Tuner adds of its own (kernel.kernel_tuner_defines):
-- an untuned block_size_y (1), grid_size_x and kernel_tuner; a kernel that
-- reads them did not compile
do
  local d = T.tmpdir("kt-defines")
  T.write(d .. "/k.cu", '#ifndef kernel_tuner\n#error not compiled as Kernel Tuner compiles\n#endif\n' ..
                        'extern "C" __global__ void k(float *y, int n)\n{\n' ..
                        '  int i = blockIdx.x * block_size_x * block_size_y + threadIdx.x;\n' ..
                        '  if (i < n) y[i] = (float)grid_size_x;\n}\n')
  local function write_spec(flag)
    T.write(d .. "/s.json", [[{ "name": "ktdefs", "kernel": { "source": "k.cu", "entry": "k"]] .. flag .. [[ },
  "problem": { "n": 4096 }, "knobs": [ { "name": "block_size_x", "values": [128, 256] } ],
  "launch": { "grid": ["cdiv(n, block_size_x)"], "block": ["block_size_x"] },
  "args": [ { "name": "y", "type": "f32", "shape": ["n"], "output": true }, { "name": "n", "type": "i32", "value": "n" } ] }]])
  end
  write_spec(', "kernel_tuner_defines": true')
  local ks = spec_mod.load(d .. "/s.json")
  local defs = table.concat(ks:defines({ block_size_x = 256 }), " ")
  T.eq(defs, "-Dblock_size_x=256 -Dgrid_size_x=16 -Dblock_size_y=1 -Dgrid_size_y=1 -Dblock_size_z=1 -Dgrid_size_z=1 " ..
       "-Dkernel_tuner=1", "Kernel Tuner's own defines")
  local c, kout, err = T.run("compile " .. d .. "/s.json --all --no-cache")
  T.check(c == 0 and select(2, kout:gsub(" ok ", "")) == 2, "a kernel reading them compiles: %d\n%s%s", c, kout, err)
  -- a config whose launch cannot be computed (a grid that is not whole):
  -- its defines are made all the same, and its request says why (the
  -- launch raised where the GPU backend prepares a compile, outside any
  -- guard, and would have stopped the run)
  local odd = T.slurp(d .. "/s.json"):gsub('"cdiv%(n, block_size_x%)"', '"n / block_size_x"'):gsub("%[128, 256%]", "[128, 96]")
  T.write(d .. "/odd.json", odd)
  local os_ = spec_mod.load(d .. "/odd.json")
  local okd, dd = pcall(os_.defines, os_, { block_size_x = 96 })
  T.check(okd and table.concat(dd, " "):find("-Dkernel_tuner=1", 1, true), "defines of a config with no whole grid: %s",
          tostring(okd and table.concat(dd, " ") or dd))
  write_spec("")
  c = T.run("compile " .. d .. "/s.json --all --no-cache")
  T.check(c ~= 0, "without kernel_tuner_defines the kernel has no grid_size_x")
  write_spec(', "kernel_tuner_defines": "yes"')
  c, _, err = T.run("compile " .. d .. "/s.json")
  T.check(c == 2 and err:find("kernel.kernel_tuner_defines: expected true or false", 1, true), "a bad flag: %s", err)
  os.execute("rm -rf '" .. d .. "'")
end

return T.done()
