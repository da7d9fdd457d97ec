-- The helpers that MCGS's default heuristics call on every state they are
-- asked about, and the checking of their moves; what they derive is kept per
-- space or per value list, and must answer as if derived again each call:
--  1. kopt.experts.pos: the first position of a value, nil for one the list
--     lacks, an integral float found as its integer; a list's positions are
--     not mixed up with another list's;
--  2. kopt.experts.knobs_in: knobs of one family or several, in knob order,
--     a fresh list each call (a caller that changes it changes no later
--     answer), read from the view's knobs as they are when asked;
--  3. kopt.experts.view: each view has its own knob list (an expert that
--     sorts or changes it changes no later view), with the families of its
--     space;
--  4. kopt.moves.apply with a valid base state: in a space without
--     constraints the changed config is valid unchecked; in one with
--     constraints a change that breaks one is still refused; an unknown knob
--     or value is refused either way; the key is the space's own;
--  5. kopt.moves.action_id of a multi-knob move: its changes in knob order,
--     as before.
local T = require("testlib")
local X = require("kopt.experts")
local moves = require("kopt.moves")
local space_mod = require("kopt.space")

-- 1. positions
local a = { name = "A", values = { 8, 16, 32, 16 } }
local b = { name = "B", values = { 32, 8 } }
T.eq(X.pos(a, 16), 2, "pos: the first of a repeated value")
T.eq(X.pos(a, 32), 3, "pos: a value of A")
T.eq(X.pos(b, 32), 1, "pos: another list, its own positions")
T.eq(X.pos(a, 64), nil, "pos: a value the list lacks")
T.eq(X.pos(a, nil), nil, "pos: no value")
T.eq(X.pos(a, 16.0), 2, "pos: an integral float is its integer")
T.eq(X.pos({ values = { "x", "y" } }, "y"), 2, "pos: string values")

-- 2. knobs by family
local view = { knobs = { { name = "TM", family = "tile_m" }, { name = "W", family = "warps" },
                         { name = "TN", family = "tile_n" }, { name = "W2", family = "warps" } } }
local w = X.knobs_in(view, { "warps" })
T.check(#w == 2 and w[1].name == "W" and w[2].name == "W2", "knobs_in: one family in knob order")
w[1], w[3] = nil, view.knobs[1]
local again = X.knobs_in(view, { "warps" })
T.check(#again == 2 and again[1].name == "W" and again[2].name == "W2", "knobs_in: a fresh list each call")
local both = X.knobs_in(view, { "tile_n", "tile_m" })
T.check(#both == 2 and both[1].name == "TM" and both[2].name == "TN", "knobs_in: several families in knob order")
T.eq(#X.knobs_in(view, { "stages" }), 0, "knobs_in: a family with no knob")
view.knobs[1], view.knobs[2] = view.knobs[2], view.knobs[1]
view.knobs[3].family = "warps"
w = X.knobs_in(view, { "warps" })
T.check(#w == 3 and w[1].name == "W" and w[2].name == "TN" and w[3].name == "W2",
        "knobs_in: the view's knobs as they are now, after an expert reordered and changed them")

-- 3. views share their space's classified knobs
local s1 = space_mod.new({ knobs = { { name = "BLOCK_SIZE_X", values = { 32, 64 } },
                                     { name = "TILE_M", values = { 16, 32 } } } })
local s2 = space_mod.new({ knobs = { { name = "NUM_WARPS", values = { 2, 4 } } } })
local function view_of(space)
  local c = space:sample(require("kopt.rng").new(1))
  return X.view({ space = space }, { config = c, key = space:key(c) })
end
local v1 = view_of(s1)
T.check(v1.knobs[1].family == "block" and v1.knobs[2].family == "tile_m", "view: families %s %s",
        tostring(v1.knobs[1].family), tostring(v1.knobs[2].family))
T.eq(#X.knobs_in(v1, { "block" }), 1, "knobs_in on a view")
table.sort(v1.knobs, function(p, q) return p.name > q.name end)
v1.knobs[1].family = "changed"
local v1b, v2 = view_of(s1), view_of(s2)
T.check(v1b.knobs ~= v1.knobs and v1b.knobs[1].name == "BLOCK_SIZE_X" and v1b.knobs[1].family == "block",
        "view: an expert's change to one view's knobs is not seen by the next")
T.check(#X.knobs_in(v1b, { "block" }) == 1 and X.knobs_in(v1b, { "block" })[1].name == "BLOCK_SIZE_X",
        "knobs_in on the next view: its own knobs")
T.check(#v2.knobs == 1 and v2.knobs[1].name == "NUM_WARPS" and v2.knobs[1].family == "warps",
        "view: each space its own knobs and families (%s)", tostring(v2.knobs[1].family))

-- 4. apply from a valid base
local knobs = { { name = "X", values = { 1, 2, 4 } }, { name = "Y", values = { 1, 2, 4 } } }
local free = space_mod.new({ knobs = knobs })
local bound = space_mod.new({ knobs = knobs, constraints = { "X * Y <= 4" } })
local base = { X = 1, Y = 1 }
local parts = { "1", "1" }
for _, case in ipairs({ { free, true }, { bound, false } }) do
  local space, allowed = case[1], case[2]
  local c, key = moves.apply(space, base, { changes = { X = 4, Y = 4 } }, parts, true)
  if allowed then
    T.check(c and c.X == 4 and c.Y == 4 and key == space:key(c) and key == "4,4", "apply: free space, key %s",
            tostring(key))
  else
    T.check(c == nil, "apply: a change that breaks a constraint is refused from a valid base")
  end
  c, key = moves.apply(space, base, { changes = { X = 2, Y = 2 } }, parts, true)
  T.check(c and key == "2,2" and base.X == 1, "apply: an allowed change, the base untouched (%s)", tostring(key))
  T.check(moves.apply(space, base, { changes = { X = 3, Y = 1 } }, parts, true) == nil, "apply: a value not allowed")
  T.check(moves.apply(space, base, { changes = { Z = 1, Y = 2 } }, parts, true) == nil, "apply: an unknown knob")
  c, key = moves.apply(space, base, { changes = { Y = 2, X = 2 } })
  T.check(c and key == "2,2", "apply: without parts or a known base")
end

-- 5. action ids
T.eq(moves.action_id(free, { changes = { Y = 2, X = 4 } }), "X=4,Y=2", "action_id: changes in knob order")
T.eq(moves.action_id(free, { changes = { Y = 2.0 } }), "Y=2", "action_id: one change, an integral float")
T.eq(moves.action_id(free, { changes = { Y = 3, X = 4 } }), "X=4,Y=3", "action_id: a value outside the list")

T.done()
