-- Known-good kernels for synthesis without an LLM: the templates of
-- kernels/templates/*.cu (embedded in kopt), chosen by the problem's shape.
--
-- A template is CUDA source whose first line is `// kopt-template {JSON}`:
-- name, shape (coarsen | row_reduce | row_map | matmul), ops (variants, each
-- a value of the KOPT_OP define), knobs, constraints and launch, in the reply
-- format of kopt.synth. Its body uses placeholders filled here from the spec:
--   KOPT_ENTRY, KOPT_PARAMS (the spec's parameter list), KOPT_ARGS (the
--   parameter names), KOPT_REFERENCE_BODY (coarsen: the reference's kernel as
--   a device function of its virtual thread and block index);
-- and defines: KOPT_OUT, KOPT_IN0, KOPT_IN1 (the arguments in their roles),
-- sizes KOPT_ROWS, KOPT_COLS, KOPT_M, KOPT_N, KOPT_K, KOPT_VTHREADS,
-- KOPT_VBLOCK, KOPT_VGRID (also readable by the launch expressions).
--
-- Which template applies is read from the spec (one output, fp32 arrays,
-- their shapes) and from the reference's text (exp: softmax; fmaxf: max);
-- when that guess is wrong the verifier says so and the next one is tried.
local json = require("kopt.json")
local synth = require("kopt.synth")

local M = {}

M.DIR = "kernels/templates/"

local function read(path)
  local b = package.builtin
  if b and b.read then
    local text = b.read(path)
    if text then return text end
  end
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return text
end

local function list()
  local b = package.builtin
  local out = {}
  if b and b.list then
    for _, p in ipairs(b.list(M.DIR)) do
      if p:match("%.cu$") then out[#out + 1] = p end
    end
  end
  table.sort(out)
  return out
end

-- Every template: { meta = <header JSON>, body = <source after it>, path = }.
function M.all()
  local out = {}
  for _, path in ipairs(list()) do
    local text = read(path)
    local head, body = (text or ""):match("^//%s*kopt%-template%s*(%b{})[^\n]*\n(.*)$")
    local meta = head and json.decode(head)
    if type(meta) == "table" then out[#out + 1] = { meta = meta, body = body, path = path } end
  end
  return out
end

---------------------------------------------------------------------------
-- The problem's shape

local function product(t, from, to)
  local p = 1
  for i = from or 1, to or #t do p = p * t[i] end
  return p
end

-- { outs = {args}, ins = {args}, all_f32 = bool, constants = n }
local function roles(spec)
  local r = { outs = {}, ins = {}, all_f32 = true, constants = 0 }
  for _, a in ipairs(synth.args(spec)) do
    if a.kind == "constant" then
      r.constants = r.constants + 1
    elseif a.kind == "array" then
      if a.type ~= "f32" then r.all_f32 = false end
      if a.output then r.outs[#r.outs + 1] = a else r.ins[#r.ins + 1] = a end
    end
  end
  return r
end

-- The reference's kernel: start of its declaration, the parameters' closing
-- parenthesis and the body's braces (positions in source), or nil.
local function find_kernel(source, entry)
  local s, e = source:find("__global__[^;{]-%f[%w_]" .. entry:gsub("%p", "%%%0") .. "%s*%(")
  if not s then return nil end
  local ext = source:sub(1, s - 1):find('extern%s+"C"%s*$')
  local depth, i = 1, e + 1
  while i <= #source and depth > 0 do
    local ch = source:sub(i, i)
    if ch == "(" then depth = depth + 1 elseif ch == ")" then depth = depth - 1 end
    i = i + 1
  end
  local close = i - 1
  local open = source:find("{", close, true)
  if not open then return nil end
  depth, i = 1, open + 1
  while i <= #source and depth > 0 do
    local ch = source:sub(i, i)
    if ch == "{" then depth = depth + 1 elseif ch == "}" then depth = depth - 1 end
    i = i + 1
  end
  if depth ~= 0 then return nil end
  return { start = ext or s, paren = e, close = close, open = open, stop = i - 1 }
end

-- The reference's kernel as `kopt_reference_body(params, kopt_tx, kopt_bx)`,
-- a device function of its virtual thread and block index; nil, why when the
-- reference is not a plain 1-D kernel.
local function reference_body(spec, launch)
  local src = spec.reference.source
  for _, bad in ipairs({ "__shared__", "__syncthreads", "__shfl", "__syncwarp", "cooperative_groups", "__ballot" }) do
    if src:find(bad, 1, true) then return nil, "the reference uses " .. bad end
  end
  if launch.grid[2] * launch.grid[3] * launch.block[2] * launch.block[3] ~= 1 then
    return nil, "the reference's launch is not 1-D"
  end
  local k = find_kernel(src, spec.reference.entry)
  if not k then return nil, "the reference's kernel was not found in its source" end
  local body = src:sub(k.open, k.stop)
  local subs = { { "threadIdx%.x", "kopt_tx" }, { "blockIdx%.x", "kopt_bx" }, { "blockDim%.x", "KOPT_VBLOCK" },
                 { "gridDim%.x", "KOPT_VGRID" }, { "threadIdx%.[yz]", "0u" }, { "blockIdx%.[yz]", "0u" },
                 { "blockDim%.[yz]", "1u" }, { "gridDim%.[yz]", "1u" } }
  for _, s in ipairs(subs) do body = body:gsub("%f[%w_]" .. s[1], s[2]) end
  if body:find("threadIdx", 1, true) or body:find("blockIdx", 1, true) then
    return nil, "the reference reads its thread index as a whole"
  end
  return src:sub(1, k.start - 1) .. "static __device__ __forceinline__ void kopt_reference_body(" ..
    src:sub(k.paren + 1, k.close - 1) .. ", unsigned kopt_tx, unsigned kopt_bx)\n" .. body .. src:sub(k.stop + 1)
end

-- Ops a template offers, most likely first for this reference.
local function ordered_ops(t, ref)
  local ops = {}
  for _, o in ipairs(t.meta.ops or { "" }) do ops[#ops + 1] = o end
  local function first(name)
    for i, o in ipairs(ops) do
      if o == name then table.remove(ops, i) table.insert(ops, 1, o) return end
    end
  end
  if t.meta.shape == "row_reduce" then
    if ref:find("/", 1, true) then first("mean") end
    if ref:find("fmaxf", 1, true) or ref:find("%f[%w_]max%s*%(") then first("max") end
  elseif t.meta.shape == "row_map" then
    if ref:find("%f[%w_]logf?%s*%(") then first("log_softmax") end
  end
  return ops
end

-- The defines and launch-visible sizes of a template for this spec, or nil
-- when it does not apply.
local function bind(t, spec, r)
  local shape = t.meta.shape
  local defs, scope = {}, {}
  if shape == "coarsen" then
    if r.constants > 0 then return nil end
    local l = spec:reference_launch({})
    local body = reference_body(spec, l)
    if not body then return nil end
    scope.KOPT_VBLOCK, scope.KOPT_VGRID = l.block[1], l.grid[1]
    scope.KOPT_VTHREADS = l.block[1] * l.grid[1]
    return { defs = defs, scope = scope, reference_body = body }
  end
  if r.constants > 0 or not r.all_f32 or #r.outs ~= 1 then return nil end
  local out = r.outs[1]
  if shape == "row_reduce" or shape == "row_map" then
    if #r.ins ~= 1 or #r.ins[1].shape < 2 then return nil end
    local x = r.ins[1]
    local cols = x.shape[#x.shape]
    local rows = product(x.shape, 1, #x.shape - 1)
    if shape == "row_reduce" and out.count ~= rows then return nil end
    if shape == "row_map" and (out.count ~= x.count or not spec.reference.source:find("exp", 1, true)) then return nil end
    defs.KOPT_OUT, defs.KOPT_IN0 = out.name, x.name
    scope.KOPT_ROWS, scope.KOPT_COLS = rows, cols
    return { defs = defs, scope = scope }
  end
  if shape == "matmul" then
    if #r.ins ~= 2 or #out.shape ~= 2 then return nil end
    local m, n = out.shape[1], out.shape[2]
    local a, b = r.ins[1], r.ins[2]
    if #a.shape ~= 2 or #b.shape ~= 2 then return nil end
    if not (a.shape[1] == m and b.shape[2] == n and a.shape[2] == b.shape[1]) then
      a, b = b, a
      if not (a.shape[1] == m and b.shape[2] == n and a.shape[2] == b.shape[1]) then return nil end
    end
    defs.KOPT_OUT, defs.KOPT_IN0, defs.KOPT_IN1 = out.name, a.name, b.name
    scope.KOPT_M, scope.KOPT_N, scope.KOPT_K = m, n, a.shape[2]
    return { defs = defs, scope = scope }
  end
  return nil
end

-- The kernels the templates give for this spec, most likely first: a list
-- of K (kopt.synth's shape) with origin.template and origin.op.
function M.candidates(spec)
  local r = roles(spec)
  local names = {}
  for _, a in ipairs(synth.args(spec)) do if a.kind ~= "constant" then names[#names + 1] = a.name end end
  local out = {}
  local order = { row_map = 1, row_reduce = 2, matmul = 3, coarsen = 4 }
  local ts = M.all()
  table.sort(ts, function(x, y) return (order[x.meta.shape] or 9) < (order[y.meta.shape] or 9) end)
  for _, t in ipairs(ts) do
    local b = bind(t, spec, r)
    if b then
      for i, op in ipairs(ordered_ops(t, spec.reference.source)) do
        local entry = synth.entry_for(spec)
        local head = {}
        local dnames = {}
        for k in pairs(b.defs) do dnames[#dnames + 1] = k end
        table.sort(dnames)
        for _, k in ipairs(dnames) do head[#head + 1] = string.format("#define %s %s", k, b.defs[k]) end
        local snames = {}
        for k in pairs(b.scope) do snames[#snames + 1] = k end
        table.sort(snames)
        for _, k in ipairs(snames) do head[#head + 1] = string.format("#define %s %dLL", k, b.scope[k]) end
        if op ~= "" then
          local idx = 0
          for j, o in ipairs(t.meta.ops) do if o == op then idx = j - 1 end end
          head[#head + 1] = string.format("#define KOPT_OP %d", idx)
        end
        local body = t.body:gsub("KOPT_ENTRY", entry):gsub("KOPT_PARAMS", (synth.params(spec):gsub("%%", "%%%%")))
          :gsub("KOPT_ARGS", table.concat(names, ", "))
        if b.reference_body then body = body:gsub("KOPT_REFERENCE_BODY", (b.reference_body:gsub("%%", "%%%%"))) end
        local knobs = {}
        for j, k in ipairs(t.meta.knobs or {}) do knobs[j] = { name = k.name, values = k.values, default = k.default } end
        out[#out + 1] = {
          entry = entry, source = table.concat(head, "\n") .. "\n" .. body, knobs = knobs,
          constraints = t.meta.constraints or {}, scope = b.scope,
          launch = { grid = t.meta.launch.grid, block = t.meta.launch.block, smem = t.meta.launch.smem or 0 },
          origin = { expert = "template", method = t.meta.name .. (op ~= "" and (":" .. op) or ""),
                     template = t.meta.name, op = op ~= "" and op or nil },
          rank = i,
        }
      end
    end
  end
  return out
end

return M
