-- Can a constraint still hold once some knobs are fixed? The space's walk
-- checks a constraint when the last knob it reads is fixed, so one that
-- reads every knob ("sum of 26 flags == 2": 325 valid of 6.7e7) prunes
-- nothing and a sample of such a space found none. Here the constraint is
-- evaluated over intervals: a fixed knob is its value, an open one the
-- range of its values, and the answer is "certainly false" (prune the
-- subtree) or "maybe". Anything it does not follow (strings, tables,
-- device fields, unknown functions) is "maybe", so it never prunes a config
-- that holds: only the hull of a knob's values is used, never a gap in it.
local conditions = require("kopt.expr_conditions")

local M = {}

-- A value: { lo, hi } for a number in [lo, hi]; { t = bool, f = bool } for a
-- truth value that may be true and/or false; nil when not followed.
local function num(lo, hi) return { lo = lo, hi = hi } end
local function truth(t, f) return { t = t, f = f } end
local function is_num(v) return v ~= nil and v.lo ~= nil end
local function is_bool(v) return v ~= nil and v.t ~= nil end

local function span(...)
  local lo, hi = math.huge, -math.huge
  for i = 1, select("#", ...) do
    local x = select(i, ...)
    if x ~= x then return nil end -- NaN: not followed
    if x < lo then lo = x end
    if x > hi then hi = x end
  end
  return num(lo, hi)
end

local arith_raw

-- An operation's range, nil where it is not followed or not a number (NaN:
-- (-2) ^ 0.5 compares false with everything).
local function arith(op, a, b)
  local r = arith_raw(op, a, b)
  if r and (r.lo ~= r.lo or r.hi ~= r.hi) then return nil end
  return r
end

-- Lua's integers wrap past 2^63 (2^31 * 2^31 * 4 is negative), and floats
-- round past 2^53: a range whose ends reach 2^53 is not followed, since
-- values inside it may wrap or round where its ends did not.
local EXACT = 2.0 ^ 53

arith_raw = function(op, a, b)
  if not (is_num(a) and is_num(b)) then return nil end
  if op == "+" or op == "-" or op == "*" then
    -- (the ends in floats: no wrap there, and a range near it is refused)
    local r
    if op == "+" then r = num(a.lo + 0.0 + b.lo, a.hi + 0.0 + b.hi)
    elseif op == "-" then r = num(a.lo + 0.0 - b.hi, a.hi + 0.0 - b.lo)
    else r = span((a.lo + 0.0) * b.lo, (a.lo + 0.0) * b.hi, (a.hi + 0.0) * b.lo, (a.hi + 0.0) * b.hi) end
    if r and (math.abs(r.lo) >= EXACT or math.abs(r.hi) >= EXACT) then return nil end
    return r
  end
  local zero_in_b = b.lo <= 0 and b.hi >= 0
  if op == "/" or op == "//" then
    if zero_in_b then return nil end
    local q = span(a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi)
    if q and op == "//" then q = num(math.floor(q.lo), math.floor(q.hi)) end
    return q
  end
  if op == "%" then
    if a.lo == a.hi and b.lo == b.hi and b.lo ~= 0 then return num(a.lo % b.lo, a.lo % b.lo) end
    if b.lo > 0 then return num(0, b.hi) end -- Lua's % takes the divisor's sign
    return nil
  end
  if op == "^" then
    if a.lo == a.hi and b.lo == b.hi then return num(a.lo ^ b.lo, a.lo ^ b.lo) end
    if a.lo >= 0 and b.lo == b.hi and b.lo >= 0 then return num(a.lo ^ b.lo, a.hi ^ b.lo) end
    return nil
  end
  return nil
end

local function compare(op, a, b)
  if is_bool(a) and is_bool(b) and (op == "==" or op == "~=") then
    local same_known = (a.t ~= a.f) and (b.t ~= b.f)
    if not same_known then return truth(true, true) end
    local eq = a.t == b.t
    if op == "~=" then eq = not eq end
    return truth(eq, not eq)
  end
  if not (is_num(a) and is_num(b)) then return nil end
  local t, f
  if op == "<" then t, f = a.lo < b.hi, a.hi >= b.lo
  elseif op == "<=" then t, f = a.lo <= b.hi, a.hi > b.lo
  elseif op == ">" then t, f = a.hi > b.lo, a.lo <= b.hi
  elseif op == ">=" then t, f = a.hi >= b.lo, a.lo < b.hi
  else
    local disjoint = a.hi < b.lo or b.hi < a.lo
    local single = a.lo == a.hi and b.lo == b.hi
    t, f = not disjoint, not (single and a.lo == b.lo)
    if op == "~=" then t, f = f, t end
  end
  return truth(t, f)
end

