-- Where Lua and Python read one expression differently. Constraints copied
-- from Kernel Tuner are Python, and most of them are valid Lua that means
-- something else: 0 is true in Lua ("use_fast and BS > 32" keeps the
-- use_fast=0 configs), `not` binds tighter than `==` ("not a == 1" is
-- "(not a) == 1", never true for a number), and comparisons do not chain
-- ("a == b == c" compares true or false with c). A search space changed that
-- way is silent, so kopt refuses those readings instead:
--   * a chained comparison is refused when the expression is compiled;
--   * a number used as a condition (left of `and`, after `not`, left of an
--     `or` that is no `c and x or y` choice, either side of an `and`/`or`
--     whose own value is a condition) raises when it is met;
--   * `==`/`~=` between a condition's true or false and a number raises.
-- rewrite() parses the expression's tokens and returns its text with those
-- operands wrapped in calls of the two checks; an operand that is always true
-- or false (a comparison) is not wrapped, so the usual constraints run as
-- fast as before.
local M = {}

local COMPARISONS = { ["=="] = true, ["~="] = true, ["<"] = true, ["<="] = true, [">"] = true, [">="] = true }
-- Lua 5.4's priorities (lparser.c): left and right binding power.
local BINARY = {
  ["or"] = { 1, 1 }, ["and"] = { 2, 2 },
  ["=="] = { 3, 3 }, ["~="] = { 3, 3 }, ["<"] = { 3, 3 }, ["<="] = { 3, 3 }, [">"] = { 3, 3 }, [">="] = { 3, 3 },
  ["|"] = { 4, 4 }, ["~"] = { 5, 5 }, ["&"] = { 6, 6 }, ["<<"] = { 7, 7 }, [">>"] = { 7, 7 },
  [".."] = { 9, 8 }, ["+"] = { 10, 10 }, ["-"] = { 10, 10 },
  ["*"] = { 11, 11 }, ["/"] = { 11, 11 }, ["//"] = { 11, 11 }, ["%"] = { 11, 11 },
  ["^"] = { 14, 13 },
}
local UNARY_PRIORITY = 12
local UNARY = { ["not"] = true, ["-"] = true, ["#"] = true, ["~"] = true }

