-- `kopt ptx FILE|SPEC`: the static shape of a kernel's PTX (core/ptx.c):
-- stages (prologue, main loop, epilogue), loops with their nesting and
-- constant trip counts, and per region the loads and stores (bytes per
-- thread), FLOPs by type, barriers, branches and source lines. FILE is a
-- PTX file; SPEC a spec whose kernel is compiled to PTX for one config (a
-- separate NVRTC call with -lineinfo; no GPU needed), told apart by their
-- text, not their name. Bad input is one sentence and exit 2; a kernel that
-- does not compile is exit 1.
local compile = require("kopt.compile")
local errors = require("kopt.errors")
local json = require("kopt.json")
local kptx = require("kopt.ptx")
local nvrtc = require("kopt.nvrtc")
local run_mod = require("kopt.run")
local spec_mod = require("kopt.spec")
local sys = require("kopt.sys")

local M = { summary = "PTX regions of a kernel (no GPU): stages, loops, loads/stores, FLOPs per region" }
-- (refused with a value by kopt.cli: "--flag=value")
M.flags_without_value = { "--help" }

local USAGE = [[
usage: kopt ptx FILE.ptx|SPEC [--config K=V,...] [--arch sm_90] [--function NAME] [--save FILE]
  FILE.ptx        analyse this PTX text (a file is a spec when its text is
                  JSON, whatever its name)
  SPEC            compile the spec's kernel to PTX for one config (the knobs'
                  defaults; --config changes some) and analyse it
  --arch          target architecture (default sm_90; the PTX is for compute_90)
  --function      only this function (default: every .entry and .func of a
                  FILE.ptx; with a SPEC, the spec's entry)
  --save FILE     also write the PTX to FILE
Counts are static and per thread: one pass through a region's own code.
"dyn" multiplies by the enclosing constant trip counts (unknown counts 1).
]]