-- Monotone functions of one argument, and min/max.
local INCREASING = { floor = math.floor, ceil = math.ceil, sqrt = math.sqrt, exp = math.exp, log = math.log,
                     log2 = function(x) return math.log(x, 2) end, int = function(x)
                       return x >= 0 and math.floor(x) or math.ceil(x) end }
local POSITIVE_ONLY = { sqrt = true, log = true, log2 = true }

local function call(name, args, n)
  for i = 1, n do if not is_num(args[i]) then return nil end end
  if (name == "min" or name == "max") and n > 0 then
    local lo, hi = args[1].lo, args[1].hi
    for i = 2, n do
      local f = math[name]
      lo, hi = f(lo, args[i].lo), f(hi, args[i].hi)
    end
    return num(lo, hi)
  end
  if n ~= 1 and name ~= "cdiv" then return nil end
  local a = args[1]
  if INCREASING[name] then
    if POSITIVE_ONLY[name] and a.lo <= 0 then return nil end
    local lo, hi = INCREASING[name](a.lo), INCREASING[name](a.hi)
    if lo ~= lo or hi ~= hi then return nil end
    return num(lo, hi)
  end
  if name == "abs" then
    if a.lo >= 0 then return a end
    if a.hi <= 0 then return num(-a.hi, -a.lo) end
    return num(0, math.max(-a.lo, a.hi))
  end
  if name == "cdiv" and n == 2 then
    -- as kopt.expr defines it, (a + b - 1) // b (b read twice: wider, still sound)
    local b = args[2]
    return arith("//", arith("-", arith("+", a, b), num(1, 1)), b)
  end
  return nil
end

-- Returns can_hold(lookup) for a compiled expression (kopt.expr), or nil
-- when it cannot be followed at all. lookup(name) gives a fixed value (a
-- number, true or false), or lo, hi of a knob still open (numbers; false,
-- true for a knob of truth values), or nil (not followed).
function M.compile(expr)
  if not expr.toks then return nil end
  local ok, root = pcall(conditions.parse, expr.toks)
  if not ok then return nil end
  local toks = expr.toks
  local function eval(node, lookup)
    local kind = node.kind
    if kind == "paren" then return eval(node.inner, lookup) end
    if kind == "atom" then
      if node.first ~= node.last then return nil end
      local t = toks[node.first]
      if t[1] == "number" then
        local v = tonumber(t[2])
        return v and num(v, v)
      elseif t[1] == "name" then
        if t[2] == "true" then return truth(true, false) end
        if t[2] == "false" then return truth(false, true) end
        local a, b = lookup(t[2])
        if b == nil then b = a end
        if type(a) == "boolean" and type(b) == "boolean" then return truth(a or b, not (a and b)) end
        if type(a) ~= "number" or type(b) ~= "number" then return nil end
        return num(a, b)
      end
      return nil
    end
    if kind == "unary" then
      local v = eval(node.operand, lookup)
      if node.op == "not" then return is_bool(v) and truth(v.f, v.t) or nil end
      if node.op == "-" then return is_num(v) and num(-v.hi, -v.lo) or nil end
      return nil
    end
    if kind == "binary" then
      local op = node.op
      local a = eval(node.left, lookup)
      if op == "or" then
        -- `c and x or y` with numbers x and y: x, y, or either
        local left = node.left
        while left.kind == "paren" do left = left.inner end
        if left.kind == "binary" and left.op == "and" then
          local c, x, y = eval(left.left, lookup), eval(left.right, lookup), eval(node.right, lookup)
          if is_bool(c) and is_num(x) and is_num(y) then
            if not c.f then return x end
            if not c.t then return y end
            return num(math.min(x.lo, y.lo), math.max(x.hi, y.hi))
          end
        end
      end
      if op == "and" or op == "or" then
        -- Lua's and/or over a truth value: decided when the left one is
        local b = eval(node.right, lookup)
        if not is_bool(a) then return nil end
        if op == "and" then
          if not a.t then return a end
          if not a.f then return b end
          return is_bool(b) and truth(b.t, true) or nil
        end
        if not a.f then return a end
        if not a.t then return b end
        return is_bool(b) and truth(true, b.f) or nil
      end
      local b = eval(node.right, lookup)
      if op == "==" or op == "~=" or op == "<" or op == "<=" or op == ">" or op == ">=" then
        return compare(op, a, b)
      end
      return arith(op, a, b)
    end
    if kind == "call" and not node.sugar and node.fn.kind == "atom" and node.fn.first == node.fn.last then
      local fname = toks[node.fn.first]
      if fname[1] ~= "name" then return nil end
      local args = {}
      for i, a in ipairs(node.args) do args[i] = eval(a, lookup) end
      return call(fname[2], args, #node.args)
    end
    return nil
  end
  return function(lookup)
    local v = eval(root, lookup)
    return not (is_bool(v) and not v.t)
  end
end

return M
