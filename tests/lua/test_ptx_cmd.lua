-- `kopt ptx`: the region overview of shipped kernels compiled to PTX without
-- a GPU, with the counts docs/PTX.md derives by hand (transpose at
-- TILE=32 BLOCK_ROWS=8: four 4-byte loads, shared stores, shared loads and
-- stores each and one barrier; matmul_f16 at its defaults: 64 mma.sync and
-- 16 ldmatrix.x4 per pass of the main loop, 2 x 8 cp.async of 16 bytes
-- before it, 64 stores after it), a .ptx file, the Lua module, a spec or
-- PTX told by its text whatever its name (.JSON, no extension), and bad
-- input (one sentence, exit 2; an architecture NVRTC refuses is named where
-- it was set, the spec's kernel.arch or --arch; a constraint that raises is
-- the spec's error, not an internal one).
local T = require("testlib")
local kptx = require("kopt.ptx")

local root = T.source_dir
local tmp = T.tmpdir("ptx")

local code, out, err = T.run("ptx " .. root .. "/specs/transpose.json --save " .. tmp .. "/t.ptx")
T.eq(code, 0, "transpose: exit code (" .. err .. ")")
T.check(out:find("TILE=32 BLOCK_ROWS=8 PAD=1", 1, true), "transpose: the config:\n%s", out)
T.check(out:find("#2 body", 1, true), "transpose: one stage, body:\n%s", out)
T.check(out:find("ld.global 4 (16 B), st.global 4 (16 B), ld.shared 4 (16 B), st.shared 4 (16 B), barriers 1", 1, true),
        "transpose: the hand count:\n%s", out)
-- the source named is the kernel's own file, wherever kopt runs (NVRTC
-- named it after the current folder: /tmp/transpose.cu run from /tmp)
local real_cu = require("kopt.sys").realpath(root .. "/kernels/transpose.cu")
code, out = T.run("ptx " .. root .. "/specs/transpose.json", nil, tmp)
T.check(code == 0 and real_cu and out:find("source " .. real_cu, 1, true),
        "transpose run from another folder: the source named is %s:\n%s", tostring(real_cu), out)

code, out, err = T.run("ptx " .. root .. "/specs/matmul_f16.json")
T.eq(code, 0, "matmul: exit code (" .. err .. ")")
T.check(out:find("#2 prologue", 1, true) and out:find("#5 epilogue", 1, true), "matmul: stages:\n%s", out)
T.check(out:find("cp.async 16 (256 B)", 1, true), "matmul: prologue copies:\n%s", out)
T.check(out:find("#4 loop (trip unknown)", 1, true), "matmul: the main loop:\n%s", out)
T.check(out:find("ld.shared 16 (256 B), ldmatrix 16, cp.async 8 (128 B), mma 64, flops.tensor 8192, barriers 1", 1, true),
        "matmul: the main loop's hand count:\n%s", out)
T.check(out:find("st.global 64 (256 B)\n", 1, true), "matmul: epilogue stores:\n%s", out)