local function parse(argv)
  local o = { configs = {}, arch = "sm_90" }
  local i = 1
  local function value(flag)
    i = i + 1
    if argv[i] == nil then errors.usage("ptx: %s needs a value", flag) end
    return argv[i]
  end
  while i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then o.help = true
    elseif a == "--config" then o.configs[#o.configs + 1] = value(a)
    elseif a == "--arch" then
      o.arch, o.arch_given = value(a), true
      if not o.arch:match("^sm_%d+a?$") then errors.usage("ptx: --arch: expected sm_NN or sm_NNa, got '%s'", o.arch) end
    elseif a == "--function" then o.func = value(a)
    elseif a == "--save" then o.save = value(a)
    elseif a:sub(1, 1) == "-" then errors.usage("ptx: unknown option '%s' (see kopt ptx --help)", a)
    elseif o.path then errors.usage("ptx: one FILE or SPEC only, got '%s' and '%s'", o.path, a)
    else o.path = a end
    i = i + 1
  end
  return o
end

-- The config: the knobs' defaults (or the first valid one) changed by --config.
-- (the space as a run checks it: a constraint that fails is the spec's
-- error in one sentence, as kopt compile says it)
local function config_of(o, spec)
  local space = run_mod.build_space(spec)
  local c = space:first()
  for _, text in ipairs(o.configs) do
    local why
    c, why = space:with(c, text)
    if not c then errors.usage("ptx: --config %s: %s (%s)", text, why, spec.path) end
  end
  return c, space:describe(c)
end

-- Whether FILE is a spec, told by its text whatever its name (kopt compile
-- takes a spec by any name): JSON opens with "{", PTX never does. A name
-- ending in .json whose text is no PTX either (empty, unreadable) goes to the
-- spec loader too, which says what is wrong with it.
local function is_spec(path, text)
  if text and text:gsub("^" .. json.BOM, ""):match("^%s*{") then return true end
  return path:lower():match("%.json$") ~= nil and not (text and text:find(".version", 1, true))
end

-- The PTX text and a line saying where it came from; nil, log when the
-- kernel does not compile.
local function ptx_text(o)
  local f, err = io.open(o.path, "rb")
  local content = f and f:read("a")
  if f then f:close() end
  if is_spec(o.path, content) then
    local spec = spec_mod.load(o.path)
    local c, text = config_of(o, spec)
    local job = compile.job_for(spec, c, o.arch)
    local ptx, lowered = nvrtc.ptx(job)
    if not ptx and tostring(lowered):find("invalid value for --gpu-architecture", 1, true) then
      -- (the architecture, not the kernel: named where it was set, the
      -- spec's field, which --arch does not override, or --arch, as kopt
      -- compile says it)
      if spec.kernel.arch then
        errors.usage("ptx: %s: kernel.arch: %s: NVRTC %s does not compile for it", spec.path, job.arch,
                     compile.version())
      end
      errors.usage("ptx: --arch %s: NVRTC %s does not compile for it", job.arch, compile.version())
    end
    if not ptx then return nil, string.format("%s: %s, %s:\n%s", spec.path, spec.kernel.entry, text, lowered) end
    return ptx, string.format("%s: %s, %s, NVRTC %s", spec.path, spec.kernel.entry, text, compile.version()), lowered
  end
  if #o.configs > 0 or o.arch_given then
    errors.usage("ptx: --config and --arch are for a spec; %s is PTX already", o.path)
  end
  if not f then errors.usage("ptx: cannot read %s", err) end
  if not content then errors.usage("ptx: cannot read %s", o.path) end
  return content, o.path
end

local function fmt_range(r)
  if not r then return "-" end
  return r[1] == r[2] and tostring(r[1]) or (r[1] .. "-" .. r[2])
end

local function bytes(n, b)
  if n == 0 then return nil end
  return string.format("%d (%d B)", n, b)
end

-- The work of one region as "key value" pairs, the zero ones left out.
function M.work_text(w)
  local items = {}
  local function add(label, v) if v and v ~= 0 then items[#items + 1] = label .. " " .. tostring(v) end end
  add("ld.global", bytes(w.ld_global, w.ld_global_bytes))
  add("st.global", bytes(w.st_global, w.st_global_bytes))
  add("ld.shared", bytes(w.ld_shared, w.ld_shared_bytes))
  add("st.shared", bytes(w.st_shared, w.st_shared_bytes))
  add("ldmatrix", w.ldmatrix)
  add("cp.async", bytes(w.cp_async, w.cp_async_bytes))
  add("tma", w.tma)
  add("ld.local", w.ld_local)
  add("st.local", w.st_local)
  add("ld.generic", w.ld_generic)
  add("st.generic", w.st_generic)
  add("atomics", w.atomics)
  add("flops.f32", w.flops_f32)
  add("flops.f16", w.flops_f16)
  add("flops.bf16", w.flops_bf16)
  add("flops.f64", w.flops_f64)
  add("mma", w.mma)
  add("flops.tensor", w.flops_tc)
  add("sfu", w.sfu)
  add("barriers", w.barriers)
  if w.branches > 0 then
    items[#items + 1] = string.format("branches %d (%d predicated)", w.branches, w.cond_branches)
  end
  add("calls", w.calls)
  return table.concat(items, ", ")
end

function M.overview(a, func_name)
  local out = {}
  local shown = 0
  for _, f in ipairs(a.functions) do
    if not func_name or f.name == func_name then
      shown = shown + 1
      out[#out + 1] = string.format("%s %s: %d blocks, %d loops, PTX lines %s, registers declared %d pred + %d b16 + %d b32 + %d b64%s%s",
        f.entry and ".entry" or ".func", f.name, f.blocks, f.loops, fmt_range(f.ptx_lines),
        f.regs.pred, f.regs.b16, f.regs.b32, f.regs.b64,
        f.smem > 0 and string.format(", static shared %d B", f.smem) or "",
        f.src_file and (", source " .. f.src_file) or "")
      for _, id in ipairs(f.regions) do
        local r = a.regions[id]
        local label = r.kind == "loop" and string.format("loop (trip %s)", r.trip and tostring(r.trip) or "unknown")
          or r.name
        out[#out + 1] = string.format("  %s#%d %s  [%d insts; PTX %s; source %s]",
          string.rep("  ", r.depth - 1 < 0 and 0 or r.depth - 1), id, label,
          r.work.insts, fmt_range(r.ptx_lines), fmt_range(r.src_lines))
        if r.kind == "function" then
          out[#out + 1] = "      total: " .. M.work_text(r.total)
          out[#out + 1] = "      dyn:   " .. M.work_text(r.weighted)
        else
          local w = M.work_text(r.work)
          out[#out + 1] = string.format("    %s  %s", string.rep("  ", r.depth - 1), w ~= "" and w or "(no memory or math work)")
        end
      end
    end
  end
  if func_name and shown == 0 then return nil end
  return table.concat(out, "\n") .. "\n"
end

function M.main(argv)
  local o = parse(argv)
  if o.help then
    io.write(USAGE)
    return 0
  end
  if not o.path then errors.usage("ptx: missing FILE or SPEC (see kopt ptx --help)") end
  local text, what, entry = ptx_text(o)
  if not text then
    io.stderr:write("kopt: ptx: the kernel does not compile: ", what, "\n")
    return 1
  end
  if o.save then
    local f, err = io.open(o.save, "wb")
    if not f then errors.usage("ptx: --save: %s", err) end
    f:write(text)
    f:close()
  end
  local t0 = sys.now()
  local a, err = kptx.parse(text)
  local dt = sys.now() - t0
  if not a then errors.usage("ptx: %s: %s", o.path, err) end
  -- a spec's kernel: its entry (a template's instance, by its symbol) and
  -- the device functions, not other kernels of the file
  if entry and not o.func then
    local kept = {}
    for _, f in ipairs(a.functions) do
      if not f.entry or f.name == entry then kept[#kept + 1] = f end
    end
    a.functions = kept
  end
  local body = M.overview(a, o.func)
  if not body then errors.usage("ptx: no function '%s' in %s", o.func, o.path) end
  io.stdout:write(string.format("%s\n%d PTX lines, %d instructions, analysed in %.2f ms\n", what, a.lines,
                                a.instructions, dt * 1000), body)
  return 0
end

return M
