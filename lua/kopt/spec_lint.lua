-- A spec against its kernel, when it is read (kopt.spec): the args against
-- the entry's signature (refused where kopt can be sure), and what the spec
-- probably did not mean, said as notes where a run or a compile starts.
--
--   spec_lint.check_signatures(checker, spec)  (raises through checker:fail)
--   spec_lint.notes(spec) -> { "a sentence", ... }
local compile = require("kopt.compile")
local entry_mod = require("kopt.entry")
local json = require("kopt.json")

local M = {}

-- What a spec probably did not mean, said once where a run or a compile
-- starts (kopt.run, kopt compile) but not refused: kopt cannot be sure.
-- A knob whose name appears nowhere but in its own entry (not in the
-- kernel's source, not in any expression of the spec): every value compiles
-- the same kernel, and a run would rank the noise. A knob that changes the
-- problem (reference.knobs) with the time as the objective: the smallest
-- problem tends to win.
function M.notes(self)
  local notes = {}
  local src = self.kernel and self.kernel.source or ""
  local pre = table.concat(self.kernel and self.kernel.options or {}, " "):find("%-include") ~= nil
  local local_headers = pre or compile.includes_local(src)
  -- (the expressions a knob can act through; a constraint only removes
  -- configs, and the reference's knobs change the problem, not the kernel)
  local raw = self.raw
  -- (and the entry: a template argument, `k<TILE>`, is a knob at work)
  local used = json.encode({ launch = raw.launch, args = raw.args, pipeline = raw.pipeline, work = raw.work,
                             metrics = raw.metrics, problem = raw.problem,
                             entry = type(raw.kernel) == "table" and raw.kernel.entry or nil })
  for _, k in ipairs(self.knobs or {}) do
    local pat = "%f[%w_]" .. k.name:gsub("%p", "%%%0") .. "%f[^%w_]"
    local in_spec = used:find(pat) ~= nil
    -- (a knob with define = false and no options reaches nothing but what
    -- the spec itself names, whatever the source holds)
    local in_source = k.define ~= false and (local_headers or src:find(pat) ~= nil)
    if next(k.options or {}) == nil and not in_spec and not in_source then
      notes[#notes + 1] = string.format("knob %s appears nowhere in %s, its launch or its shapes: every value " ..
        "compiles and launches the same kernel (a misspelt name?)", k.name, self.kernel.path or "the kernel")
    end
  end
  local changes = self.reference and self.reference.knobs or {}
  if #changes > 0 and not self.objective then
    notes[#notes + 1] = string.format("knob%s %s change%s the problem (reference.knobs) and configs are ranked by " ..
      "time, so the smallest problem tends to win; rank them by a rate: \"objective\": {\"metric\": ..., " ..
      "\"goal\": \"max\"} (specs/README.md)", #changes > 1 and "s" or "", table.concat(changes, ", "),
      #changes > 1 and "" or "s")
  end
  return notes
end
local function kernel_params(args)
  local out = {}
  for _, a in ipairs(args or {}) do
    if a.param ~= false and a.kind ~= "constant" then out[#out + 1] = a end
  end
  return out
end

-- The spec's args against the entry kernels' signatures, where the source
-- shows them plainly (kopt.entry.launch_mismatch, certain): a parameter
-- more or less, an array where the kernel takes a value, a float scalar in
-- an int's place. Unchecked, the worker passes them all the same, and the
-- kernel reads garbage. An entry whose name the source never mentions (and
-- that no local header of it could define) is a typo, met otherwise as
-- NVRTC's "identifier is undefined" in a name map, once per config.
function M.check_signatures(c, self)
  local function check(k, path, args)
    if not k or type(k.source) ~= "string" or type(k.entry) ~= "string" then return end
    local name = entry_mod.name(k.entry)
    if not k.source:find("%f[%w_]" .. name:gsub("%p", "%%%0") .. "%f[^%w_]") and not compile.includes_local(k.source)
       and not table.concat(k.options or {}, " "):find("%-include") then
      c:fail(path .. ".entry", "'%s' appears nowhere in %s", name, k.path or "the source")
      return
    end
    local why = entry_mod.launch_mismatch(k.source, k.entry, kernel_params(args), true)
    if why then c:fail(path == "kernel" and "args" or path .. ".args", "%s", why) end
  end
  local function listed(indices)
    local out = {}
    for i, k in ipairs(indices) do out[i] = self.arg_specs[k] end
    return out
  end
  if self.pipeline then
    -- each stage: its entry in the kernel's source, with its own args
    for i, st in ipairs(self.pipeline) do
      check({ source = self.kernel.source, path = self.kernel.path, entry = st.entry }, string.format("pipeline[%d]", i),
            listed(st.args))
    end
  elseif not self.synthesis then
    check(self.kernel, "kernel", self.arg_specs)
  end
  if self.reference then
    -- (reference.args: indices into the args, the reference's own order;
    -- without them the reference gets the kernel's list and reads only the
    -- parameters it declares: the tensor maps at its end are not its)
    local rargs
    if self.reference.args then
      rargs = listed(self.reference.args)
    else
      rargs = {}
      for i, a in ipairs(self.arg_specs) do rargs[i] = a end
      while #rargs > 0 and rargs[#rargs].kind == "tensormap" do rargs[#rargs] = nil end
    end
    check(self.reference, "reference", rargs)
  end
end

return M
