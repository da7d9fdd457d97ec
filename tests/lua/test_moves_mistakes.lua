-- A user's move generator with mistakes (found by writing them): each case
-- failed before its fix.
-- * A global set by mistake (`type = "tile"`, local forgotten) replaced
--   kopt's own and ended the run with an internal error; os.exit ended kopt
--   with no summary and no results: generator files now load in the
--   strategies' sandbox.
-- * A return that is not a list of moves (a number, a list of numbers,
--   changes as a string) ended the run with an error inside kopt.moves.
-- * A NaN prior made every prior of the state NaN: the user's moves were
--   never measured.
-- * A move without a method, merged with a rule move to the same state,
--   stopped mcgs ("table index is nil").
-- * state.result, which the docs promise, was never set by mcgs or rules.
-- * An expensive generator (an expert) as MCGS's only generator was never
--   called: every state was closed as exhausted before it earned the visits.
-- * rules asked an expensive generator (one LLM request each) about the same
--   state again at every local optimum, and in every perturbation.
-- * A rule move from a state with a code edit dropped the edit: MCGS and
--   rules then tuned the original kernel's knobs as the edited state's
--   children (and recorded them as 2x slowdowns of the edit).
-- * Moves given as whole configs (`config =`, no `changes`) were taken as
--   moves that change nothing and dropped without a word.
-- * A generator's error named neither its file nor the line: "attempt to
--   index a nil value", or a kopt module's line for a kopt call it made.
-- * A generator path with a space in --opt moves= was cut at the space; and
--   once it was not, "rules experts" (the list of a compare variant, which
--   cannot hold a comma) was one unknown name.
local T = require("testlib")

local tmp = T.tmpdir("moves-mistakes")
local REC = "--backend replay:tests/data/convolution_A100.json --budget 30 -q"

local function gen(name, body)
  local path = tmp .. "/" .. name .. ".lua"
  T.write(path, body)
  return path
end

local cases = {
  { "global", 'type = "tile"\nreturn function(ctx, state)\n  return { { changes = { block_size_x = 32 }, ' ..
              'method = type .. "_move" } }\nend\n' },
  { "exit", "return function(ctx, state) os.exit(3) end\n", "called os.exit" },
  { "number", "return function(ctx, state) return 42 end\n", "returned number: expected a list of moves" },
  { "numbers", "return function(ctx, state) return { 1, 2, 3 } end\n", "move 1 is number, expected a table" },
  { "changes_string", 'return function(ctx, state) return { { changes = "block_size_x=32" } } end\n',
    "changes is string, expected a table" },
  -- a move without a method that reaches the state of a rule move with a
  -- lower prior: its nil method became a table index, and mcgs stopped
  { "no_method", 'return { name = "nomethod", propose = function(ctx, state)\n' ..
                 '  return { { changes = { block_size_x = 32 }, prior = 2 } }\nend }\n', nil,
    "--backend replay:tests/data/pnpoly_RTX_3090.json --budget 30 -q" },
  { "nan_prior", "return function(ctx, state)\n  return { { changes = { block_size_x = 32 }, prior = 0/0, " ..
                 'method = "nan_move" } }\nend\n', "prior" },
  { "configs", "return function(ctx, state)\n  local out = {}\n  for _, c in ipairs(ctx.space:neighbours(state.config, " ..
               '"adjacent")) do out[#out + 1] = { config = c, method = "nb", prior = 5 } end\n  return out\nend\n',
    "move 1 has no changes (expected { changes = { KNOB = value }, ... }: config is no field of a move" },
}
for _, c in ipairs(cases) do
  local path = gen(c[1], c[2])
  for _, s in ipairs({ "mcgs", "rules" }) do
    local dir = tmp .. "/" .. c[1] .. "_" .. s
    local code, _, err = T.run(string.format("%s %s --out %s --opt moves=rules,%s", s, c[4] or REC, dir, path))
    T.eq(code, 0, c[1] .. " under " .. s .. ": exit code\n" .. err)
    T.check(T.exists(dir .. "/results.json"), "%s under %s: results.json written", c[1], s)
    if c[3] then T.check(err:find(c[3], 1, true), "%s under %s: the note names it\n%s", c[1], s, err) end
  end
end