-- a saved .ptx file reads back to the same overview; the module gives tables
code, out = T.run("ptx " .. tmp .. "/t.ptx --function transpose")
T.eq(code, 0, "saved PTX: exit code")
T.check(out:find("ld.global 4 (16 B)", 1, true), "saved PTX:\n%s", out)
local a = assert(kptx.parse(T.slurp(tmp .. "/t.ptx")))
T.eq(#a.functions, 1, "module: functions")
local r = a.regions[a.functions[1].regions[1]]
T.eq(r.kind, "function", "module: first region")
T.eq(r.total.st_shared, 4, "module: shared stores")
T.check(r.src_lines and r.src_lines[1] >= 20, "module: source lines from .loc")
local nf = 0
for _ in ipairs(kptx.fields()) do nf = nf + 1 end
T.check(nf >= 20, "module: fields() lists the work fields")
local none, why = kptx.parse("not ptx at all")
T.check(none == nil and why:find("not PTX", 1, true), "module: nil, err for text that is not PTX")

-- a spec is told by its text, not its name: an upper-case .JSON and a spec
-- without an extension compile as the .json does, a .json holding PTX is PTX
T.write(tmp .. "/upper.JSON", (T.slurp(root .. "/specs/transpose.json"):gsub('"%.%./kernels/', '"' .. root .. '/kernels/')))
T.write(tmp .. "/spec_noext", T.slurp(tmp .. "/upper.JSON"))
for _, name in ipairs({ "upper.JSON", "spec_noext" }) do
  code, out, err = T.run("ptx " .. tmp .. "/" .. name)
  T.eq(code, 0, name .. ": exit code (" .. err .. ")")
  T.check(out:find("TILE=32 BLOCK_ROWS=8 PAD=1", 1, true), "%s: compiled as a spec:\n%s", name, out)
end
T.write(tmp .. "/ptx_named.json", T.slurp(tmp .. "/t.ptx"))
code, out, err = T.run("ptx " .. tmp .. "/ptx_named.json --function transpose")
T.check(code == 0 and out:find("ld.global 4 (16 B)", 1, true), "PTX named .json: %d %s%s", code, out, err)

-- bad input: one sentence, exit 2
local function fails(args, what)
  local c, _, e = T.run(args)
  T.eq(c, 2, what .. ": exit code")
  return T.one_sentence(e, what)
end
T.write(tmp .. "/bad.ptx", ".version 8.5\n.visible .entry k()\n{\n\tret;\n")
T.check(fails("ptx " .. tmp .. "/bad.ptx", "truncated file"):find("truncated PTX", 1, true), "truncated file")
fails("ptx " .. tmp .. "/missing.ptx", "missing file")
fails("ptx " .. root .. "/specs/transpose.json --config TILE=7", "bad config")
fails("ptx", "no argument")
T.write(tmp .. "/ok.cu", 'extern "C" __global__ void k(float *x) { x[0] = N; }\n')
T.write(tmp .. "/arch.json", [[{ "name": "arch", "kernel": { "source": "ok.cu", "entry": "k", "arch": "sm_99" },
  "knobs": [ { "name": "N", "values": [1, 2] } ],
  "launch": { "grid": [1, 1, 1], "block": [32, 1, 1] },
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
local arch_err = fails("ptx " .. tmp .. "/arch.json", "kernel.arch unknown to NVRTC")
T.check(arch_err:find("arch.json: kernel.arch: sm_99: NVRTC ", 1, true) and not arch_err:find("--arch", 1, true),
        "kernel.arch unknown to NVRTC: named as the spec's field: %s", arch_err)
T.write(tmp .. "/cond.json", (T.slurp(tmp .. "/arch.json"):gsub(', "arch": "sm_99"', ""):gsub('"knobs"',
        '"constraints": ["N and N > 1"], "knobs"')))
local cond_err = fails("ptx " .. tmp .. "/cond.json", "a number used as a condition")
T.check(cond_err:find("cond.json: constraints[1]: 'N' is a number (1) used as a condition", 1, true),
        "a number used as a condition: %s", cond_err)
local flag_err = fails("ptx " .. root .. "/specs/transpose.json --arch sm_99", "--arch unknown to NVRTC")
T.check(flag_err:find("ptx: --arch sm_99: NVRTC ", 1, true), "--arch unknown to NVRTC: %s", flag_err)

-- a kernel that does not compile: exit 1 with the compiler's message
T.write(tmp .. "/k.cu", 'extern "C" __global__ void k(float *x) { x[0] = N }\n')
T.write(tmp .. "/s.json", [[{ "name": "bad", "kernel": { "source": "k.cu", "entry": "k" },
  "knobs": [ { "name": "N", "values": [1, 2] } ],
  "launch": { "grid": [1, 1, 1], "block": [32, 1, 1] },
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
local cerr
code, out, cerr = T.run("ptx " .. tmp .. "/s.json")
T.eq(code, 1, "broken kernel: exit code")
T.check(cerr:find("kopt: ptx: the kernel does not compile: ", 1, true) and cerr:find("N=1", 1, true)
        and cerr:find('expected a ";"', 1, true) and out == "",
        "broken kernel: the compiler's message on stderr, naming the config:\n%s", cerr)

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