-- A parser over the tokens of kopt.expr (kind, text, position). Nodes:
-- { kind = "atom" | "paren" | "unary" | "binary" | "suffix" | "call",
--   first, last (token indices), ... }. An error is raised as a table
-- { parse = message } (the caller then keeps the unchecked expression: Lua's
-- own parser has accepted it).
local function parse(toks)
  local at = 1
  local function peek() return toks[at] end
  local function is_op(t, text) return t and t[1] == "op" and t[2] == text end
  local function is_word(t, text) return t and t[1] == "name" and t[2] == text end
  local function expect(text)
    if not is_op(peek(), text) then error({ parse = "expected '" .. text .. "'" }, 0) end
    at = at + 1
  end
  local expression
  -- a table constructor: its tokens, balanced, as one atom
  local function skip_braces()
    local depth = 0
    repeat
      local t = peek()
      if not t then error({ parse = "a '{' is not closed" }, 0) end
      if is_op(t, "{") then depth = depth + 1 elseif is_op(t, "}") then depth = depth - 1 end
      at = at + 1
    until depth == 0
  end
  local function primary()
    local first, t = at, peek()
    local node
    if t and t[1] == "name" then
      at = at + 1
      node = { kind = "atom", first = first, last = first }
    elseif is_op(t, "(") then
      at = at + 1
      local inner = expression(0)
      expect(")")
      node = { kind = "paren", inner = inner, first = first, last = at - 1 }
    else
      error({ parse = "unexpected '" .. tostring(t and t[2]) .. "'" }, 0)
    end
    while true do
      t = peek()
      if is_op(t, ".") then
        at = at + 2
        node = { kind = "suffix", object = node, first = first, last = at - 1 }
      elseif is_op(t, "[") then
        at = at + 1
        local key = expression(0)
        expect("]")
        node = { kind = "index", object = node, key = key, first = first, last = at - 1 }
      elseif is_op(t, "(") then
        at = at + 1
        local args = {}
        if not is_op(peek(), ")") then
          repeat
            if is_op(peek(), ",") then at = at + 1 end
            args[#args + 1] = expression(0)
          until not is_op(peek(), ",")
        end
        expect(")")
        node = { kind = "call", fn = node, args = args, first = first, last = at - 1 }
      elseif t and t[1] == "string" or is_op(t, "{") then
        -- f"text" and f{...}: the argument as written
        local arg_first = at
        if is_op(t, "{") then skip_braces() else at = at + 1 end
        node = { kind = "call", fn = node, args = { { kind = "atom", first = arg_first, last = at - 1 } },
                 sugar = true, first = first, last = at - 1 }
      else
        return node
      end
    end
  end
  local function simple()
    local t, first = peek(), at
    if t and (t[1] == "number" or t[1] == "string" or is_word(t, "nil") or is_word(t, "true") or
              is_word(t, "false") or is_op(t, "...")) then
      at = at + 1
      return { kind = "atom", first = first, last = first, boolean = is_word(t, "true") or is_word(t, "false") }
    end
    if is_op(t, "{") then
      skip_braces()
      return { kind = "atom", first = first, last = at - 1 }
    end
    return primary()
  end
  expression = function(limit)
    local t, first = peek(), at
    local node
    if t and UNARY[t[2]] and (t[1] == "op" or is_word(t, "not")) then
      at = at + 1
      local operand = expression(UNARY_PRIORITY)
      node = { kind = "unary", op = t[2], operand = operand, first = first, last = operand.last }
    else
      node = simple()
    end
    while true do
      t = peek()
      local op = t and (t[1] == "op" or is_word(t, "and") or is_word(t, "or")) and t[2]
      local power = op and BINARY[op]
      if not power or power[1] <= limit then return node end
      at = at + 1
      local right = expression(power[2])
      node = { kind = "binary", op = op, left = node, right = right, first = node.first, last = right.last }
    end
  end
  local root = expression(0)
  if at <= #toks then error({ parse = "unexpected '" .. toks[at][2] .. "'" }, 0) end
  return root
end

-- (kopt.space_bounds evaluates the same tree over intervals)
M.parse = parse

local function unparen(node)
  while node.kind == "paren" do node = node.inner end
  return node
end

local function is_comparison(node) return node.kind == "binary" and COMPARISONS[node.op] end

-- Always true or false: a comparison, `not`, or the literals.
local function is_boolean(node)
  node = unparen(node)
  return (is_comparison(node) or (node.kind == "unary" and node.op == "not") or node.boolean) and true or false
end

-- A chain of comparisons ("a < b <= c < d", written without parentheses) as
-- Lua reads it, "((a < b) <= c) < d", and as Python does, "a < b and b <= c
-- and c < d"; Python's `not` takes the whole chain ("not x == 1 == 2" is
-- "not (x == 1 and 1 == 2)"), where Lua's takes x alone.
local function chain_readings(node, source)
  local operands, ops = {}, {}
  while is_comparison(node) do
    table.insert(operands, 1, node.right)
    table.insert(ops, 1, node.op)
    node = node.left
  end
  local first, negated = source(node), node.kind == "unary" and node.op == "not"
  local lua_reading = negated and "(" .. first .. ")" or first
  local links = {}
  local left = negated and source(node.operand) or first
  for i, op in ipairs(ops) do
    local right = source(operands[i])
    lua_reading = (i == 1 and lua_reading or "(" .. lua_reading .. ")") .. " " .. op .. " " .. right
    links[i] = left .. " " .. op .. " " .. right
    left = right
  end
  local python_reading = table.concat(links, " and ")
  if negated then python_reading = "not (" .. python_reading .. ")" end
  return lua_reading, python_reading
end