-- the priors of a state with a NaN-prior move from a file stay finite
-- (every prior of the state was NaN: its moves were never chosen)
do
  local moves = require("kopt.moves")
  local g = assert(moves.load(gen("nan_direct", "return function(ctx, state)\n  return { { changes = { x = 2 }, " ..
                                                "prior = 0/0 }, { changes = { x = 3 }, prior = 1 } }\nend\n")))
  local space = require("kopt.space").new({ knobs = { { name = "x", values = { 1, 2, 3 } } } })
  local ctx = { space = space, quiet_generators = true }
  function ctx:key(c) return space:key(c) end
  function ctx:log() end
  local props = moves.propose(ctx, { config = { x = 1 }, key = "1" }, { g })
  T.eq(#props, 2, "NaN prior: both moves kept")
  for _, m in ipairs(props) do
    T.check(m.prior == m.prior and m.prior > 0 and m.prior < math.huge, "NaN prior: move %s has prior %s", m.key,
            tostring(m.prior))
  end
end

-- a generator's error names its file and the line, its own or the one
-- that made a failing kopt call
do
  local moves = require("kopt.moves")
  local space = require("kopt.space").new({ knobs = { { name = "x", values = { 1, 2, 3 } } } })
  for _, c in ipairs({ { "index", "  for _ in ipairs(state.knobs) do end\n", "attempt to index a nil value (at " },
                       { "kopt_call", "  local pick = ctx.rng:choice({})\n", "rng:choice: empty list (" } }) do
    local path = gen("err_" .. c[1], 'return { name = "reshape", propose = function(ctx, state)\n' .. c[2] ..
                                     "  return {}\nend }\n")
    local logged = {}
    local ctx = { space = space, quiet_generators = true, rng = require("kopt.rng").new(1) }
    function ctx:key(cfg) return space:key(cfg) end
    function ctx:log(fmt, ...) logged[#logged + 1] = string.format(fmt, ...) end
    moves.propose(ctx, { config = { x = 1 }, key = "1" }, moves.resolve("rules," .. path))
    local msg = table.concat(logged, "\n")
    T.check(msg:find("move generator reshape (" .. path .. ") failed: ", 1, true) and
            msg:find(c[3], 1, true) and msg:find(path .. ":2)", 1, true), "%s: the error names the file and line:\n%s", c[1], msg)
  end
end

-- a generator path with a space, and spaces around the list's items
do
  local moves = require("kopt.moves")
  os.execute("mkdir -p '" .. tmp .. "/my gens'")
  local path = tmp .. "/my gens/spaced.lua"
  T.write(path, 'return { name = "spaced", propose = function() return {} end }\n')
  local gens = moves.resolve("rules , " .. path .. " ")
  T.eq(#gens, 2, "a path with a space: two generators")
  T.eq(gens[2] and gens[2].name, "spaced", "a path with a space: the file's generator")
  -- names apart at spaces: each a generator, a path among them too
  local spaced_ok, spaced = pcall(moves.resolve, "rules heuristics")
  T.check(spaced_ok and #spaced == 2 and spaced[2].name == "heuristics", "rules heuristics: two generators (%s)",
          spaced_ok and #spaced or tostring(spaced))
  local plain = tmp .. "/plain.lua"
  T.write(plain, 'return { name = "plain", propose = function() return {} end }\n')
  local mixed_ok, mixed = pcall(moves.resolve, "rules " .. plain .. ", heuristics")
  T.check(mixed_ok and #mixed == 3, "a name and a path at a space, then a comma: three generators (%s)",
          mixed_ok and #mixed or tostring(mixed))
  local ok, err = pcall(moves.resolve, "rules heuristicz")
  T.check(not ok and tostring(err):find("unknown move generator 'rules heuristicz'", 1, true), "a word unknown: %s",
          tostring(err))
  local code, _, stderr = T.run("compare --strategies 'mcgs@moves=rules heuristics' " ..
                                "--spaces tests/data/convolution_A100.json --seeds 1 --budgets 5 --out " .. tmp ..
                                "/cmp -q")
  T.check(code == 0, "compare with mcgs@moves=rules heuristics: %d %s", code, stderr)
end

-- state.result: a generator that proposes only from a measured state
do
  local path = gen("result", [[
return function(ctx, state)
  if state.result and state.result.status == "ok" and type(state.result.time_ms) == "number" then
    return { { changes = { read_only = 1 - state.config.read_only }, method = "saw_result", prior = 100 } }
  end
  return {}
end
]])
  for _, s in ipairs({ "mcgs", "rules" }) do
    local dir = tmp .. "/result_" .. s
    local code, _, err = T.run(string.format("%s %s --budget 60 --out %s --opt moves=rules,%s", s, REC, dir, path))
    T.eq(code, 0, "state.result under " .. s .. ": exit code\n" .. err)
    local seen = false
    for _, ev in ipairs((T.events(dir))) do
      if ev.origin and ev.origin.method == "saw_result" then seen = true end
    end
    T.check(seen, "state.result under %s: the generator saw a measured state's result", s)
  end
end

-- an expensive generator alone
do
  local path = gen("expensive", [[
return { name = "only_expert", expensive = true, propose = function(ctx, state)
  local v = state.config.block_size_x == 64 and 128 or 64
  return { { changes = { block_size_x = v }, method = "expert_move", prior = 1 } }
end }
]])
  local dir = tmp .. "/expensive"
  local code, _, err = T.run(string.format("mcgs %s --budget 60 --out %s --opt moves=%s", REC, dir, path))
  T.eq(code, 0, "an expensive generator alone: exit code\n" .. err)
  local n = 0
  for _, ev in ipairs((T.events(dir))) do
    if ev.origin and ev.origin.method == "expert_move" then n = n + 1 end
  end
  T.check(n > 0, "an expensive generator alone: its moves were measured (%d)", n)
end

-- rules asks an expensive generator once per state
do
  local log = tmp .. "/asked.txt"
  local path = gen("asked", string.format([[
return { name = "logged_expert", expensive = true, propose = function(ctx, state)
  local f = io.open(%q, "a")
  f:write(state.key, "\n")
  f:close()
  return { { changes = { tile_size_y = state.config.tile_size_y == 4 and 2 or 4 }, method = "expert_move" } }
end }
]], log))
  local code, _, err = T.run(string.format("rules %s --budget 80 --out %s/asked --opt moves=rules,%s", REC, tmp, path))
  T.eq(code, 0, "rules with an expensive generator: exit code\n" .. err)
  local seen, calls, again = {}, 0, 0
  for key in io.lines(log) do
    calls = calls + 1
    if seen[key] then again = again + 1 end
    seen[key] = true
  end
  T.check(calls > 0 and again == 0, "rules: %d calls of the expensive generator, %d about a state asked before",
          calls, again)
end

-- a rule move from an edited state keeps the edit (and the key its hash)
do
  local moves = require("kopt.moves")
  local space = require("kopt.space").new({ knobs = { { name = "block_size_x", values = { 32, 64, 128 } },
                                                      { name = "x", values = { 1, 2 } } } })
  local ctx = { space = space, quiet_generators = true }
  function ctx:key(c) return space:key(c) end
  function ctx:log() end
  local P = "@@ -1,1 +1,1 @@\n-a\n+b\n"
  local props = moves.propose(ctx, { config = { block_size_x = 64, x = 1 }, key = "64,1#dead", patch = P },
                              moves.resolve("rules"))
  T.check(#props > 0, "rule moves from the edited state")
  for _, m in ipairs(props) do
    T.check(m.patch == P and tostring(m.key):find("#", 1, true), "%s keeps the edit (%s, %s)", tostring(m.method),
            tostring(m.key), tostring(m.patch))
  end
end

-- MCGS's repair turns: a fix that failed when measured is not reused for
-- the next state that fails with the same broken source
do
  local edits = require("kopt.mcgs_edits")
  -- (node 7 is the fix's own state; node 9 a rule move's child of it)
  local st = { fixes = { broken = { { patch = "fix" } } }, fix_of = { [7] = "broken" } }
  edits.fix_failed(st, 9)
  T.check(st.fixes.broken, "a failure of another state leaves the fix")
  edits.fix_failed(st, 7)
  T.eq(st.fixes.broken, false, "the fix that failed is not reused")
end

-- an unknown expert in KOPT_EXPERTS under mcgs's expert moves: refused
-- before the run (it was found at the first expert call, exit 0, and cost
-- every expert its moves)
do
  local code, _, err = T.run("mcgs " .. REC .. " --opt moves=rules,experts --out " .. tmp .. "/badexp",
                             "KOPT_EXPERTS=throughput,memroy")
  T.check(code == 2 and err:find("unknown expert 'memroy'", 1, true) and not err:find("not found:", 1, true),
          "an unknown expert is refused at the start (%d): %s", code, err)
end

-- an expert move's own label reaches MCGS's events and transitions (it
-- was dropped: only the canonical method was kept)
do
  -- (a move no rule proposes: three knobs at once)
  local path = gen("labelled", 'return { name = "labelled", expensive = true, propose = function(ctx, state)\n' ..
    '  local c = state.config\n' ..
    '  return { { changes = { block_size_x = c.block_size_x == 32 and 64 or 32, tile_size_y = c.tile_size_y == 2 and 3 ' ..
    'or 2, read_only = 1 - c.read_only }, method = "tile_up", label = "Hilbert-curve rasterization", ' ..
    'expert = "memory", prior = 5 } }\nend }\n')
  local out = tmp .. "/labelled"
  local code, _, err = T.run("mcgs --backend replay:tests/data/convolution_A100.json --budget 60 -q --opt moves=rules," ..
                             path .. " --opt expert_c=10 --out " .. out)
  T.eq(code, 0, "labelled moves: " .. err)
  local in_events, in_trans = false, false
  for _, ev in ipairs((T.events(out))) do
    if ev.origin and ev.origin.label == "Hilbert-curve rasterization" then in_events = true end
  end
  for line in T.slurp(out .. "/transitions.jsonl"):gmatch("[^\n]+") do
    if line:find('"label":"Hilbert-curve rasterization"', 1, true) then in_trans = true end
  end
  T.check(in_events and in_trans, "the label in events.jsonl (%s) and transitions.jsonl (%s)", tostring(in_events),
          tostring(in_trans))
end

-- an expert that exists but requires a module that does not is named for
-- that module, not as an unknown expert
do
  os.execute("mkdir -p '" .. tmp .. "/lp/kopt/experts'")
  T.write(tmp .. "/lp/kopt/experts/needy.lua", 'local h = require("my_missing_helper")\nreturn { heuristic = function() return {} end }\n')
  local code, _, err = T.run("experts " .. REC .. " --opt experts=needy --out " .. tmp .. "/needy",
                             "LUA_PATH='" .. tmp .. "/lp/?.lua;;'")
  T.check(code == 2 and err:find("my_missing_helper", 1, true) and not err:find("unknown expert", 1, true),
          "a missing module of an expert is named: %s", err)
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
