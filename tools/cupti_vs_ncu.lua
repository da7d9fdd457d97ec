-- Compares kopt's CUPTI counters with Nsight Compute's for the runs of
-- tools/device_cupti_compare.sh: prints a Markdown table per kernel.
--   kopt script tools/cupti_vs_ncu.lua DIR NAME [NAME ...]
-- DIR holds kopt_<NAME>.json (tools/profile_config.lua) or
-- runs/<NAME>/events.jsonl (kopt, a "profile" event), and
-- ncu_<NAME>.csv (ncu --csv --print-units base).
local json = require("kopt.json")

local function kopt_metrics(dir, name)
  local lf = io.open(dir .. "/kopt_" .. name .. ".json", "rb")
  if lf then
    local v = json.decode(lf:read("l") or "")
    lf:close()
    if v and v.metrics then return v.metrics end
  end
  local f = io.open(dir .. "/runs/" .. name .. "/events.jsonl", "rb")
  if not f then return nil end
  local m
  for line in f:lines() do
    local ev = json.decode(line)
    if ev and ev.event == "profile" then m = ev.metrics end
  end
  f:close()
  return m
end

-- Splits one CSV line with quoted fields.
local function csv_fields(line)
  local out, pos = {}, 1
  while pos <= #line + 1 do
    if line:sub(pos, pos) == '"' then
      local close = line:find('"', pos + 1, true)
      out[#out + 1] = line:sub(pos + 1, close - 1)
      pos = close + 2
    else
      local comma = line:find(",", pos, true) or (#line + 1)
      out[#out + 1] = line:sub(pos, comma - 1)
      pos = comma + 1
    end
  end
  return out
end

local function ncu_metrics(dir, name)
  local f = io.open(dir .. "/ncu_" .. name .. ".csv", "rb")
  if not f then return nil end
  local header, m, kernel
  for line in f:lines() do
    if line:sub(1, 1) == '"' then
      local row = csv_fields(line)
      if not header then
        header = {}
        for i, h in ipairs(row) do header[h] = i end
      else
        local mn, mv = row[header["Metric Name"]], row[header["Metric Value"]]
        if mn and mv then
          m = m or {}
          m[mn] = tonumber((mv:gsub(",", "")))
          kernel = kernel or row[header["Kernel Name"]]
        end
      end
    end
  end
  f:close()
  return m, kernel
end

local dir = arg[1] or "."
for i = 2, #arg do
  local name = arg[i]
  local k = kopt_metrics(dir, name)
  local n, kernel = ncu_metrics(dir, name)
  print(string.format("### %s (kernel %s)\n", name, tostring(kernel)))
  if not k or not n then
    print(string.format("missing: %s\n", not k and "kopt profile event" or "ncu csv"))
  else
    print("| metric | kopt (CUPTI) | ncu | difference |")
    print("|---|---|---|---|")
    local names = {}
    for mname in pairs(k) do names[#names + 1] = mname end
    table.sort(names)
    for _, mname in ipairs(names) do
      local a, b = k[mname], n[mname]
      local diff = "-"
      if a and b then
        if b ~= 0 then diff = string.format("%+.1f%%", 100 * (a - b) / math.abs(b))
        elseif a == 0 then diff = "0" end
      end
      print(string.format("| `%s` | %.6g | %s | %s |", mname, a, b and string.format("%.6g", b) or "-", diff))
    end
    print("")
  end
end
return 0
