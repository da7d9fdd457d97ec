-- `kopt compile SPEC`: a spec's configs compile without a GPU (exit 0 and a
-- line per config with its registers), a kernel that does not compile is
-- exit 1 with the compiler's message, bad input is exit 2; the knobs that
-- --config leaves out keep their defaults when another knob has none (they
-- were all the first valid config's, away from every default).
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
os.execute("rm -rf '" .. dir .. "'")

out, rc = run("specs/transpose.json --config TILE=7")
check(rc == 2 and out:find("not one of the knob's values", 1, true), "bad value: rc %s\n%s", tostring(rc), out)
out, rc = run("specs/transpose.json --bogus")
check(rc == 2, "bad flag: rc %s\n%s", tostring(rc), out)
print("kopt compile: ok")
return 0
