-- The prompt every expert shares (kopt.experts): the kernel, its knobs and
-- constraints, the best so far and recent measurements, the source when
-- edits are on, and what to answer; the method vocabulary it offers; the
-- edit formats it asks for.
local json = require("kopt.json")

local M = {}

-- The first n bytes of s, less the part of a UTF-8 character cut in two
-- (the logs are JSON, and a split character makes them unreadable).
local function cut(s, n)
  if #s <= n then return s end
  while n > 0 and (s:byte(n + 1) or 0) & 0xC0 == 0x80 do n = n - 1 end
  return s:sub(1, n)
end
M.cut = cut

-- The method vocabulary: config moves, then code edits. Proposals may name
-- their method freely; kopt.relabel maps the label onto the canonical set O
-- (these names, the rule moves' names as aliases, and the methods earlier
-- runs added). The move keeps the label as written in `label`.
M.CONFIG_METHODS = {
  "tile_up", "tile_down", "more_threads", "fewer_threads", "more_warps", "fewer_warps",
  "deeper_pipeline", "shallower_pipeline", "wider_vectors", "narrower_vectors", "more_unroll",
  "less_unroll", "toggle_feature", "tensor_core_align", "conservative", "rebalance",
}
M.EDIT_METHODS = {
  "vectorize_loads", "coalesce_accesses", "shared_memory_tiling", "register_blocking",
  "reduce_bank_conflicts", "double_buffering", "async_copy", "warp_shuffle_reduction",
  "loop_unrolling", "strength_reduction", "fuse_loops", "use_tensor_cores", "predication",
  "launch_bounds",
}
M.METHODS = {}
for _, m in ipairs(M.CONFIG_METHODS) do M.METHODS[#M.METHODS + 1] = m end
for _, m in ipairs(M.EDIT_METHODS) do M.METHODS[#M.METHODS + 1] = m end
M.METHODS[#M.METHODS + 1] = "other"

local function fmt_ms(t) return type(t) == "number" and string.format("%.4g ms", t) or "-" end

local function config_text(space, c)
  local parts = {}
  for i, k in ipairs(space.knobs) do parts[i] = k.name .. "=" .. tostring(c[k.name]) end
  return table.concat(parts, " ")
end
M.config_text = config_text

local function allowed_json(view)
  local parts = {}
  for _, k in ipairs(view.knobs) do
    local vals = {}
    for j, x in ipairs(k.values) do vals[j] = json.encode(x) end
    parts[#parts + 1] = json.encode(k.name) .. ": [" .. table.concat(vals, ", ") .. "]"
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function config_json(view, c)
  local parts = {}
  for _, k in ipairs(view.knobs) do
    parts[#parts + 1] = json.encode(k.name) .. ": " .. json.encode(c[k.name])
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- The most of a kernel's source a prompt shows, in bytes (about 12k tokens;
-- a longer source is cut at a line end, and the prompt says so).
M.SOURCE_CAP = 48 * 1024

-- What the prompt says of the built-in tools, in the order they are named
-- (a user's tool is only named: its description is in its definition).
M.TOOL_HINTS = {
  { "overview", "overview(): the compiled kernel's stages and hot regions with their static work" },
  { "region", "region(id): a region's PTX and source lines" },
  { "metrics", "metrics(config): the measurements, counters and symptoms of a measured configuration" },
  { "history", "history(n): the last n measurements" },
  { "compare", "compare(a, b): two measured configurations side by side" },
}

-- The sentence about the tools offered (" ..." or ""): a model must not be
-- told of a tool it would be refused (a recorded space has no overview).
function M.tool_hints(offered)
  local has = {}
  for _, n in ipairs(offered) do has[n] = true end
  local parts = {}
  for _, h in ipairs(M.TOOL_HINTS) do
    if has[h[1]] then parts[#parts + 1] = h[2] end
  end
  if #parts == 0 then return "" end
  return " " .. table.concat(parts, "; ") .. "."
end

-- The common user message; `focus` is the expert's own paragraph.
function M.user_prompt(view, focus, edit_format)
  local L = {}
  local truncated = false  -- the source shown is cut: a whole-source reply cannot be used
  local function add(fmt, ...) L[#L + 1] = select("#", ...) > 0 and string.format(fmt, ...) or fmt end
  add("Kernel: %s%s", view.name, view.entry and (" (entry " .. view.entry .. ")") or "")
  local sizes = {}
  for k, x in pairs(view.problem) do sizes[#sizes + 1] = k .. "=" .. tostring(x) end
  table.sort(sizes)
  if #sizes > 0 then add("Problem sizes: %s", table.concat(sizes, ", ")) end
  if view.recorded_device then
    -- (a replayed recording: its GPU by name; kopt knows no more of it)
    add("GPU: %s (the recording's; its limits are not known here)", tostring(view.recorded_device))
  elseif type(view.device) == "table" and view.device.name then
    add("GPU: %s (%s, %s SMs, %s bytes shared memory per block opt-in)", tostring(view.device.name),
        tostring(view.device.arch), tostring(view.device.sm_count), tostring(view.device.max_smem_optin))
  end
  add("")
  add("Tunable knobs (compile-time preprocessor defines) and their allowed values:")
  for _, k in ipairs(view.knobs) do
    local vals = {}
    for j, x in ipairs(k.values) do vals[j] = tostring(x) end
    add("- %s (%s): %s", k.name, k.family, table.concat(vals, ", "))
  end
  add("Allowed values (JSON): %s", allowed_json(view))
  if type(view.constraints) == "table" and #view.constraints > 0 then
    add("Constraints every configuration must satisfy:")
    for _, c in ipairs(view.constraints) do add("- %s", type(c) == "table" and (c.text or "?") or tostring(c)) end
  end
  add("")
  local which = view.is_best == false and "Current state (not the best measured)" or "Current best"
  add("%s (JSON): %s", which, config_json(view, view.config))
  local r = view.result
  if r then
    local res = r.resources or {}
    add("%s time: %s (status %s)%s", view.is_best == false and "Current state" or "Current best", fmt_ms(r.time_ms),
        tostring(r.status),
        res.regs and string.format("; %s registers, %s bytes shared memory, %s bytes spilled", tostring(res.regs),
                                   tostring(res.smem), tostring(res.spills)) or "")
  end
  if #view.symptoms > 0 then
    add("Symptoms of the %s:", view.is_best == false and "current state" or "current best")
    for _, s in ipairs(view.symptoms) do add("- %s", s.summary) end
  end
  local h = view.history
  local ranked = {}
  for _, e in ipairs(h) do
    if e.result and e.result.status == "ok" and type(e.result.time_ms) == "number" then ranked[#ranked + 1] = e end
  end
  table.sort(ranked, function(a, b) return a.result.time_ms < b.result.time_ms end)
  if #ranked > 1 then
    add("")
    add("Fastest so far:")
    for i = 1, math.min(5, #ranked) do
      add("- %s -> %s", config_text(view.space, ranked[i].config), fmt_ms(ranked[i].result.time_ms))
    end
  end
  if #h > 0 then
    add("")
    add("Recent measurements (newest last; do not propose these again):")
    for i = math.max(1, #h - 15), #h do
      local e = h[i]
      local res = e.result or {}
      local what = res.status == "ok" and fmt_ms(res.time_ms) or
        (tostring(res.status) .. (res.log and (": " .. cut(tostring(res.log):match("^[^\n]*"), 100)) or ""))
      add("- %s -> %s%s", config_text(view.space, e.config), what,
          e.origin and e.origin.expert and string.format(" [%s/%s]", e.origin.expert, tostring(e.origin.method)) or "")
    end
  end
  if view.edits and view.source then
    add("")
    local src = view.source
    if #src > M.SOURCE_CAP then
      truncated = true
      -- whole lines only, and said plainly: a model that copies what it was
      -- shown must not send back a kernel without its end (a whole source
      -- holding the marker is refused as elided, kopt.patch)
      local head = src:sub(1, M.SOURCE_CAP):match("^(.*\n)") or ""
      local _, shown = head:gsub("\n", "")
      local _, total = src:gsub("\n", "")
      add("Current best kernel source, its first %d of %d lines (the rest is not shown; edit these lines with a " ..
          "diff or search/replace: a whole-source reply cannot be used):", shown, total)
      src = head .. "// [truncated]\n"
    else
      add("Current best kernel source (exactly as it is; edits are applied to this text):")
    end
    add("```cuda")
    -- Byte for byte: the fence closes right after the source's last line.
    L[#L + 1] = src:sub(-1) == "\n" and src:sub(1, -2) or src
    add("```")
  end
  if view.tool_overview then
    add("")
    add("Static analysis of the current best's compiled PTX (regions and their work):")
    add("```")
    L[#L + 1] = view.tool_overview
    add("```")
  elseif view.tools and #view.tools > 0 then
    add("")
    add("Tools: before you answer you may call %s.%s Look before you propose, and cite in \"analysis\" " ..
        "the numbers the tools showed.", table.concat(view.tools, ", "), M.tool_hints(view.tools))
  end
  add("")
  add("Your focus: %s", focus or "")
  add("")
  add("Proposals wanted: %d", view.n)
  add("Propose up to %d new configurations %s. For each: \"method\", a short name for it (such as %s); " ..
      "\"changes\", an object with the knobs you change and their new values (knobs left out or null keep " ..
      "their current value); \"reason\", one sentence; \"patch\", %s.", view.n,
      #h > 0 and "that are not in the measurements above" or "that differ from the current one",
      table.concat(M.METHODS, ", "),
      view.edits and ("null, or " .. M.EDIT_FORMATS[M.edit_format_shown(edit_format or view.edit_format, truncated)] ..
        " when you change code (device code only: no host code, no new #include outside CUDA's device " ..
        "headers, no global __device__ variables, no redefinition of a knob)")
        or "always null (code edits are off)")
  add("Answer with one JSON object: {\"analysis\": \"...\", \"proposals\": [...]}")
  return table.concat(L, "\n")
end

-- What the prompt asks for in "patch", per edit format (an expert's
-- `edit_format`, or the strategy's option).
M.EDIT_FORMATS = {
  diff = "a unified diff against the kernel source above (--- a/kernel.cu, +++ b/kernel.cu, @@ hunks " ..
    "with 3 lines of context)",
  search_replace = "one or more search/replace blocks, each \"<<<<<<< SEARCH\\n<exact lines of the source " ..
    "above>\\n=======\\n<their replacement>\\n>>>>>>> REPLACE\"",
  source = "the whole new kernel source (every line of it, not only the changed part)",
}

-- The edit format a prompt asks for: a source cut short cannot come back
-- whole, so `source` is asked as a diff there (an unknown format too).
function M.edit_format_shown(format, truncated)
  if not M.EDIT_FORMATS[format] or (truncated and format == "source") then return "diff" end
  return format
end

M.SYSTEM = "You are a GPU performance engineer tuning a CUDA kernel through its compile-time knobs. " ..
  "Every configuration you propose is compiled, checked for correctness and timed. Answer in JSON only."

-- Chat messages for an expert: its system persona and the common prompt.
function M.messages(expert, view)
  return {
    { role = "system", content = M.SYSTEM .. (expert.persona and (" " .. expert.persona) or "") },
    { role = "user", content = M.user_prompt(view, expert.focus, expert.edit_format) },
  }
end

return M
