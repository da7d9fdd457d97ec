-- The examples for Kernel Tuner users (examples/kt/) on a GPU, each tuned
-- through the real binary with a spec alone: a correct winner for the
-- stencil writing only the interior of an in/out buffer, the two-kernel
-- reduction pipeline, the SpMV whose inputs come from .npy files and a
-- generator, the template kernel and the convolution whose filter size the
-- reference sees. Then the checks these features rely on, through the cuda
-- backend: a stencil that leaves interior points as they started is wrong,
-- so is a pipeline whose second kernel misses partial sums, and a spec's own
-- check can fail a candidate. Needs a GPU: exits 77 with the reason otherwise.
local T = require("testlib")
local cuda = require("kopt.backends.cuda")
local ok, why = cuda.available()
if not ok then
  print("skipped: " .. why)
  return 77
end
local cjson = require("cjson")
local spec_mod = require("kopt.spec")

local tmp = T.tmpdir("gpu_kt")
local examples = {
  { "stencil", "examples/kt/stencil/stencil.json" },
  { "reduce", "examples/kt/reduce/reduce2.json" },
  { "spmv", "examples/kt/spmv/spmv.json" },
  { "template", "examples/kt/template/axpy.json" },
  { "filter", "examples/kt/filter/conv1d.json" },
}
for _, e in ipairs(examples) do
  local name, spec = e[1], e[2]
  local out = tmp .. "/" .. name
  local code, stdout, err = T.run(string.format("random %s --budget 6 --seed 3 --no-db -q --out %s", spec, out))
  T.eq(code, 0, name .. ": exit code (" .. err .. ")")
  local f = io.open(out .. "/best/result.json")
  T.check(f ~= nil, "%s: no best/result.json\n%s%s", name, stdout, err)
  if f then
    local best = cjson.decode(f:read("a"))
    f:close()
    T.eq(best.result.status, "ok", name .. ": the winner's status")
    T.check(type(best.result.time_ms) == "number" and best.result.time_ms > 0, "%s: the winner's time", name)
    io.stdout:write(string.format("%-9s best %.4g ms %s\n", name, best.result.time_ms,
                                  cjson.encode(best.result.user_metrics or {})))
  end
end

-- planted faults, evaluated by the cuda backend
local G = require("gpu_testlib")
local write_spec, try_evaluate, evaluate = G.write_spec, G.try_evaluate, G.evaluate

-- a stencil that skips the last interior row when SKIP=1
local stencil = io.open("examples/kt/stencil/stencil.cu"):read("a")
  :gsub("if %(y < 1 || y >= ny %- 1%)", "if (y < 1 || y >= ny - 1 - SKIP)")
local sd = tmp .. "/skip"
local ref = io.open("examples/kt/stencil/stencil_ref.cu"):read("a")
local sj = io.open("examples/kt/stencil/stencil.json"):read("a")
  :gsub('"knobs": %[', '"knobs": [ { "name": "SKIP", "values": [0, 1] },')
  :gsub('"verify".-\n', "")
local skip = write_spec(sd, { ["stencil.cu"] = stencil, ["stencil_ref.cu"] = ref }, sj)
local r = evaluate(skip, { { SKIP = 0, block_size_x = 32, block_size_y = 4, tile_size_y = 1 },
                           { SKIP = 1, block_size_x = 32, block_size_y = 4, tile_size_y = 1 } })
T.eq(r[1].status, "ok", "stencil writing the whole interior")
T.eq(r[2].status, "wrong", "stencil leaving its last interior row as it started")
T.check((r[2].log or ""):find("still hold their initial value", 1, true) ~= nil,
        "the log names the elements left as they started: %s", tostring(r[2].log))

-- without the copy, the border is never written, not even by the
-- reference, which makes the spec wrong; the interior as a region passes,
-- and a region that takes in an unwritten row fails
local nocopy = sj:gsub(', "init": "copy:in"', "")
T.write(sd .. "/nocopy.json", nocopy)
T.write(sd .. "/region.json", (nocopy:gsub('"work":', '"verify": { "outputs": { "out": { "region": [[1, "ny - 1"], [1, "nx - 1"]] } } },\n  "work":')))
local res, err = try_evaluate(spec_mod.load(sd .. "/nocopy.json"),
                               { { SKIP = 0, block_size_x = 32, block_size_y = 4, tile_size_y = 1 } })
