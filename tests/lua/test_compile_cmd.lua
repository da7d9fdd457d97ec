-- `kopt compile SPEC`: a spec's configs compile without a GPU (exit 0 and a
-- line per config with its registers), a kernel that does not compile is
-- exit 1 with the compiler's message, bad input is exit 2; the knobs that
-- --config leaves out keep their defaults when another knob has none (they
-- were all the first valid config's, away from every default); a knob whose
-- define breaks a CUDA header (N in cuda_pipeline.h) is named, ahead of the
-- header's errors, which alone never said the knob was the cause; a spec
-- without a launch is compiled with a note that no launch was checked; --all
-- on a constraint the spec got wrong offers no --sample.
local kopt = os.getenv("KOPT") or "build/kopt"

local function run(args)
  local p = io.popen(kopt .. " compile " .. args .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

local function check(cond, fmt, ...)
  if not cond then error(string.format(fmt, ...), 2) end
end

local out, rc = run("specs/transpose.json --sample 2 --config TILE=64,BLOCK_ROWS=16 --no-cache --workers 2")
check(rc == 0, "transpose: rc %s\n%s", tostring(rc), out)
local oks = 0
for line in out:gmatch("[^\n]+") do
  if line:match("^  ok +regs +%d+") then oks = oks + 1 end
end
check(oks == 4, "expected reference + 3 configs ok, got %d:\n%s", oks, out)
check(out:find("TILE=64 BLOCK_ROWS=16", 1, true), "the --config config is missing:\n%s", out)

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p '" .. dir .. "'")
local f = assert(io.open(dir .. "/k.cu", "w"))
f:write('extern "C" __global__ void k(float *x) { x[0] = N }\n')
f:close()
f = assert(io.open(dir .. "/s.json", "w"))
f:write([[{ "name": "bad", "kernel": { "source": "k.cu", "entry": "k" },
  "knobs": [ { "name": "N", "values": [1, 2] } ],
  "launch": { "grid": [1, 1, 1], "block": [32, 1, 1] },
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
f:close()
out, rc = run(dir .. "/s.json --all --no-cache")
check(rc == 1, "broken kernel: rc %s\n%s", tostring(rc), out)
check(out:find('expected a ";"', 1, true) and out:find("2 of 2 failed", 1, true), "broken kernel:\n%s", out)

-- knobs with defaults beside one without: plain, and with --config
f = assert(io.open(dir .. "/k.cu", "w"))
f:write('extern "C" __global__ void k(float *x) { x[0] = A + B + C; }\n')
f:close()
f = assert(io.open(dir .. "/d.json", "w"))
f:write([[{ "name": "defaults", "kernel": { "source": "k.cu", "entry": "k" },
  "knobs": [ { "name": "A", "values": [64, 128, 256], "default": 128 },
             { "name": "B", "values": [128, 256, 512], "default": 256 }, { "name": "C", "values": [128, 256] } ],
  "launch": { "grid": [1], "block": [32] },
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
f:close()
out, rc = run(dir .. "/d.json")
check(rc == 0 and out:find("A=128 B=256 C=128", 1, true), "the defaults, C at its first value: rc %s\n%s",
      tostring(rc), out)
out, rc = run(dir .. "/d.json --config C=256")
check(rc == 0 and out:find("A=128 B=256 C=256", 1, true), "--config C=256 keeps A's and B's defaults: rc %s\n%s",
      tostring(rc), out)

-- no launch (a replay spec's): compiled, and said that nothing launched
f = assert(io.open(dir .. "/d.json", "w"))
f:write([[{ "name": "nolaunch", "kernel": { "source": "k.cu", "entry": "k" },
  "knobs": [ { "name": "A", "values": [64] }, { "name": "B", "values": [128] }, { "name": "C", "values": [128] } ],
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
f:close()
out, rc = run(dir .. "/d.json")
check(rc == 0 and out:find("note: the spec has no launch", 1, true), "no launch: rc %s\n%s", tostring(rc), out)

-- a knob named as a CUDA header's template parameter
f = assert(io.open(dir .. "/p.cu", "w"))
f:write('#include <cuda_pipeline.h>\nextern "C" __global__ void k(float *x) { x[0] = N; }\n')
f:close()
f = assert(io.open(dir .. "/p.json", "w"))
f:write([[{ "name": "clash", "kernel": { "source": "p.cu", "entry": "k" },
  "knobs": [ { "name": "N", "values": [1, 2] } ], "launch": { "grid": [1], "block": [32] },
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
f:close()
-- --all refused for a constraint the spec got wrong says why, and offers
-- no --sample (which is for spaces too large to list)
f = assert(io.open(dir .. "/g.json", "w"))
f:write([[{ "name": "guard", "kernel": { "source": "k.cu", "entry": "k" },
  "knobs": [ { "name": "N", "values": [1, 2] }, { "name": "F", "values": [0, 1] } ],
  "constraints": ["N > 1 or F and N > 0"], "launch": { "grid": [1], "block": [32] },
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
f:close()
out, rc = run(dir .. "/g.json --all")
check(rc == 2 and out:find("used as a condition", 1, true) and not out:find("--sample", 1, true),
      "--all on a constraint error: rc %s\n%s", tostring(rc), out)
-- and a space too large to list is pointed to --sample (6 knobs of 40
-- values: 4.1e9 raw points, past the enumeration limit)
f = assert(io.open(dir .. "/big.json", "w"))
local knob = '{ "name": "%s", "values": [' .. table.concat((function()
  local v = {}
  for i = 1, 40 do v[i] = tostring(i) end
  return v
end)(), ", ") .. '] }'
local knobs_json = {}
for _, name in ipairs({ "N", "A", "B", "C", "D", "E" }) do knobs_json[#knobs_json + 1] = knob:format(name) end
f:write([[{ "name": "big", "kernel": { "source": "k.cu", "entry": "k" }, "knobs": []] ..
        table.concat(knobs_json, ", ") .. [[], "launch": { "grid": [1], "block": [32] },
  "args": [ { "name": "x", "type": "f32", "shape": [32], "output": true } ] }]])
f:close()
out, rc = run(dir .. "/big.json --all")
check(rc == 2 and out:find("too many to enumerate", 1, true) and out:find("use --sample N", 1, true),
      "--all on a space too large to list: rc %s\n%s", tostring(rc), out)
out, rc = run(dir .. "/p.json")
check(rc == 1 and out:find("knob N is a define, and <cuda_pipeline", 1, true) and
      out:find('rename the knob, or set "define": false', 1, true), "knob N in cuda_pipeline.h: rc %s\n%s",
      tostring(rc), out)
os.execute("rm -rf '" .. dir .. "'")

-- the clash is read from the caret under a knob's name in a system header,
-- not from an error in the kernel's own file or under another name
local compile = require("kopt.compile")
local knobs = { knobs = { { name = "Size" }, { name = "BLOCK" } } }
local log = '/usr/include/x.h(3): error: expected a "," or ">"\n  template <int Size>\n                ^\n'
local clash = compile.define_clash(log, knobs)
check(clash and clash:find("knob Size is a define, and <x.h> uses Size as a name (line 3)", 1, true),
      "a caret under Size in /usr/include/x.h: %s", tostring(clash))
check(compile.define_clash(log, { knobs = { { name = "Size", define = false } } }) == nil,
      "a knob that is no define clashes with nothing")
check(compile.define_clash(log:gsub("/usr/include/x.h", "k.cu"), knobs) == nil, "an error in the kernel's own file")
check(compile.define_clash(log:gsub("Size>", "Sz>  "), knobs) == nil, "a caret under a name that is no knob")

out, rc = run("specs/transpose.json --config TILE=7")
check(rc == 2 and out:find("not one of the knob's values", 1, true), "bad value: rc %s\n%s", tostring(rc), out)
out, rc = run("specs/transpose.json --bogus")
check(rc == 2, "bad flag: rc %s\n%s", tostring(rc), out)
print("kopt compile: ok")
return 0
