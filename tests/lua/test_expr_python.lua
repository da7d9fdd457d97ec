-- Expressions written in Python (Kernel Tuner's restrictions) that are valid
-- Lua and mean something else. Each case guards:
--   * a 0/1 knob left of `and`, after `not`, or left of a plain `or`: an error
--     naming the constraint and the fix, not a space that silently keeps
--     other configs (Lua's 0 is true);
--   * `not a == 1` (Python's `not (a == 1)`): the same error, with that fix;
--   * a chained comparison: refused when compiled, with the `and` to write
--     (every link of a chain of three or more, and Python's `not` over the
--     whole chain), which compiles;
--   * `==` between a condition's result and a number: an error;
--   * the fixed forms keep Python's counts, and Python's XOR (`^`) is `~`;
--   * Python's `**`, `x if c else y` and `in [...]` refused with Lua's form;
--   * `c and x or y` with numeric x and y (launch geometry) keeps working,
--     nested too, and boolean knobs are conditions;
--   * the checks do not hide a knob named like them, reach every evaluation
--     (eval, number, a space's constraints), and add nothing to an expression
--     whose conditions are comparisons (the speed of a large space's walk);
--   * the error is raised by is_valid and sampling too, not taken as an
--     invalid config: a space too large to walk before the run (over 10^6
--     raw points) stops the run with the sentence, not a search that
--     silently drops the configs the constraint errs on.
local T = require("testlib")
local expr = require("kopt.expr")
local space_mod = require("kopt.space")

-- the Kernel Tuner space of the cases: 24 configs
local knobs = {
  { name = "block_size_x", values = { 16, 32, 64, 128 } },
  { name = "tile", values = { 1, 2, 4 } },
  { name = "use_fast", values = { 0, 1 } },
}
local function count(text)
  local e, err = expr.compile(text, "constraints[1]")
  if not e then return nil, err end
  local space = space_mod.new({ knobs = knobs, constraints = { e }, scope = {} })
  local ok, list = pcall(space.enumerate, space)
  if not ok then return nil, tostring(list) end
  return #list
end
local function refused(text, pattern)
  local n, err = count(text)
  T.check(n == nil and err and err:find(pattern, 1, true), "%q: expected an error containing %q, got %s", text,
          pattern, n and (n .. " configs") or tostring(err))
end

-- Python keeps 6, 16, 12 and 2 configs; Lua kept 12, 8, 0 and 0, silently
refused("use_fast and block_size_x > 32", "constraints[1]: 'use_fast' is a number (0) used as a condition " ..
        "(left of 'and'); in kopt's expressions 0 counts as true, unlike Python: write 'use_fast ~= 0'")
refused("not use_fast or tile > 2", "'use_fast' is a number (0) used as a condition (after 'not')")
refused("not use_fast or tile > 2", "write 'use_fast == 0'")
refused("not use_fast == 1", "write 'not (use_fast == 1)'")
refused("block_size_x == tile * 16 == 32", "expression 'block_size_x == tile * 16 == 32' chains comparisons, " ..
        "which kopt's expressions read as '(block_size_x == tile * 16) == 32', not as Python's " ..
        "'block_size_x == tile * 16 and tile * 16 == 32'")
refused("16 < block_size_x <= 64", "chains comparisons")
for text, readings in pairs({
  ["16 <= block_size_x <= tile <= 1024"] = { "((16 <= block_size_x) <= tile) <= 1024",
                                             "16 <= block_size_x and block_size_x <= tile and tile <= 1024" },
  ["not use_fast == 1 == 2"] = { "((not use_fast) == 1) == 2", "not (use_fast == 1 and 1 == 2)" },
}) do
  refused(text, string.format("read as '%s', not as Python's '%s': write the latter", readings[1], readings[2]))
  T.check(count(readings[2]) ~= nil, "%s: the form to write compiles", text)
end
refused("use_fast or tile > 2", "(left of 'or')")
refused("block_size_x % 32 and use_fast == 1", "'block_size_x % 32' is a number (16) used as a " ..
        "condition (left of 'and'); in kopt's expressions 0 counts as true, unlike Python: write " ..
        "'(block_size_x % 32) ~= 0'")
refused("not (tile > 1 and use_fast) or block_size_x > 32", "'use_fast' is a number (0) used as a condition " ..
        "(right of 'and')")
refused("tile > 1 and block_size_x % 32 and use_fast == 1", "'block_size_x % 32' is a number (16) used as a " ..
        "condition (right of 'and')")
refused("(block_size_x > 32) == use_fast", "compares false with the number 0")

-- the forms to write keep Python's counts
T.eq(count("use_fast ~= 0 and block_size_x > 32"), 6, "use_fast ~= 0 and ...")
T.eq(count("use_fast == 0 or tile > 2"), 16, "use_fast == 0 or ...")
T.eq(count("not (use_fast == 1)"), 12, "not (use_fast == 1)")
T.eq(count("block_size_x == tile * 16 and tile * 16 == 32"), 2, "the chain written with and")
-- Python's XOR: ^ is Lua's power (block_size_x ^ tile > 20 kept 22), ~ is XOR
T.eq(count("block_size_x ~ tile > 20"), 18, "~ is Python's ^")
T.eq(count("(block_size_x > 32) == (tile > 1)"), 12, "comparing two conditions")

-- the documented choice `c and x or y`, numbers on both sides, nested
local launch = assert(expr.compile("QUEUE == 1 and device.sm_count * 8 or cdiv(n, BLOCK)", "launch.grid[1]"))
local device = { sm_count = 132 }
T.eq(launch:number({ QUEUE = 1, BLOCK = 256 }, { n = 4096, device = device }), 1056, "the choice, queue")
T.eq(launch:number({ QUEUE = 0, BLOCK = 256 }, { n = 4096, device = device }), 16, "the choice, no queue")
local nested = assert(expr.compile("MODE == 1 and 10 or MODE == 2 and 0 or (MODE == 3 and 30 or 40)", "x"))
for mode, want in pairs({ [1] = 10, [2] = 0, [3] = 30, [4] = 40 }) do
  T.eq(nested:number({ MODE = mode }), want, "nested choice, MODE=" .. mode)
end
T.eq(#launch.guards, 0, "a choice on a comparison needs no check")
-- a boolean knob is a condition
local flags = space_mod.new({ knobs = { { name = "fast", values = { true, false } }, { name = "B", values = { 1, 2 } } },
                              constraints = { assert(expr.compile("not fast or B > 1", "c")) }, scope = {} })
T.eq(#flags:enumerate(), 3, "not on a boolean knob")
-- a knob spelled like a check
local named = assert(expr.compile("truth and equal > 1", "c"))
T.eq(named:eval({ truth = true, equal = 2 }), true, "knobs named truth and equal")
T.check(not named:eval({ truth = 0, equal = 2 }), "and checked")

-- every evaluation: eval, number, and a space's is_valid
local _, eval_err = assert(expr.compile("use_fast and 4 or 8", "launch.block[1]")):number({ use_fast = 0 })
T.check(eval_err and eval_err:find("failed for use_fast=0: 'use_fast' is a number (0) used as a condition", 1, true),
        "number(): %s", tostring(eval_err))
local space = space_mod.new({ knobs = knobs, constraints = { assert(expr.compile("not use_fast", "constraints[1]")) },
                              scope = {} })
local raised, why = pcall(space.is_valid, space, { block_size_x = 16, tile = 1, use_fast = 1 })
T.check(not raised and tostring(why):find("'use_fast' is a number (1) used as a condition", 1, true),
        "is_valid raises: %s", tostring(why))
local mixed = space_mod.new({ knobs = { { name = "a", values = { 1, 20 } }, { name = "f", values = { 0, 1 } } },
                              constraints = { assert(expr.compile("a < 16 or f and a > 0", "constraints[1]")) } })
local sampled, sample_err = pcall(function()
  local rng = require("kopt.rng").new(1)
  for _ = 1, 200 do mixed:sample(rng) end
end)
T.check(not sampled and tostring(sample_err):find("'f' is a number", 1, true), "sampling raises: %s",
        tostring(sample_err))

-- a run over a space of 2^21 raw points (sampled, not walked, before it)
local tmp = T.tmpdir("expr-python")
T.write(tmp .. "/k.cu", "extern \"C\" __global__ void k(float *out, int n) { out[0] = a + b + c + f; }\n")
local function count_to(n)
  local vs = {}
  for i = 1, n do vs[i] = tostring(i) end
  return "[" .. table.concat(vs, ", ") .. "]"
end
T.write(tmp .. "/big.json", string.format([[{"name": "big", "kernel": {"source": "k.cu", "entry": "k"},
  "problem": {"n": 1000},
  "knobs": [{"name": "a", "values": %s}, {"name": "b", "values": %s}, {"name": "c", "values": %s},
            {"name": "f", "values": [0, 1]}],
  "constraints": ["a < 16 or f and b > 0"],
  "launch": {"grid": [1], "block": [128]},
  "args": [{"name": "out", "type": "f32", "shape": ["n"], "output": true}, {"name": "n", "type": "i32", "value": "n"}]}
]], count_to(32), count_to(1024), count_to(32)))
local code, _, err = T.run("random big.json --budget 5 --out r", nil, tmp)
T.eq(code, 2, "a large space's run: exit code")
T.check(err:find("^kopt: big.json: constraints%[1%]: 'f' is a number %(%d%) used as a condition %(left of 'and'%); in " ..
                 "kopt's expressions 0 counts as true, unlike Python: write 'f ~= 0' %(at a=%d+, b=%d+, c=%d+, " ..
                 "f=%d%)\n$") and not err:find("traceback", 1, true), "a large space's run: %s", err)

-- comparisons as conditions: the expression runs as written
for _, text in ipairs({ "BLOCK_M % (16 * WARPS_M) == 0 and BLOCK_N % 8 == 0",
                        "CACHE == 0 or (UNROLL == 1 and VEC <= 2 and VEC * BLOCK_SIZE <= 512)",
                        "not (A > 1) and B < 2", "max(A, B) <= 8" }) do
  local e = assert(expr.compile(text, "c"))
  T.eq(#e.guards, 0, text .. ": no check added")
  T.eq(e.source, text, text .. ": the text as written")
end

-- Python's **, x if c else y and `in [...]`, which Lua does not parse: the
-- error says how Lua writes them ("in" read as an index before)
for text, want in pairs({ ["block_size_x ** 2 <= 4096"] = "a ** b as a ^ b",
                          ["(2 if a > 1 else 3) > 1"] = "'c and x or y'",
                          ["block_size_y in [1, 2, 4]"] = "'a == 1 or a == 2'" }) do
  local e, refusal = expr.compile(text)
  T.check(e == nil and tostring(refusal):find(want, 1, true), "%s: the Python form named: %s", text,
          tostring(refusal))
end

-- the messages: an eval names its field once, and an operand already in
-- parentheses is not wrapped again in the fix
do
  local e = assert(expr.compile("P and 2 or 1", "launch.grid[1]"))
  local _, said = e:eval({ P = 0 })
  T.check(said and not said:find("launch.grid[1]: ", 1, true), "the field named once by eval: %s", tostring(said))
  local g = assert(expr.compile("(P & 1) and X > 2", "constraints[1]"))
  local ok, wrapped_err = pcall(g.bind(g, { P = 0, X = 1 }))
  T.check(not ok and tostring(wrapped_err):find("write '(P & 1) ~= 0'", 1, true), "one pair of parentheses: %s",
          tostring(wrapped_err))
end

return T.done()