T.check(res == nil and err:find("the reference kernel left", 1, true) ~= nil,
        "without copy or region, the reference's unwritten border is a spec error: %s", tostring(err))
r = evaluate(spec_mod.load(sd .. "/region.json"), { { SKIP = 0, block_size_x = 32, block_size_y = 4, tile_size_y = 1 },
                                                     { SKIP = 1, block_size_x = 32, block_size_y = 4, tile_size_y = 1 } })
T.eq(r[1].status, "ok", "the interior as a region")
T.eq(r[2].status, "wrong", "a region whose last row is not written")

-- the .npy data reaches the kernel as written: the spec's check reads it back
local sp_dir = tmp .. "/spmv"
os.execute("mkdir -p '" .. sp_dir .. "' && cp examples/kt/spmv/* '" .. sp_dir .. "/'")
T.write(sp_dir .. "/rows.lua", [[
return function(out, ref, inp, sizes)
  local rp = inp.row_ptr
  if #rp ~= sizes.rows + 1 or rp[1] ~= 0 or rp[#rp] ~= sizes.nnz then
    return false, string.format("row_ptr: %d values, first %s, last %s", #rp, tostring(rp[1]), tostring(rp[#rp]))
  end
  for i = 2, #rp do if rp[i] < rp[i - 1] then return false, "row_ptr decreases at " .. i end end
  return #inp.vals == sizes.nnz
end]])
local spj = T.slurp(sp_dir .. "/spmv.json"):gsub('"work":', '"verify": { "check": "rows.lua" },\n  "work":')
T.write(sp_dir .. "/spmv.json", spj)
r = evaluate(spec_mod.load(sp_dir .. "/spmv.json"), { { block_size_x = 128, threads_per_row = 4 } })
T.eq(r[1].status, "ok", "spmv: the row pointers the kernel read are the file's (" .. tostring(r[1].log) .. ")")

-- a pipeline whose second kernel adds only the first half of the partial sums
local red = io.open("examples/kt/reduce/reduce2.cu"):read("a")
  :gsub("i < blocks; i %+= final_block", "i < blocks / (1 + HALF); i += final_block")
local rd = tmp .. "/half"
local rj = io.open("examples/kt/reduce/reduce2.json"):read("a")
  :gsub('"knobs": %[', '"knobs": [ { "name": "HALF", "values": [0, 1] },')
local half = write_spec(rd, { ["reduce2.cu"] = red,
                              ["reduce2_ref.cu"] = io.open("examples/kt/reduce/reduce2_ref.cu"):read("a") }, rj)
r = evaluate(half, { { HALF = 0, block_size_x = 256, items = 4, final_block = 128 },
                     { HALF = 1, block_size_x = 256, items = 4, final_block = 128 } })
T.eq(r[1].status, "ok", "the whole pipeline")
T.eq(r[2].status, "wrong", "a pipeline missing half of its partial sums")

-- a spec's own check: the sum of the partial sums must equal the output
T.write(rd .. "/partial_sum.lua", [[
return function(out, ref, inp, sizes)
  if sizes.items == 8 then return false, "items=8 refused by the check" end
  return math.abs(out.out[1] - ref.out[1]) <= 1e-3 * math.abs(ref.out[1])
end]])
local cj = rj:gsub('"verify": {', '"verify": { "check": "partial_sum.lua",')
T.write(rd .. "/c.json", cj)
local checked = spec_mod.load(rd .. "/c.json")
r = evaluate(checked, { { HALF = 0, block_size_x = 256, items = 4, final_block = 128 },
                        { HALF = 0, block_size_x = 256, items = 8, final_block = 128 } })
T.eq(r[1].status, "ok", "the spec's check passes")
T.eq(r[2].status, "wrong", "the spec's check fails a candidate")
T.check((r[2].log or ""):find("items=8 refused", 1, true) ~= nil, "the check's reason: %s", tostring(r[2].log))

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
