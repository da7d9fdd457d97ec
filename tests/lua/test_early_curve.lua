-- tools/early_curve.lua (the quick screen of a strategy's first
-- evaluations): its mean fractions of the optimum at 10, 20 and 30
-- evaluations equal `kopt compare`'s for the same strategy, options, space
-- and seeds; MCGS's evaluations are counted by kind, 30 per run in all;
-- bad arguments are refused with the usage line.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("early_curve")
local SPACE = "tests/data/pnpoly_RTX_3090.json"
local TOOL = T.source_dir .. "/tools/early_curve.lua"

for _, st in ipairs({ { "rules", "rules", "" }, { "mcgs", "mcgs@model=false", " model=false" } }) do
  local code, out, err = T.run(string.format("script %s %s 4 30 %s%s", TOOL, st[1], SPACE, st[3]))
  T.eq(code, 0, st[1] .. ": early_curve exit code (" .. err .. ")")
  local got = {}
  for b, f in out:gmatch("@(%d+) ([%d.]+)") do got[tonumber(b)] = tonumber(f) end
  code, _, err = T.run(string.format("compare --strategies %s --spaces %s --seeds 4 --budgets 10,20,30 -q --out %s/%s",
                                     st[2], SPACE, tmp, st[1]))
  T.eq(code, 0, st[1] .. ": compare exit code (" .. err .. ")")
  local rep = cjson.decode(T.slurp(tmp .. "/" .. st[1] .. "/benchmark.json"))
  local row
  for _, r in ipairs(rep.spaces[1].strategies) do if r.name == st[2] then row = r end end
  for i, b in ipairs({ 10, 20, 30 }) do
    T.check(got[b] and row and math.abs(got[b] - row.fraction[i]) < 6e-4,
            "%s at %d: early_curve %s, compare %s", st[1], b, tostring(got[b]), tostring(row and row.fraction[i]))
  end
  if st[1] == "mcgs" then
    local total, rows = 0, 0
    for n in out:gmatch("([%d.]+) evaluations per run") do total, rows = total + tonumber(n), rows + 1 end
    -- (each count printed to 0.1)
    T.check(rows > 2 and math.abs(total - 30) <= 0.05 * rows + 1e-9,
            "MCGS's evaluations by kind add up to 30 per run: %s in %d kinds", total, rows)
    T.check(out:find("initial sample", 1, true) ~= nil, "the initial samples are counted: %s", out)
  else
    T.check(not out:find("evaluations per run", 1, true), "no kinds for a strategy other than MCGS")
  end
end

for _, bad in ipairs({ "rules 0 30 " .. SPACE, "rules 4 x " .. SPACE, "rules 4 30", "rules 4 30 " .. SPACE .. " nokey" }) do
  local code, _, err = T.run("script " .. TOOL .. " " .. bad)
  T.eq(code, 2, "'" .. bad .. "' is refused")
  T.check(err:find("usage: kopt script tools/early_curve.lua", 1, true) ~= nil, "'%s': usage shown: %s", bad, err)
end

os.execute("rm -rf '" .. tmp .. "'")
T.done()
