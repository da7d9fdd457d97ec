-- `kopt devices`: the GPUs this machine has, as the cuda backend sees them.
local cjson = require("cjson")
local errors = require("kopt.errors")
local gpu = require("kopt.gpu")

local M = { summary = "list the GPUs (name, compute capability, SMs, memory, L2, clocks, driver)" }
-- (refused with a value by kopt.cli: "--flag=value")
M.flags_without_value = { "--json", "--help" }

local function gib(bytes) return string.format("%.1f GiB", bytes / 2^30) end
local function mib(bytes) return string.format("%.0f MiB", bytes / 2^20) end

local USAGE = [[
usage: kopt devices [--json]
  the GPUs this machine has, as the cuda backend sees them: name, compute
  capability, SMs, memory, L2, clocks, shared memory per block, PCI bus id
  --json   the same as one JSON array (the fields spec expressions read as device.*)
]]

function M.main(argv)
  local json = false
  for _, a in ipairs(argv) do
    if a == "--help" or a == "-h" then io.stdout:write(USAGE) return 0 end
    if a == "--json" then json = true else errors.usage("devices: unknown argument '%s'", a) end
  end
  local devices, err = gpu.devices()
  if not devices then
    io.stderr:write("kopt: ", err, "\n")
    return 1
  end
  if json then
    print(cjson.encode(devices))
    return 0
  end
  if #devices == 0 then
    print("no GPU visible (the NVIDIA driver is loaded but reports no device)")
    return 1
  end
  local d0 = devices[1]
  print(string.format("driver: CUDA %d.%d", d0.driver_version // 1000, d0.driver_version % 1000 // 10))
  for _, d in ipairs(devices) do
    print(string.format("GPU %d: %s  cc %d.%d (%s)  %d SMs  %s  L2 %s  SM clock %d MHz  memory clock %d MHz x %d bit  smem/block %d KiB (opt-in %d KiB)  %s",
      d.index, d.name, d.cc_major, d.cc_minor, d.arch, d.sm_count, gib(d.mem_bytes), mib(d.l2_bytes),
      d.clock_khz // 1000, d.mem_clock_khz // 1000, d.mem_bus_width, d.max_smem_block // 1024,
      d.max_smem_optin // 1024, d.pci_bus_id))
  end
  return 0
end

return M
