-- Host copies of array data: inputs read from .npy and raw files or made by a
-- spec's Lua generator, and the raw files the GPU worker dumps for a spec's
-- own check. The worker reads input files itself (raw little-endian bytes at
-- an offset), so a .npy file travels as its path and the offset of its data;
-- a generator's array is written once to a content-addressed file.
local rng_mod = require("kopt.rng")
local sys = require("kopt.sys")

local M = {}

-- NumPy's dtype strings for kopt's types ("<f4", "|u1"); byte order '<' or
-- '|' (one byte) or '=' on this little-endian host.
local NPY = { f4 = "f32", f2 = "f16", f8 = "f64", i4 = "i32", i8 = "i64", u4 = "u32", i1 = "i8", u1 = "u8",
              i2 = "i16", u2 = "u16", u8 = "u64" }
M.npy_types = NPY

-- the largest finite value of each narrow float type
local FLOAT_MAX = { f16 = 65504, bf16 = 3.3895313892515355e38, f32 = 3.4028234663852886e38 }
local SIZE = { f32 = 4, f16 = 2, bf16 = 2, f64 = 8, i32 = 4, i64 = 8, u32 = 4, i8 = 1, u8 = 1, i16 = 2, u16 = 2, u64 = 8 }
-- (u64: Lua's integers are signed 64-bit, so values of 2^63 and above read as negative)
local FMT = { f32 = "<f", f64 = "<d", i32 = "<i4", i64 = "<i8", u32 = "<I4", i8 = "<i1", u8 = "<I1",
              i16 = "<i2", u16 = "<I2", u64 = "<i8" }

-- The header of a .npy file: { dtype = kopt type or nil, descr =, shape = {..},
-- fortran = bool, offset = bytes before the data, size = file bytes }, or
-- nil and why (one clause, for a message that names the field).
function M.npy_header(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, "cannot read '" .. path .. "': " .. tostring(err):gsub("^[^:]*: ", "") end
  local head = f:read(10) or ""
  local size = f:seek("end")
  if head:sub(1, 6) ~= "\147NUMPY" or #head < 10 then
    f:close()
    return nil, "'" .. path .. "' is not a .npy file (no \\x93NUMPY magic)"
  end
  local major = head:byte(7)
  local hlen, start
  if major == 1 then
    hlen, start = string.unpack("<I2", head, 9), 10
  else
    f:seek("set", 8)
    local b = f:read(4) or ""
    if #b < 4 then f:close() return nil, "'" .. path .. "': truncated .npy header" end
    hlen, start = string.unpack("<I4", b), 12
  end
  f:seek("set", start)
  local dict = f:read(hlen) or ""
  f:close()
  if #dict < hlen then return nil, "'" .. path .. "': truncated .npy header" end
  local descr = dict:match("'descr'%s*:%s*'([^']*)'")
  local fortran = dict:match("'fortran_order'%s*:%s*(%a+)")
  local shape_text = dict:match("'shape'%s*:%s*%(([^)]*)%)")
  if not descr or not fortran or not shape_text then
    return nil, "'" .. path .. "': cannot read the .npy header " .. dict:gsub("%s+$", "")
  end
  local shape = {}
  for d in shape_text:gmatch("%d+") do shape[#shape + 1] = math.tointeger(tonumber(d)) end
  local order, code = descr:match("^([<>|=])(%a%d+)$")
  local dtype = (order == "<" or order == "|" or order == "=") and NPY[code] or nil
  return { dtype = dtype, descr = descr, shape = shape, fortran = fortran == "True",
           offset = start + hlen, size = size }
end

local function shape_text(shape)
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = tostring(d) end
  return "(" .. table.concat(parts, ", ") .. (#shape == 1 and ",)" or ")")
end
M.shape_text = shape_text

-- Checks a file's data against an argument of `count` elements of `shape`
-- (the values at one config): nil, or why not (a clause).
function M.check_file(init, arg_type, shape, count)
  if init.npy then
    local h = init.npy
    local n = 1
    for _, d in ipairs(h.shape) do n = n * d end
    local same = n == count and (#h.shape ~= #shape or (function()
      for i = 1, #shape do if h.shape[i] ~= shape[i] then return false end end
      return true
    end)())
    if not same then
      return string.format("'%s' holds an array of shape %s, the argument's shape is %s", init.path,
                           shape_text(h.shape), shape_text(shape))
    end
    if h.offset + n * SIZE[arg_type] > h.size then
      return string.format("'%s' is shorter than its header says", init.path)
    end
    return nil
  end
  local want = count * SIZE[arg_type]
  local _, have = sys.stat(init.path)
  if have and have - init.offset ~= want then
    return string.format("'%s' holds %d bytes after offset %d, the argument needs %d (%d x %s)",
                         init.path, have - init.offset, init.offset, want, count, arg_type)
  end
  return nil
end

-- IEEE half from a double, round to nearest even.
local function f16_bits(v)
  if v ~= v then return 0x7e00 end
  local sign = 0
  if v < 0 or (v == 0 and 1 / v < 0) then sign, v = 0x8000, -v end
  if v == math.huge then return sign | 0x7c00 end
  if v >= 65520 then return sign | 0x7c00 end
  if v < 2 ^ -24 * 0.5 then return sign end
  local e = math.floor(math.log(v, 2)) -- v = 1.f * 2^e
  if 2.0 ^ e > v then e = e - 1 elseif 2.0 ^ (e + 1) <= v then e = e + 1 end
  if e < -14 then -- subnormal: units of 2^-24
    local q = v / 2 ^ -24
    local r = math.floor(q + 0.5)
    if r - q == 0.5 and r % 2 == 1 then r = r - 1 end
    return sign | math.tointeger(r)
  end
  local frac = (v / 2.0 ^ e - 1) * 1024
  local r = math.floor(frac + 0.5)
  if r - frac == 0.5 and r % 2 == 1 then r = r - 1 end
  if r == 1024 then r, e = 0, e + 1 end
  if e > 15 then return sign | 0x7c00 end
  return sign | ((e + 15) << 10) | math.tointeger(r)
end

local function f16_value(h)
  local sign = (h & 0x8000) ~= 0 and -1 or 1
  local e, f = (h >> 10) & 0x1f, h & 0x3ff
  if e == 0 then return sign * f * 2 ^ -24 end
  if e == 31 then return f == 0 and sign * math.huge or 0 / 0 end
  return sign * (1 + f / 1024) * 2 ^ (e - 15)
end

local function bf16_bits(v)
  local u = string.unpack("<I4", string.pack("<f", v))
  if v ~= v then return 0x7fc0 end
  local lsb = (u >> 16) & 1
  return ((u + 0x7fff + lsb) >> 16) & 0xffff
end

local function bf16_value(h) return (string.unpack("<f", string.pack("<I4", h << 16))) end

-- Whether finite v becomes an infinity as a `dtype` (f32, f16, bf16):
-- rounded, not compared with the largest finite value (f16's 65510 is
-- 65504, and only 65520 or more is an infinity).
function M.overflows(v, dtype)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return false end
  if dtype == "f16" then return f16_bits(v) & 0x7fff == 0x7c00 end
  if dtype == "bf16" then return bf16_bits(v) & 0x7fff == 0x7f80 end
  if dtype == "f32" then
    local f = string.unpack("<f", string.pack("<f", v))
    return f == math.huge or f == -math.huge
  end
  return false
end

-- Raw little-endian bytes of a Lua array of numbers as `dtype`.
function M.pack(values, dtype)
  local parts, fmt = {}, FMT[dtype]
  for i = 1, #values do
    local v = values[i]
    if fmt then
      if dtype:sub(1, 1) ~= "f" then v = math.tointeger(v) or math.floor(v + 0.5) end
      parts[i] = string.pack(fmt, v)
    else
      parts[i] = string.pack("<I2", dtype == "f16" and f16_bits(v) or bf16_bits(v))
    end
  end
  return table.concat(parts)
end

-- A Lua array of numbers from raw little-endian bytes of `dtype`.
function M.unpack(bytes, dtype)
  local out, fmt, size = {}, FMT[dtype], SIZE[dtype]
  local n = #bytes // size
  for i = 1, n do
    if fmt then
      out[i] = string.unpack(fmt, bytes, (i - 1) * size + 1)
    else
      local h = string.unpack("<I2", bytes, (i - 1) * size + 1)
      out[i] = dtype == "f16" and f16_value(h) or bf16_value(h)
    end
  end
  return out
end

-- The environment of spec-supplied Lua (generators, checks): arithmetic,
-- strings and tables, no io, os, require or load; runs are reproducible.
-- (copies of the libraries: a spec that sets string.format must not change
-- kopt's own; no getmetatable, through which it could reach them)
local function copy(lib)
  local out = {}
  for k, v in pairs(lib) do out[k] = v end
  return out
end

function M.sandbox()
  return { math = copy(math), string = copy(string), table = copy(table), ipairs = ipairs, pairs = pairs,
           tostring = tostring, tonumber = tonumber, type = type, select = select,
           error = error, assert = assert, pcall = pcall, next = next, print = print }
end

-- Compiles spec Lua that returns a function: the function, or nil and why.
function M.load_function(text, chunkname)
  local chunk, err = load(text, "=" .. chunkname, "t", M.sandbox())
  -- (the parser's "C stack overflow" can arrive as the message handler's table)
  if not chunk then return nil, type(err) == "string" and err or "the code is nested too deeply for Lua's parser" end
  local ok, fn = pcall(chunk)
  if not ok then return nil, tostring(fn) end
  if type(fn) ~= "function" then return nil, "the code must return a function, it returned " .. type(fn) end
  return fn
end

-- Where generated arrays are written: $KOPT_DATA_DIR, else beside the CUBIN
-- cache (<cache>/../data), else $TMPDIR/kopt-data.
function M.data_dir(cache_dir)
  local dir = os.getenv("KOPT_DATA_DIR")
  if not dir or dir == "" then
    dir = cache_dir and (cache_dir:gsub("/[^/]*$", "") .. "/data")
      or ((os.getenv("TMPDIR") or "/tmp") .. "/kopt-data")
  end
  sys.mkdir_p(dir)
  return dir
end

-- Runs a generator for one argument: returns the raw bytes, or nil and why.
-- ctx: n, shape, sizes (problem sizes and knob values), inputs (arrays of
-- the arguments generated before this one, by name), rng (seeded).
-- The generator's rng: uniform(), normal() and random(m, n), called with a
-- dot or a colon alike (ctx.rng.uniform() is how the docs list them).
local function generator_rng(seed)
  local r = rng_mod.new(seed)
  local g = {}
  local function method(name)
    return function(first, ...)
      if first == g then return r[name](r, ...) end
      return r[name](r, first, ...)
    end
  end
  -- (every other method of kopt.rng too: shuffle, choice, permutation, ...)
  return setmetatable(g, { __index = function(_, name)
    if type(r[name]) ~= "function" then return nil end
    local f = method(name)
    g[name] = f
    return f
  end })
end

-- A generator's time limit: one that never returns (a loop whose test
-- never fails) stops with a message naming it, not a silent hang.
M.GENERATOR_LIMIT_S = 300

local function run_limited(fn, ctx)
  -- (only where no other hook runs: kopt's signal hook keeps its place)
  if debug.gethook() ~= nil then return pcall(fn, ctx) end
  local t0 = sys.now()
  debug.sethook(function()
    if sys.now() - t0 > M.GENERATOR_LIMIT_S then
      debug.sethook()
      error(string.format("the generator ran past %g s (a loop that never ends?)", M.GENERATOR_LIMIT_S), 0)
    end
  end, "", 1000000)
  local ok, out = pcall(fn, ctx)
  debug.sethook()
  return ok, out
end

-- seed (nil: the spec's init.seed) gives another draw of the same generator.
function M.generate(init, arg, sizes, inputs, seed)
  local ctx = { n = arg.count, shape = arg.shape, sizes = sizes, inputs = inputs,
                rng = generator_rng(seed or init.seed or 1), type = arg.type }
  local ok, out = run_limited(init.fn, ctx)
  if not ok then return nil, tostring(out) end
  local bytes
  if type(out) == "string" then
    bytes = out
  elseif type(out) == "table" then
    if #out ~= arg.count then
      return nil, string.format("the generator returned %d values, the argument has %d elements", #out, arg.count)
    end
    local int_type, fmax = arg.type:sub(1, 1) ~= "f" and arg.type ~= "bf16", FLOAT_MAX[arg.type]
    for i = 1, #out do
      local v = out[i]
      if type(v) ~= "number" then
        return nil, string.format("the generator's value %d is %s, not a number", i, type(v))
      end
      -- (the bytes would round 2.4 to 2, or make 1e39 an infinity, while a
      -- later generator reads ctx.inputs as the values given)
      if int_type and v == v and math.tointeger(v) == nil and v > -math.huge and v < math.huge then
        return nil, string.format("the generator's value %d (%s) is not an integer, and the argument is %s", i,
                                  tostring(v), arg.type)
      end
      if fmax and M.overflows(v, arg.type) then
        return nil, string.format("the generator's value %d (%s) is past the largest finite %s (%g): it would be " ..
                                  "infinity", i, tostring(v), arg.type, fmax)
      end
    end
    local packed, perr = pcall(M.pack, out, arg.type)
    if not packed then
      -- (the first value the type cannot hold: 256 for a u8, NaN or inf
      -- for an integer type)
      for i = 1, #out do
        if not pcall(M.pack, { out[i] }, arg.type) then
          return nil, string.format("the generator's value %d (%s) does not fit %s", i, tostring(out[i]), arg.type)
        end
      end
      return nil, "the generator's values cannot be written as " .. arg.type .. ": " .. tostring(perr)
    end
    bytes = perr
  else
    return nil, "the generator returned " .. type(out) .. ", expected an array of numbers or a string of bytes"
  end
  if #bytes ~= arg.count * SIZE[arg.type] then
    return nil, string.format("the generator returned %d bytes, the argument needs %d", #bytes, arg.count * SIZE[arg.type])
  end
  -- (the values as the kernel reads them, for later generators: 2.4 as
  -- the f32 it became)
  if type(out) == "table" and (arg.type == "f32" or arg.type == "f16" or arg.type == "bf16") then
    out = M.unpack(bytes, arg.type)
  end
  return bytes, nil, type(out) == "table" and out or nil
end

-- Writes bytes to a content-addressed file in dir (once); returns its path,
-- or nil and why. The name says the content, so a file there is trusted as
-- is: it is only ever written whole (sys.write_atomic), never cut short by a
-- full disk.
function M.store(dir, bytes)
  local path = dir .. "/" .. sys.sha256(bytes) .. ".bin"
  if not sys.stat(path) then
    local ok, err = sys.write_atomic(path, bytes)
    if not ok then return nil, "cannot write the generated data to '" .. path .. "': " .. tostring(err) end
  end
  return path
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Reads what the worker dumped for one check (tag "c1" or "c2") and removes
-- the files: outputs, refs and inputs as name -> array of numbers (none
-- with only_remove).
function M.read_dump(dir, tag, args, only_remove)
  local out, ref, inp = {}, {}, {}
  for _, a in ipairs(args) do
    if a.kind ~= "scalar" then
      local base = string.format("%s/%s.%s.", dir, tag, a.name)
      for ext, into in pairs(a.output and { out = out, ref = ref } or { ["in"] = inp }) do
        local bytes = not only_remove and slurp(base .. ext)
        os.remove(base .. ext)
        if bytes then
          into[a.name] = M.unpack(bytes, a.type)
        end
      end
    end
  end
  return out, ref, inp
end

return M
