-- Loading a strategy: a path to a Lua file, or a built-in name. The file's own
-- directory goes on package.path so it can require its siblings. The returned
-- table is checked, and --opt values are converted by the type of each
-- option's default.
local errors = require("kopt.errors")
local sys = require("kopt.sys")

local M = {}

-- The names of the built-in strategies (strategies/*.lua inside kopt), sorted.
function M.builtins()
  local names = {}
  for _, p in ipairs(package.builtin.list("strategies/")) do
    local n = p:match("^strategies/([%w_]+)%.lua$")
    if n then names[#names + 1] = n end
  end
  table.sort(names)
  return names
end

function M.is_path(arg) return arg:find("/", 1, true) ~= nil or arg:match("%.lua$") ~= nil end

-- os.execute through popen: C's system() ignores SIGINT in kopt while the
-- command runs, so a Ctrl-C during it was lost; popen leaves kopt's handler
-- in place (the command's output still goes to the terminal). Same returns.
local function execute(cmd)
  if cmd == nil then return true end
  local p = io.popen(cmd, "w")
  if not p then return nil, "exit", 127 end
  return p:close()
end

-- A strategy's globals live in an environment of its own: a global it sets
-- by mistake (`type = ...` with `local` forgotten) cannot replace kopt's,
-- and os.exit ends the strategy with an error instead of ending kopt
-- without its summary and results. Its sibling modules (require "util"
-- for dir/util.lua) load into the same environment, so they cannot either.
-- (what: "strategy", or "move generator" for kopt.moves' user files)
local function strategy_env(label, dir, what)
  local stop = what and "return from the generator" or "return from ask()"
  local os_env = setmetatable({
    exit = function()
      error(string.format("%s %s called os.exit: %s (or raise an error) to stop", what or "strategy", label, stop), 2)
    end,
    execute = execute,
  }, { __index = os })
  local env = setmetatable({ os = os_env }, { __index = _G })
  local loaded = {}
  env.require = function(name)
    if loaded[name] ~= nil then return loaded[name] end
    local path = dir and type(name) == "string" and (dir .. "/" .. name:gsub("%.", "/") .. ".lua")
    local f = path and io.open(path, "r")
    if not f then
      if name == "os" then return os_env end
      local ok, v = pcall(require, name)
      if ok then return v end
      if tostring(v):find("module '" .. tostring(name) .. "' not found", 1, true) then
        -- (Lua's own message lists every path it tried, from kopt's require)
        error(string.format("module '%s' not found: no %s beside the strategy, and no such module in kopt or Lua",
                            tostring(name), path or "file"), 2)
      end
      error(v, 0)
    end
    f:close()
    local chunk, err = loadfile(path, "t", env)
    if not chunk then error(err, 2) end
    local v = chunk(name, path)
    if v == nil then v = true end
    loaded[name] = v
    return v
  end
  return env
end

-- The same sandbox for a user's move generator file (kopt.moves).
function M.env(label, dir, what) return strategy_env(label, dir, what) end

-- The digest of the Lua library kopt runs strategies on (the built-in
-- modules, or those of --lua-dev): computed once, about 10 ms.
local library_digest
local function library()
  if not library_digest then
    local names = package.builtin.list()
    table.sort(names)
    local parts = {}
    for _, n in ipairs(names) do parts[#parts + 1] = n .. "\0" .. (package.builtin.read(n) or "") end
    library_digest = sys.sha256(table.concat(parts, "\0"))
  end
  return library_digest
end

-- What identifies a strategy's code for the experience database: its file's
-- text and the library's. Two files with the same name, an edited file, or
-- a --lua-dev tree are other strategies, whose runs answer nothing of each
-- other's. (Modules a user's file requires from its own folder are not read.)
function M.code_digest(text) return sys.sha256(text .. "\0" .. library()):sub(1, 16) end

-- The files an options table names (an option's value, or a part of a
-- comma-separated one, that is a readable file: a move generator, an expert,
-- a tools or priors file), as one digest of their names and contents; nil
-- when none. An edited generator makes another question for the experience
-- database, as an edited strategy file does.
function M.files_digest(options)
  local names = {}
  for k in pairs(options or {}) do names[#names + 1] = k end
  table.sort(names)
  local parts = {}
  for _, k in ipairs(names) do
    local v = options[k]
    if type(v) == "string" then
      for part in v:gmatch("[^,]+") do
        local path = part:match("^%s*(.-)%s*$")
        if path ~= "" and sys.stat(path) == "file" then
          local f = io.open(path, "rb")
          local text = f and f:read("a")
          if f then f:close() end
          if text then parts[#parts + 1] = k .. "\0" .. path .. "\0" .. sys.sha256(text) end
        end
      end
    end
  end
  if #parts == 0 then return nil end
  return sys.sha256(table.concat(parts, "\0")):sub(1, 16)
end

function M.load(arg)
  -- (a new run's strategy: the move generator files its last run loaded
  -- are loaded again, their state afresh)
  local moves = package.loaded["kopt.moves"]
  if moves then moves.forget_files() end
  local chunk, err, label, text
  if M.is_path(arg) then
    local f = io.open(arg, "r")
    if not f then errors.usage("strategy file '%s' not found", arg) end
    text = f:read("a") or ""
    f:close()
    local dir = arg:match("^(.*)/[^/]*$") or "."
    chunk, err = loadfile(arg, "t", strategy_env(arg, dir))
    if not chunk then errors.usage("strategy %s", err) end
    package.path = dir .. "/?.lua;" .. package.path
    label = arg
  else
    if not arg:match("^[%w_]+$") or not package.builtin.read("strategies/" .. arg .. ".lua") then
      errors.usage("unknown strategy '%s': not a file, and not a built-in strategy (%s)", arg,
                   table.concat(M.builtins(), ", "))
    end
    text = package.builtin.read("strategies/" .. arg .. ".lua")
    chunk, err = load(text, "@strategies/" .. arg .. ".lua", "t", strategy_env(arg, nil))
    if not chunk then errors.usage("built-in strategy %s", err) end
    label = arg
  end
  -- (the file's top-level code is the strategy's as init is: a signal
  -- interrupts a loop there; its error names the file and line, a sibling
  -- module's too)
  sys.in_strategy(true)
  local ok, s = xpcall(chunk, function(e)
    if errors.is_user_error(e) or errors.is_interrupt(e) then return e end
    return errors.with_user_line(e)
  end)
  sys.in_strategy(false)
  -- (a file that cannot be loaded, whatever the reason, is bad input: exit 2;
  -- an error raised while it runs, in init, ask or tell, exits 1)
  if not ok then
    if errors.is_user_error(s) or errors.is_interrupt(s) then error(s, 0) end
    errors.usage("strategy %s failed to load: %s", label, (tostring(s):match("^[^\n]*")))
  end
  if type(s) ~= "table" then errors.usage("strategy %s must return a table, got %s", label, type(s)) end
  if type(s.ask) ~= "function" then errors.usage("strategy %s has no ask(ctx, n) function", label) end
  for _, f in ipairs({ "init", "tell", "finish" }) do
    if s[f] ~= nil and type(s[f]) ~= "function" then errors.usage("strategy %s: '%s' must be a function", label, f) end
  end
  s.options = s.options or {}
  if type(s.options) ~= "table" then errors.usage("strategy %s: 'options' must be a table", label) end
  for k, o in pairs(s.options) do
    if type(k) ~= "string" then
      errors.usage("strategy %s: 'options' must be keyed by the options' names ({ name = { default = ... } }), " ..
                   "not a list", label)
    end
    if type(o) ~= "table" or o.default == nil then
      errors.usage("strategy %s: options.%s must be a table with a default", label, tostring(k))
    end
    if not k:match("^[%w_%-]+$") then
      errors.usage("strategy %s: options: '%s' cannot be set with --opt (a name of letters, digits, _ and -)", label, k)
    end
    for _, bound in ipairs({ "min", "max", "gt" }) do
      if o[bound] ~= nil and (type(o[bound]) ~= "number" or o[bound] ~= o[bound]) then
        errors.usage("strategy %s: options.%s.%s must be a number, got %s", label, tostring(k), bound,
                     type(o[bound]) == "number" and "NaN" or type(o[bound]))
      end
    end
    local t = type(o.default)
    if t ~= "number" and t ~= "string" and t ~= "boolean" then
      errors.usage("strategy %s: options.%s: the default must be a number, a string or a boolean, got %s", label,
                   tostring(k), t)
    end
    -- (--opt refuses NaN and infinities: a default it could not be set back to)
    if t == "number" and (o.default ~= o.default or o.default == math.huge or o.default == -math.huge) then
      errors.usage("strategy %s: options.%s: the default %s is not a finite number", label, tostring(k),
                   tostring(o.default))
    end
    if t ~= "number" and (o.min or o.max or o.gt) then
      errors.usage("strategy %s: options.%s: min, max and gt bound a number, and the default is a %s", label,
                   tostring(k), t)
    end
    if t == "number" and ((o.min and o.default < o.min) or (o.max and o.default > o.max) or (o.gt and o.default <= o.gt)) then
      local range = {}
      if o.min then range[#range + 1] = "min " .. tostring(o.min) end
      if o.gt then range[#range + 1] = "gt " .. tostring(o.gt) end
      if o.max then range[#range + 1] = "max " .. tostring(o.max) end
      errors.usage("strategy %s: options.%s: the default %s is outside the option's own range (%s)", label, tostring(k),
                   tostring(o.default), table.concat(range, ", "))
    end
    if o.choices ~= nil then
      local found = false
      if type(o.choices) ~= "table" or #o.choices == 0 then
        errors.usage("strategy %s: options.%s.choices must be a non-empty list", label, tostring(k))
      end
      for _, c in ipairs(o.choices) do
        -- (--opt converts a value to the default's type: a choice of another
        -- type could never be given)
        if type(c) ~= t then
          errors.usage("strategy %s: options.%s.choices: %s is a %s, and the default is a %s", label, tostring(k),
                       tostring(c), type(c), t)
        end
        found = found or c == o.default
      end
      if not found then
        errors.usage("strategy %s: options.%s: the default %s is not one of its choices", label, tostring(k),
                     tostring(o.default))
      end
    end
  end
  if s.name ~= nil and (type(s.name) ~= "string" or s.name == "") then
    errors.usage("strategy %s: 'name' must be a non-empty string, got %s", label, type(s.name))
  end
  if s.plans_with_budget ~= nil and type(s.plans_with_budget) ~= "boolean" then
    errors.usage("strategy %s: 'plans_with_budget' must be true or false, got %s", label, type(s.plans_with_budget))
  end
  local db = s.default_budget
  if db ~= nil and db ~= math.huge and (math.type(db) ~= "integer" or db < 1) then
    errors.usage("strategy %s: 'default_budget' must be a positive integer (evaluations) or math.huge (none), got %s", label,
                 type(db) == "number" and tostring(db) or type(db))
  end
  s.name = s.name or (label:match("([%w_]+)%.lua$") or label)
  return s, label, M.code_digest(text)
end

local function convert(name, o, text)
  local d = o.default
  if type(d) == "number" then
    local v = tonumber(text)
    local what = math.type(d) == "integer" and "an integer" or "a number"
    if v == nil then errors.usage("--opt %s: expected %s, got '%s'", name, what, text) end
    if v ~= v or v == math.huge or v == -math.huge then
      errors.usage("--opt %s: expected a finite number, got '%s'", name, text)
    end
    if math.type(d) == "integer" then
      v = math.tointeger(v)
      if v == nil then errors.usage("--opt %s: expected an integer, got '%s'", name, text) end
    else
      v = v + 0.0  -- (a number option whose default is a float stays a float: --opt t=1 is 1.0)
    end
    -- (an option may declare its range: min, max inclusive, gt exclusive)
    if (o.min and v < o.min) or (o.max and v > o.max) or (o.gt and v <= o.gt) then
      local low = o.gt and string.format("above %s", tostring(o.gt)) or o.min and string.format("at least %s", tostring(o.min))
      local range = low
      if o.max then
        range = o.min and string.format("from %s to %s", tostring(o.min), tostring(o.max))
          or low and string.format("%s and at most %s", low, tostring(o.max))
          or string.format("at most %s", tostring(o.max))
      end
      errors.usage("--opt %s: expected %s %s, got '%s'", name, what, range, text)
    end
    if o.choices then
      local shown = {}
      for i, c in ipairs(o.choices) do
        if c == v then return v end
        shown[i] = tostring(c)
      end
      errors.usage("--opt %s: expected one of %s, got '%s'", name, table.concat(shown, ", "), text)
    end
    return v
  elseif type(d) == "boolean" then
    if text == "true" or text == "1" or text == "yes" then return true end
    if text == "false" or text == "0" or text == "no" then return false end
    errors.usage("--opt %s: expected true or false, got '%s'", name, text)
  end
  if o.choices then
    for _, c in ipairs(o.choices) do if c == text then return text end end
    errors.usage("--opt %s: expected one of %s, got '%s'", name, table.concat(o.choices, ", "), text)
  end
  return text
end

-- pairs: { {key, text}, ... } from --opt. Returns the full option table.
function M.options(s, pairs_list)
  local out = {}
  for k, o in pairs(s.options) do out[k] = o.default end
  for _, kv in ipairs(pairs_list or {}) do
    local o = s.options[kv[1]]
    if not o then
      local names = {}
      for k in pairs(s.options) do names[#names + 1] = k end
      table.sort(names)
      errors.usage("strategy '%s' has no option '%s' (%s)", s.name, kv[1],
                   #names > 0 and "options: " .. table.concat(names, ", ") or "it takes no options")
    end
    out[kv[1]] = convert(kv[1], o, kv[2])
  end
  return out
end

function M.help(s)
  local lines = { string.format("strategy %s%s", s.name, s.description and (": " .. s.description) or "") }
  local names = {}
  for k in pairs(s.options) do names[#names + 1] = k end
  table.sort(names)
  if #names == 0 then
    lines[#lines + 1] = "no options"
  else
    lines[#lines + 1] = "options (--opt key=value):"
    for _, k in ipairs(names) do
      local o = s.options[k]
      -- (the range and the choices the option takes, as --opt checks them)
      local limits = {}
      if o.gt then limits[#limits + 1] = "> " .. tostring(o.gt) end
      if o.min then limits[#limits + 1] = ">= " .. tostring(o.min) end
      if o.max then limits[#limits + 1] = "<= " .. tostring(o.max) end
      if type(o.choices) == "table" then
        local cs = {}
        for i, c in ipairs(o.choices) do cs[i] = tostring(c) end
        limits[#limits + 1] = "one of " .. table.concat(cs, ", ")
      end
      lines[#lines + 1] = string.format("  %-18s %-10s %s%s", k, tostring(o.default), o.help or "",
                                        #limits > 0 and (" [" .. table.concat(limits, ", ") .. "]") or "")
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

return M
