-- tools/model_quality.lua on spaces whose answer is known: a time that
-- grows with both knobs (the models rank it well, the predicted fastest is
-- near the fastest, one-knob steps change the time less than random pairs)
-- a time drawn at random per configuration (no ranking, steps as rough
-- as random pairs), and one time for all (nothing to rank, no step to
-- compare, no crash); bad arguments are refused with the usage line.
local T = require("testlib")
local cjson = require("cjson")

local tmp = T.tmpdir("model_quality")
local TOOL = T.source_dir .. "/tools/model_quality.lua"

local function t4(path, time_of)
  local results = {}
  for x = 1, 16 do
    for y = 1, 16 do
      results[#results + 1] = { configuration = { X = x, Y = y }, invalidity = "correct", objectives = { "time" },
                                measurements = { { name = "time", value = time_of(x, y), unit = "ms" } } }
    end
  end
  T.write(path, cjson.encode({ schema_version = "1.0.0", metadata = { timeunit = "ms" }, results = results }))
end

-- (a fixed pseudo-random time per configuration, spread over a factor of
-- e^3: Lua 5.4's generator gives the same draws for a seed everywhere)
math.randomseed(42)
local function scrambled() return math.exp(3 * math.random()) end
t4(tmp .. "/smooth.json", function(x, y) return 1 + x + 2 * y end)
t4(tmp .. "/random.json", scrambled)
t4(tmp .. "/flat.json", function() return 1.5 end)

local code, out, err = T.run(string.format("script %s %s/smooth.json,%s/random.json,%s/flat.json 20 6", TOOL, tmp,
                                           tmp, tmp))
T.eq(code, 0, "model_quality exit code (" .. err .. ")")
local rows = {}
for name, sg, sf, tg, tf, step in out:gmatch("(%w+)%s+([%d.-]+) / ([%d.-]+)%s+([%d.-]+) / ([%d.-]+)%s+([%d.-]+)") do
  rows[name] = { sg = tonumber(sg), sf = tonumber(sf), tg = tonumber(tg), tf = tonumber(tf), step = tonumber(step) }
end
local s, r = rows.smooth, rows.random
local flat_gp, flat_forest, flat_step = out:match("\nflat%s+([%d.-]+) / ([%d.-]+)%s+[%d.-]+ / [%d.-]+%s+(%S+)")
T.check(flat_gp == "0.00" and flat_forest == "0.00" and flat_step == "-",
        "flat space: Spearman 0 and no step ratio: %s", out)
T.check(s and r, "a row per space: %s", out)
if s and r then
  T.check(s.sg > 0.9 and s.sf > 0.7, "smooth space: the models rank it (gp %s, forest %s)", s.sg, s.sf)
  T.check(s.tg < 0.1 and s.tf < 0.2, "smooth space: the predicted fastest is near the top (gp %s, forest %s)",
          s.tg, s.tf)
  T.check(s.step < 0.6, "smooth space: one-knob steps are smaller than random pairs (%s)", s.step)
  T.check(math.abs(r.sg) < 0.35 and math.abs(r.sf) < 0.35, "random space: no ranking (gp %s, forest %s)", r.sg, r.sf)
  T.check(r.step > 0.6 and r.step < 1.5, "random space: steps as rough as random pairs (%s)", r.step)
end

for _, bad in ipairs({ "", tmp .. "/smooth.json 2", tmp .. "/smooth.json 20 0", tmp .. "/smooth.json x",
                       tmp .. "/smooth.json 20 5 extra" }) do
  code, _, err = T.run("script " .. TOOL .. " " .. bad)
  T.eq(code, 2, "'" .. bad .. "' is refused")
  T.check(err:find("usage: kopt script tools/model_quality.lua", 1, true) ~= nil, "'%s': usage shown: %s", bad, err)
end

os.execute("rm -rf '" .. tmp .. "'")
T.done()
