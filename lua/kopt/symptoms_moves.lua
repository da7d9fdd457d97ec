-- Profile-guided move priors, part of kopt.symptoms: a rule move that
-- addresses the current bottleneck gets a larger prior, one that makes it
-- worse a smaller one. A move is first classified into an intent ("tile_up",
-- "unroll_down", ...) from its method name, its knob's name and tags and the
-- direction of the change; each symptom then weighs each intent.
return function(M)

-- Knob families: patterns over the upper-cased knob name and tags.
M.families = {
  { "tensor", { "TENSOR", "MMA", "WMMA" } },
  { "split", { "SPLIT" } },
  { "stages", { "STAGE", "PIPELINE", "BUFFER", "PREFETCH", "ASYNC", "TMA" } },
  { "unroll", { "UNROLL" } },
  { "vector", { "VECTOR", "VEC", "WIDTH" } },
  { "cache", { "USE_SH", "SHMEM", "SHARED", "CONSTANT", "CMEM", "READ_ONLY", "CACHE", "TEXTURE" } },
  { "threads", { "WARPS", "THREADS", "BLOCK_SIZE", "WORK_GROUP", "BLOCK_X", "BLOCK_Y", "BLOCKDIM" } },
  { "layout", { "SOA", "SWIZZLE", "LAYOUT", "RASTER", "GROUP", "PADDING", "TRANSPOSE" } },
  { "tile", { "TILE", "BLOCK_M", "BLOCK_N", "BLOCK_K", "ITERATIONS", "PER_THREAD", "WORK_PER", "COARSEN", "ITEMS" } },
}

-- Effect of each intent on each symptom: >1 helps, <1 hurts. Symptom
-- variants are keyed "name:detail" (pipe, limiter or kind) and apply on top
-- of the plain name.
M.effects = {
  memory_bound = { tile_up = 1.6, tile_down = 0.7, vector_up = 1.4, cache_on = 1.5, cache_off = 0.7,
                   layout = 1.3, stages_up = 1.2, split_up = 0.8 },
  compute_bound = { unroll_up = 1.15, vector_up = 1.15, tensor_on = 2.0, tensor_off = 0.5 },
  ["compute_bound:issue"] = { unroll_up = 1.3, vector_up = 1.3, tile_up = 1.2 },
  ["compute_bound:lsu"] = { vector_up = 1.5, cache_on = 1.3, tile_up = 1.2 },
  ["compute_bound:fma"] = { tensor_on = 1.5 },
  latency_bound = { threads_up = 1.4, stages_up = 1.5, unroll_up = 1.3, tile_up = 1.2, split_up = 1.2,
                    threads_down = 0.8 },
  low_occupancy = { threads_up = 1.2 },
  ["low_occupancy:registers"] = { unroll_down = 1.4, tile_down = 1.4, unroll_up = 0.7, tile_up = 0.7 },
  ["low_occupancy:shared memory"] = { stages_down = 1.5, tile_down = 1.4, stages_up = 0.6, tile_up = 0.7 },
  ["low_occupancy:warps per SM (block size)"] = { threads_up = 1.5 },
  ["low_occupancy:blocks per SM"] = { threads_up = 1.5, tile_up = 1.2 },
  register_spills = { unroll_down = 1.8, tile_down = 1.6, unroll_up = 0.5, tile_up = 0.5, vector_up = 0.8,
                      threads_down = 1.1 },
  poor_l2_reuse = { layout = 1.6, tile_up = 1.4, cache_on = 1.5 },
  tensor_idle = { stages_up = 1.6, tile_up = 1.3, tensor_on = 2.0, threads_up = 1.2 },
  ["smem_limited:occupancy"] = { stages_down = 1.5, tile_down = 1.4, stages_up = 0.6, tile_up = 0.7 },
  ["smem_limited:bandwidth"] = { vector_up = 1.3, layout = 1.3 },
  tail_effect = { tile_down = 1.5, split_up = 1.6, tile_up = 0.6, threads_down = 1.2, split_down = 0.8 },
  divergence = { layout = 1.2 },
}

M.bias_range = { 0.2, 5 }

local up_words = { "increase", "grow", "more", "up", "double", "larger", "bigger", "deeper", "enable", "on" }
local down_words = { "decrease", "shrink", "fewer", "less", "down", "halve", "smaller", "shallower", "disable", "off" }

local function has_word(s, words)
  for _, w in ipairs(words) do
    if s:find("%f[%a]" .. w .. "%f[%A]") then return true end
  end
  return false
end

local function family_of(text)
  for _, f in ipairs(M.families) do
    for _, pat in ipairs(f[2]) do
      if text:find(pat, 1, true) then return f[1] end
    end
  end
  return nil
end

-- A move's intent: "tile_up", "unroll_down", "layout", ... or nil when
-- unknown. move: a method string ("grow_tile", "increase:BLOCK_M") or a
-- table { method=, knob=, tags=, from=, to=, direction= (+1/-1) }.
function M.classify_move(move)
  if type(move) == "string" then move = { method = move } end
  if type(move) ~= "table" then return nil end
  local method = tostring(move.method or move.name or "")
  local text = method:upper()
  if move.knob then text = text .. " " .. tostring(move.knob):upper() end
  for _, t in ipairs(move.tags or {}) do text = text .. " " .. tostring(t):upper() end
  local family = move.family or family_of(text)
  if not family then return nil end
  if family == "layout" then return "layout" end
  local dir = move.direction
  if not dir and type(move.from) == "number" and type(move.to) == "number" and move.from ~= move.to then
    dir = move.to > move.from and 1 or -1
  end
  if not dir then
    local words = method:lower():gsub("[_%-:%.]", " ")
    if has_word(words, up_words) then dir = 1 elseif has_word(words, down_words) then dir = -1 end
  end
  if not dir then return nil end
  if family == "cache" or family == "tensor" then return family .. (dir > 0 and "_on" or "_off") end
  return family .. (dir > 0 and "_up" or "_down")
end

-- Multiplier for a move's prior under a diagnosis: the product over symptoms
-- of effect^severity, clamped to bias_range. 1 when nothing applies.
function M.move_bias(symptoms, move)
  local intent = M.classify_move(move)
  if not intent or not symptoms then return 1 end
  local bias = 1
  local present = {}
  for _, s in ipairs(symptoms) do present[s.name] = true end
  for _, s in ipairs(symptoms) do
    if s.caused_by and present[s.caused_by] then goto continue end
    local detail = s.pipe or s.limiter or s.kind or s.detail
    for _, key in ipairs({ s.name, detail and (s.name .. ":" .. detail) or nil }) do
      local e = M.effects[key]
      local w = e and e[intent]
      if w then bias = bias * w ^ s.severity end
    end
    ::continue::
  end
  return math.max(M.bias_range[1], math.min(M.bias_range[2], bias))
end

return M
end
