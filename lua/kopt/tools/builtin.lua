-- The built-in tools of LLM experts (kopt.tools): what the model may look
-- at before it proposes.
--
--   overview()               stages and hot regions of the current best's
--                            compiled PTX with their static work (kopt.ptx)
--   region(id)               one region: its work, its source lines, its PTX
--   source_for_ptx(lines)    the source line of each PTX line (.loc)
--   ptx_for_source(lines)    the PTX lines compiled from some source lines
--   metrics(config?)         counters and symptoms of a measured config,
--                            measured on demand when the backend can profile
--   history(n)               the last n measurements
--   compare(a, b)            two measured configs side by side
--
-- The PTX is the kernel compiled for one config by a separate NVRTC call to
-- the virtual architecture with -lineinfo (kopt.nvrtc.ptx, as `kopt ptx`
-- does), cached per source and config for the run (env.cache). A config
-- argument is an object of knob values (knobs left out keep the current
-- best's), a "K=V,K=V" string, or "best".
local compile = require("kopt.compile")
local json = require("kopt.json")
local kptx = require("kopt.ptx")
local nvrtc = require("kopt.nvrtc")
local ptx_cmd = require("kopt.commands.ptx")
local symptoms = require("kopt.symptoms")
local sys = require("kopt.sys")
local tools = require("kopt.tools")

local M = {}

M.UNKNOWN_TRIP = 16   -- the weight of a loop whose trip count is unknown, for "hot"
M.PTX_SHOWN = 80      -- PTX lines region() shows
M.SOURCE_SHOWN = 60   -- source lines region() shows
M.LINES_ASKED = 200   -- lines source_for_ptx / ptx_for_source answer at most

-- The environment of one question: the strategy's ctx and the state asked
-- about (config, key, result, source), the measurements so far (history:
-- {config=, result=, origin=}, oldest first; default: the engine's) and a
-- cache shared by the questions of a run.
function M.env(ctx, state, opts)
  opts = opts or {}
  local spec = ctx.spec
  return { ctx = ctx, spec = spec, space = ctx.space, config = state.config, key = state.key,
           result = state.result, source = opts.source or (spec and spec.kernel and spec.kernel.source),
           patch = state.patch, history = opts.history, cache = opts.cache or {},
           arch = spec and type(spec.device) == "table" and spec.device.arch or "sm_90" }
end

local function lines_of(text)
  local out = {}
  for l in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\r?\n") do out[#out + 1] = l end
  return out
end

-- PTX line -> source line of the kernel's main file, from the .loc
-- directives (an inlined call counts at the line that calls it).
local function loc_map(ptx_lines, main_name)
  local files, main = {}, nil
  for _, l in ipairs(ptx_lines) do
    local n, name = l:match("^%s*%.file%s+(%d+)%s+\"([^\"]*)\"")
    if n then
      files[tonumber(n)] = name
      if main_name and (name == main_name or name:sub(-#main_name - 1) == "/" .. main_name) then main = tonumber(n) end
    end
  end
  local map, cur = {}, nil
  for i, l in ipairs(ptx_lines) do
    local f, line = l:match("^%s*%.loc%s+(%d+)%s+(%d+)")
    if f then
      f, line = tonumber(f), tonumber(line)
      if main and f ~= main then
        local af, al = l:match("inlined_at%s+(%d+)%s+(%d+)")
        if af and tonumber(af) == main then line = tonumber(al) else line = nil end
      end
      cur = line
    elseif cur and l:match("^%s*[%a@]") and not l:match("^%s*%.") and not l:match("^%s*%$?[%w_]+:%s*$") then
      map[i] = cur
    end
  end
  return map, files
end

local function config_key(env, config, source)
  local parts = {}
  for i, k in ipairs(env.space.knobs) do parts[i] = k.name .. "=" .. tostring(config[k.name]) end
  return sys.sha256(source or ""):sub(1, 16) .. " " .. table.concat(parts, ",")
end

-- The PTX analysis of a config with the env's source (default: the state
-- asked about): { a, func, ptx, src, loc, config } or nil, why.
function M.analysis(env, config)
  config = config or env.config
  if not env.spec or not env.source then
    return nil, "this run has no kernel source (a recorded space): there is no PTX to analyse"
  end
  local key = config_key(env, config, env.source)
  local hit = env.cache[key]
  if hit then return hit.value, hit.why end
  local job = compile.job_for(env.spec, config, env.arch, env.source)
  -- (the second value: the entry's symbol, or the log when it did not compile)
  local text, lowered_or_log = nvrtc.ptx(job)
  local value, why
  if not text then
    why = "the kernel does not compile to PTX: " .. tostring(lowered_or_log):sub(1, 600)
  else
    local a, err = kptx.parse(text)
    if not a then
      why = "the PTX could not be analysed: " .. tostring(err)
    else
      local entry = lowered_or_log or env.spec.kernel.entry
      local func
      for _, f in ipairs(a.functions) do
        if f.name == entry then func = f end
        if not func and f.entry then func = f end
      end
      func = func or a.functions[1]
      local ptx_lines = lines_of(text)
      value = { a = a, func = func, ptx = ptx_lines, src = lines_of(env.source), config = config,
                loc = loc_map(ptx_lines, func and func.src_file), lines = a.lines }
    end
  end
  env.cache[key] = { value = value, why = why }
  return value, why
end

local function range_text(r)
  if not r then return "-" end
  return r[1] == r[2] and tostring(r[1]) or (r[1] .. "-" .. r[2])
end

local function region_label(r)
  if r.kind == "loop" then return string.format("loop (trip %s)", r.trip and tostring(r.trip) or "unknown") end
  return r.name or r.kind
end

-- Hot regions: a region's own instructions times the trip counts of the
-- loops around it and itself (an unknown count weighs UNKNOWN_TRIP).
local function hot(an)
  local a, out = an.a, {}
  for _, id in ipairs(an.func.regions) do
    local r = a.regions[id]
    if r.kind ~= "function" and r.work.insts > 0 then
      local w, p = r.work.insts, r
      while p do
        if p.kind == "loop" then w = w * (p.trip or M.UNKNOWN_TRIP) end
        p = p.parent and a.regions[p.parent]
      end
      out[#out + 1] = { id = id, w = w }
    end
  end
  table.sort(out, function(x, y) if x.w ~= y.w then return x.w > y.w end return x.id < y.id end)
  return out
end

local function config_text(env, c)
  local parts = {}
  for i, k in ipairs(env.space.knobs) do parts[i] = k.name .. "=" .. tostring(c[k.name]) end
  return table.concat(parts, " ")
end

-- The overview's text (the overview tool's answer, and what the fallback
-- prompt inlines), or nil and why.
function M.overview_text(env)
  local an, why = M.analysis(env)
  if not an then return nil, why end
  local a, f = an.a, an.func
  local L = {}
  L[#L + 1] = string.format("Kernel %s at %s, compiled to PTX for %s (%d PTX lines, %d instructions).",
                            tostring(f.name), config_text(env, an.config), env.arch:gsub("^sm_", "compute_"),
                            a.lines, a.instructions)
  L[#L + 1] = "Counts are static and per thread: one pass through a region's own code; dyn multiplies by the " ..
              "constant trip counts around it (unknown counts 1)."
  L[#L + 1] = ptx_cmd.overview(a, f.name):gsub("\n$", "")
  local h = hot(an)
  local ids = {}
  for i = 1, math.min(3, #h) do ids[i] = "#" .. h[i].id end
  if #ids > 0 then
    L[#L + 1] = string.format("Hot regions (instructions x trip counts, an unknown trip count weighs %d): %s",
                              M.UNKNOWN_TRIP, table.concat(ids, ", "))
  end
  L[#L + 1] = "region(id) shows a region's PTX and source lines."
  return table.concat(L, "\n")
end

local function show_source(an, first, last, out, cap)
  local n = 0
  for i = first, last do
    if an.src[i] and n < cap then
      out[#out + 1] = string.format("  %4d | %s", i, an.src[i])
      n = n + 1
    end
  end
  if last - first + 1 > cap then out[#out + 1] = string.format("  [%d more lines]", last - first + 1 - cap) end
end

-- Sorted distinct numbers as "3, 5-9, 12".
local function spans(list)
  table.sort(list)
  local out, i = {}, 1
  while i <= #list do
    local j = i
    while j < #list and list[j + 1] <= list[j] + 1 do j = j + 1 end
    out[#out + 1] = list[i] == list[j] and tostring(list[i]) or (list[i] .. "-" .. list[j])
    i = j + 1
  end
  return table.concat(out, ", ")
end

local function region_text(env, id)
  local an, why = M.analysis(env)
  if not an then return nil, why end
  local r = an.a.regions[id]
  if not r or r.func ~= nil and an.a.functions[r.func] ~= an.func then
    local ids = {}
    for _, x in ipairs(an.func.regions) do ids[#ids + 1] = "#" .. x end
    return nil, string.format("no region #%s in %s; the regions are %s", tostring(id), an.func.name,
                              table.concat(ids, ", "))
  end
  local L = {}
  local parent = r.parent and an.a.regions[r.parent]
  L[#L + 1] = string.format("region #%d: %s, depth %d%s, function %s", id, region_label(r), r.depth,
                            parent and string.format(", inside #%d %s", r.parent, region_label(parent)) or "",
                            an.func.name)
  L[#L + 1] = string.format("PTX lines %s, source lines %s%s", range_text(r.ptx_lines), range_text(r.src_lines),
                            an.func.src_file and (" of " .. an.func.src_file) or "")
  local w = ptx_cmd.work_text(r.kind == "function" and r.total or r.work)
  L[#L + 1] = "work per thread, one pass: " .. (w ~= "" and w or "no memory or math work")
  local dyn = ptx_cmd.work_text(r.weighted or r.work)
  if dyn ~= "" then L[#L + 1] = "dyn (times the constant trip counts around it): " .. dyn end
  if r.ptx_lines then
    local seen, list = {}, {}
    for i = r.ptx_lines[1], r.ptx_lines[2] do
      local s = an.loc[i]
      if s and not seen[s] then seen[s], list[#list + 1] = true, s end
    end
    if #list > 0 then
      L[#L + 1] = "source lines its instructions come from: " .. spans(list)
      L[#L + 1] = "source:"
      local shown = 0
      for _, s in ipairs(list) do
        if shown < M.SOURCE_SHOWN and an.src[s] then
          L[#L + 1] = string.format("  %4d | %s", s, an.src[s])
          shown = shown + 1
        end
      end
    elseif r.src_lines then
      L[#L + 1] = "source:"
      show_source(an, r.src_lines[1], r.src_lines[2], L, M.SOURCE_SHOWN)
    end
    local last = math.min(r.ptx_lines[2], r.ptx_lines[1] + M.PTX_SHOWN - 1)
    L[#L + 1] = string.format("PTX (lines %d-%d of %s):", r.ptx_lines[1], last, range_text(r.ptx_lines))
    for i = r.ptx_lines[1], last do L[#L + 1] = string.format("  %5d | %s", i, an.ptx[i] or "") end
  end
  return table.concat(L, "\n")
end

-- Line numbers from "12-20,31", a number, or a list of numbers (at most
-- LINES_ASKED). Nil and why on nonsense.
local function parse_lines(v)
  local out = {}
  local function add(a, b)
    for i = a, b do
      if #out >= M.LINES_ASKED then return end
      out[#out + 1] = i
    end
  end
  if math.type(v) == "integer" then add(v, v)
  elseif type(v) == "table" then
    for _, x in ipairs(v) do
      if math.type(x) ~= "integer" then return nil, "lines: a list of line numbers, got " .. json.encode(v) end
      add(x, x)
    end
  elseif type(v) == "string" then
    for item in v:gmatch("[^,%s]+") do
      local a, b = item:match("^(%d+)%-(%d+)$")
      if not a then a = item:match("^(%d+)$") b = a end
      if not a then return nil, "lines: expected \"12-20,31\", got " .. json.encode(v) end
      add(tonumber(a), tonumber(b))
    end
  end
  if #out == 0 then return nil, "lines: no line numbers given" end
  return out
end

local LINES_SCHEMA = { anyOf = { { type = "string" }, { type = "integer" }, { type = "array", items = { type = "integer" } } } }

local function source_for_ptx(env, v)
  local an, why = M.analysis(env)
  if not an then return nil, why end
  local lines, err = parse_lines(v)
  if not lines then return nil, err end
  local L = {}
  for _, i in ipairs(lines) do
    local p = an.ptx[i]
    if p then
      local s = an.loc[i]
      L[#L + 1] = string.format("PTX %d: %s", i, p:match("^%s*(.-)%s*$"))
      L[#L + 1] = s and string.format("  <- source %d: %s", s, (an.src[s] or ""):match("^%s*(.-)%s*$"))
                  or "  <- (no source line: a directive, label or declaration)"
    end
  end
  if #L == 0 then return nil, string.format("the PTX has %d lines", #an.ptx) end
  return table.concat(L, "\n")
end

local function ptx_for_source(env, v)
  local an, why = M.analysis(env)
  if not an then return nil, why end
  local lines, err = parse_lines(v)
  if not lines then return nil, err end
  local want = {}
  for _, s in ipairs(lines) do want[s] = {} end
  for i = 1, #an.ptx do
    local s = an.loc[i]
    if s and want[s] then table.insert(want[s], i) end
  end
  local L = {}
  for _, s in ipairs(lines) do
    local list = want[s]
    L[#L + 1] = string.format("source %d: %s", s, (an.src[s] or "(beyond the source)"):match("^%s*(.-)%s*$"))
    if #list == 0 then
      L[#L + 1] = "  -> no PTX instruction (optimised away, or not code)"
    else
      L[#L + 1] = string.format("  -> %d PTX instructions, lines %s", #list, spans({ table.unpack(list) }))
      for k = 1, math.min(8, #list) do
        L[#L + 1] = string.format("     %5d | %s", list[k], an.ptx[list[k]]:match("^%s*(.-)%s*$"))
      end
      if #list > 8 then L[#L + 1] = string.format("     [%d more]", #list - 8) end
    end
  end
  return table.concat(L, "\n")
end

-- A config argument: an object of knob values over the current best, a
-- "K=V,..." string, or nil / "" / "best" for the current best.
function M.config_arg(env, v)
  if v == nil or v == json.null or v == "" or v == "best" then return env.config, true end
  if type(v) == "string" then
    local c, why = env.space:with(env.config, v)
    if not c then return nil, why end
    return c
  end
  if type(v) == "table" then
    local parts = {}
    local names = {}
    for k in pairs(v) do names[#names + 1] = tostring(k) end
    table.sort(names)
    for _, k in ipairs(names) do
      if v[k] ~= json.null then parts[#parts + 1] = k .. "=" .. tostring(v[k]) end
    end
    local c, why = env.space:with(env.config, table.concat(parts, ","))
    if not c then return nil, why end
    local same = true
    for _, k in ipairs(env.space.knobs) do if c[k.name] ~= env.config[k.name] then same = false end end
    return c, same
  end
  return nil, "config: an object of knob values, a \"K=V,K=V\" string, or \"best\""
end

-- The recorded result of a config (the current best's own when it is that
-- state; others only for the spec's source, which is what lookup keys).
local function result_of(env, c, is_best)
  if is_best and env.result then return env.result end
  if env.patch then return nil end
  return env.ctx.lookup and env.ctx:lookup(c) or nil
end

local function result_line(r)
  local res = r.resources or {}
  local parts = { string.format("status %s", tostring(r.status)) }
  if type(r.time_ms) == "number" then parts[#parts + 1] = string.format("time %.5g ms", r.time_ms) end
  if res.regs then parts[#parts + 1] = string.format("%s registers", tostring(res.regs)) end
  if res.smem then parts[#parts + 1] = string.format("%s B shared memory", tostring(res.smem)) end
  if res.spills then parts[#parts + 1] = string.format("%s B spilled", tostring(res.spills)) end
  if type(res.occupancy) == "number" then parts[#parts + 1] = string.format("occupancy %.2f", res.occupancy) end
  return table.concat(parts, ", ")
end

local function fmt_num(v)
  if math.type(v) == "integer" then return tostring(v) end
  if type(v) == "number" then return string.format("%.4g", v) end
  return tostring(v)
end

local METRICS_SHOWN = 40

local function metrics_text(env, v)
  local c, same = M.config_arg(env, v)
  if not c then return nil, same end
  local r = result_of(env, c, same)
  local L = { "config " .. config_text(env, c) .. (same and " (the current best)" or "") }
  if not r then
    L[#L + 1] = "not measured in this run: nothing to report (propose it to have it measured)"
    return table.concat(L, "\n")
  end
  L[#L + 1] = "measured: " .. result_line(r)
  local metrics, syms = r.metrics, r.symptoms
  -- (a recording's own columns, time or compile_time, are no counters: they
  -- are shown as what they are, and the counters are asked for)
  local others
  if not symptoms.has_counters(metrics) then
    others, metrics = metrics, nil
    if r.status == "ok" then
      local ctx = env.ctx
      local got, why
      if ctx.profile then
        got, why = ctx:profile({ config = c, patch = same and env.patch or nil,
                                 source = same and env.patch and env.source or nil })
      else
        why = "this strategy cannot profile"
      end
      if got then
        metrics, syms = got, why
        L[#L + 1] = "counters measured now (CUPTI):"
      else
        L[#L + 1] = "no hardware counters: " .. tostring(why)
      end
    end
  else
    L[#L + 1] = "counters:"
  end
  local function list(values)
    local names = {}
    for k, x in pairs(values) do if type(x) == "number" then names[#names + 1] = k end end
    table.sort(names)
    for i = 1, math.min(METRICS_SHOWN, #names) do L[#L + 1] = string.format("  %s = %s", names[i], fmt_num(values[names[i]])) end
    if #names > METRICS_SHOWN then L[#L + 1] = string.format("  [%d more]", #names - METRICS_SHOWN) end
  end
  if type(metrics) == "table" and next(metrics) then
    list(metrics)
    if type(syms) ~= "table" then
      local ok, d = pcall(symptoms.diagnose, { metrics = metrics, resources = r.resources, time_ms = r.time_ms })
      syms = ok and d or nil
    end
  end
  if type(others) == "table" and next(others) then
    L[#L + 1] = "other measurements of the result (not hardware counters):"
    list(others)
  end
  -- (without counters, what the launch, the resources and the device say:
  -- the symptoms the run's report gives such a best)
  local heading = "symptoms:"
  if type(syms) ~= "table" and not metrics and r.status == "ok" and env.ctx.static_symptoms then
    syms = env.ctx:static_symptoms({ config = c }, r)
    heading = "symptoms from the static facts alone (launch, resources, device; no counters):"
  end
  if type(syms) == "table" and #syms > 0 then
    L[#L + 1] = heading
    for _, s in ipairs(syms) do
      L[#L + 1] = string.format("  - %s (severity %.2f): %s", tostring(s.name), tonumber(s.severity) or 0,
                                tostring(s.summary or ""))
    end
  end
  return table.concat(L, "\n")
end

local function history_of(env)
  if env.history then return env.history end
  local ctx = env.ctx
  return ctx.recent and ctx:recent() or {}
end

local function history_text(env, n)
  local h = history_of(env)
  n = math.max(1, math.min(n or 10, 50))
  if #h == 0 then return "nothing measured yet" end
  local L = { string.format("the last %d of %d measurements, oldest first:", math.min(n, #h), #h) }
  for i = math.max(1, #h - n + 1), #h do
    local e = h[i]
    local o = e.origin or {}
    L[#L + 1] = string.format("%d. %s -> %s%s", i, config_text(env, e.config), result_line(e.result or {}),
                              o.expert and string.format(" [%s/%s]", tostring(o.expert), tostring(o.method))
                              or o.method and string.format(" [%s]", tostring(o.method)) or "")
  end
  return table.concat(L, "\n")
end

local function compare_text(env, a, b)
  local ca, sa = M.config_arg(env, a)
  if not ca then return nil, "a: " .. tostring(sa) end
  local cb, sb = M.config_arg(env, b)
  if not cb then return nil, "b: " .. tostring(sb) end
  local ra, rb = result_of(env, ca, sa), result_of(env, cb, sb)
  local L = {}
  L[#L + 1] = "a: " .. config_text(env, ca) .. " -> " .. (ra and result_line(ra) or "not measured")
  L[#L + 1] = "b: " .. config_text(env, cb) .. " -> " .. (rb and result_line(rb) or "not measured")
  local diff = {}
  for _, k in ipairs(env.space.knobs) do
    if ca[k.name] ~= cb[k.name] then diff[#diff + 1] = string.format("%s %s -> %s", k.name, tostring(ca[k.name]), tostring(cb[k.name])) end
  end
  L[#L + 1] = "knobs that differ: " .. (#diff > 0 and table.concat(diff, ", ") or "none")
  if ra and rb and type(ra.time_ms) == "number" and type(rb.time_ms) == "number" and rb.time_ms > 0 then
    L[#L + 1] = string.format("time a / b = %.3f", ra.time_ms / rb.time_ms)
  end
  local ma = ra and type(ra.metrics) == "table" and ra.metrics or {}
  local mb = rb and type(rb.metrics) == "table" and rb.metrics or {}
  local names = {}
  for k, x in pairs(ma) do if type(x) == "number" and type(mb[k]) == "number" then names[#names + 1] = k end end
  table.sort(names)
  if #names > 0 then
    L[#L + 1] = "counters (a | b):"
    for i = 1, math.min(METRICS_SHOWN, #names) do
      L[#L + 1] = string.format("  %s: %s | %s", names[i], fmt_num(ma[names[i]]), fmt_num(mb[names[i]]))
    end
  elseif ra and rb then
    L[#L + 1] = "no counters for both (metrics(config) measures them when the backend can profile)"
  end
  -- the static work of the two, when the kernel can be compiled
  local pa, pb = env.spec and M.analysis(env, ca), env.spec and M.analysis(env, cb)
  if pa and pb then
    local function total(an) return ptx_cmd.work_text(an.a.regions[an.func.regions[1]].total) end
    L[#L + 1] = "PTX work per thread, a: " .. total(pa)
    L[#L + 1] = "PTX work per thread, b: " .. total(pb)
  end
  return table.concat(L, "\n")
end

local OBJ = "object"
local CONFIG_SCHEMA = { anyOf = { { type = "string" }, { type = "object" }, { type = "null" } } }

tools.register("overview", { type = OBJ, properties = {} }, function(_, env) return M.overview_text(env) end,
  "The current best kernel's compiled PTX as regions (prologue, main loop, loops with trip counts, " ..
  "epilogue) with static work per thread (loads/stores with bytes, FLOPs by type, tensor-core ops, " ..
  "barriers, branches) and the hottest regions. No arguments.")
tools.register("region", { type = OBJ, properties = { id = { type = "integer" } }, required = { "id" } },
  function(args, env) return region_text(env, args.id) end,
  "One region of the overview by its id (#n): its work, the source lines it came from, and its PTX.")
tools.register("source_for_ptx", { type = OBJ, properties = { lines = LINES_SCHEMA }, required = { "lines" } },
  function(args, env) return source_for_ptx(env, args.lines) end,
  "The kernel source line of each PTX line, e.g. lines \"850-870\" or [851, 900].")
tools.register("ptx_for_source", { type = OBJ, properties = { lines = LINES_SCHEMA }, required = { "lines" } },
  function(args, env) return ptx_for_source(env, args.lines) end,
  "The PTX instructions compiled from some kernel source lines, e.g. lines \"120-124\".")
tools.register("metrics", { type = OBJ, properties = { config = CONFIG_SCHEMA } },
  function(args, env) return metrics_text(env, args.config) end,
  "Hardware counters (CUPTI) and the symptoms they show (memory-bound, occupancy, spills, ...) of a measured " ..
  "configuration: config is an object of knob values changed from the current best, or omitted for the best.")
tools.register("history", { type = OBJ, properties = { n = { type = "integer" } } },
  function(args, env) return history_text(env, args.n) end,
  "The last n measurements (default 10): configuration, status, time, resources, who proposed it.")
tools.register("compare", { type = OBJ, properties = { a = CONFIG_SCHEMA, b = CONFIG_SCHEMA }, required = { "a", "b" } },
  function(args, env) return compare_text(env, args.a, args.b) end,
  "Two measured configurations side by side (a and b: objects of knob values changed from the current best, " ..
  "or \"best\"): times, resources, counters and static PTX work.")

M.NAMES = { "overview", "region", "source_for_ptx", "ptx_for_source", "metrics", "history", "compare" }
M.NEEDS_SOURCE = { overview = true, region = true, source_for_ptx = true, ptx_for_source = true }

-- The tools offered for a run: every registered one, less those that need
-- the kernel's source when the run has none (a recorded space).
function M.offered(env)
  local out = {}
  for _, n in ipairs(tools.names()) do
    if env.spec or not M.NEEDS_SOURCE[n] then out[#out + 1] = n end
  end
  return out
end

return M