-- Returns the expression's text with the checks in place as calls of
-- `truth(value, i)` and `equal(a, b, i)` (named by the caller), and the list
-- of what each i guards; or the text unchanged and an empty list when
-- nothing needs a check; or nil and why (a chained comparison). A text the
-- parser here does not follow is returned unchanged.
function M.rewrite(text, toks, truth, equal)
  local ok, root = pcall(parse, toks)
  if not ok then
    if type(root) == "table" and root.parse then return text, {} end
    error(root, 0)
  end
  local function source(node)
    local a, b = toks[node.first], toks[node.last]
    return text:sub(a[3], b[3] + #b[2] - 1)
  end
  local guards = {}
  local emit
  local function checked(node, where, fix)
    guards[#guards + 1] = { text = source(node), where = where, fix = fix }
    return string.format("%s(%s, %d)", truth, emit(node), #guards)
  end
  -- a node whose value is used as true or false
  local function condition(node, where, fix)
    local inner = unparen(node)
    if inner.kind == "binary" and (inner.op == "and" or inner.op == "or") or
       (inner.kind == "unary" and inner.op == "not") then
      return emit(node, true)
    end
    if is_boolean(inner) then return emit(node) end
    return checked(node, where, fix)
  end
  -- the left operand of an `or` whose value is used: `c and x or y` chooses
  -- x or y (x may be a number there), and so does a chain of such choices
  local function choice_left(node)
    local inner = unparen(node)
    if inner.kind == "binary" and inner.op == "and" then return emit(node) end
    if inner == node and node.kind == "binary" and node.op == "or" then
      return choice_left(node.left) .. " or " .. choice_left(node.right)
    end
    return condition(node, "left of 'or'")
  end
  local chained
  emit = function(node, as_condition)
    local kind = node.kind
    if kind == "paren" then return "(" .. emit(node.inner, as_condition) .. ")" end
    if kind == "unary" then
      if node.op == "not" then
        return "not " .. condition(node.operand, "after 'not'")
      end
      return node.op .. " " .. emit(node.operand)
    end
    if kind == "binary" then
      local op = node.op
      if op == "and" then
        return condition(node.left, "left of 'and'") .. " and " ..
          (as_condition and condition(node.right, "right of 'and'") or emit(node.right))
      end
      if op == "or" then
        if as_condition then
          return condition(node.left, "left of 'or'") .. " or " .. condition(node.right, "right of 'or'")
        end
        return choice_left(node.left) .. " or " .. emit(node.right)
      end
      if COMPARISONS[op] then
        if is_comparison(node.left) then chained = chained or node end
        -- `not a == b` is Python's `not (a == b)`
        local left = node.left
        if left.kind == "unary" and left.op == "not" then
          local fix = string.format("not (%s %s %s)", source(left.operand), op, source(node.right))
          left = "not " .. condition(left.operand, "after 'not', which binds tighter than '" .. op .. "'", fix)
        else
          left = emit(left)
        end
        local right = emit(node.right)
        if (op == "==" or op == "~=") and is_boolean(node.left) ~= is_boolean(node.right) then
          guards[#guards + 1] = { text = source(node), op = op, comparison = true }
          return string.format("%s(%s, %s, %d)", equal, left, right, #guards)
        end
        return left .. " " .. op .. " " .. right
      end
      return emit(node.left) .. " " .. op .. " " .. emit(node.right)
    end
    if kind == "suffix" then return emit(node.object) .. "." .. toks[node.last][2] end
    if kind == "index" then return emit(node.object) .. "[" .. emit(node.key) .. "]" end
    if kind == "call" then
      if node.sugar then return emit(node.fn) .. " " .. source(node.args[1]) end
      local args = {}
      for i, a in ipairs(node.args) do args[i] = emit(a) end
      return emit(node.fn) .. "(" .. table.concat(args, ", ") .. ")"
    end
    -- an atom: its tokens as written
    return source(node)
  end
  local out = emit(root)
  if chained then
    local lua_reading, python_reading = chain_readings(chained, source)
    return nil, string.format("chains comparisons, which kopt's expressions read as '%s', not as Python's '%s': " ..
                              "write the latter", lua_reading, python_reading)
  end
  if #guards == 0 then return text, guards end
  return out, guards
end

-- A name, or a text one pair of parentheses encloses whole: an operand as
-- it stands ("(a & 1)" is not wrapped again).
local function grouped(text)
  if text:find("^[%w_%.]+$") then return true end
  if text:sub(1, 1) ~= "(" or text:sub(-1) ~= ")" then return false end
  local depth = 0
  for i = 1, #text do
    local c = text:sub(i, i)
    if c == "(" then depth = depth + 1 elseif c == ")" then depth = depth - 1 end
    if depth == 0 and i < #text then return false end
  end
  return true
end

-- The two checks for one expression (its label names it in messages).
function M.checks(label, guards)
  local where = label and (label .. ": ") or ""
  local type = type
  local function truth(v, i)
    if type(v) == "number" then
      local g = guards[i]
      local fix = g.fix or string.format(g.where == "after 'not'" and "%s == 0" or "%s ~= 0",
                                         grouped(g.text) and g.text or "(" .. g.text .. ")")
      error(string.format("%s'%s' is a number (%s) used as a condition (%s); in kopt's expressions 0 counts as " ..
                          "true, unlike Python: write '%s'", where, g.text, tostring(v), g.where, fix), 0)
    end
    return v
  end
  local function equal(a, b, i)
    local g = guards[i]
    local condition, number = a, b
    if type(b) == "boolean" then condition, number = b, a end
    if type(condition) == "boolean" and type(number) == "number" then
      error(string.format("%s'%s' compares %s with the number %s, which kopt's expressions never find equal " ..
                          "(Python reads True as 1): compare numbers, or use the condition itself", where, g.text,
                          tostring(condition), tostring(number)), 0)
    end
    if g.op == "==" then return a == b end
    return a ~= b
  end
  return truth, equal
end

return M
