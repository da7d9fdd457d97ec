-- Reply shapes of real models that kopt misread (a third round, each check
-- failed before its fix): knob changes written as "2 -> 8", "-DK=8",
-- "#define K 8", "K from 2 to 8", {current=, proposed=} or one {knob=,
-- value=} object; the answer under a wrapper ({"response": ...}, the
-- schema's name, an echoed schema, "Proposals", {"items": [...]}, a list of
-- JSON strings, capitalised keys); a kernel sent as a list of lines; "Same
-- patch as proposal 1."; a diff whose counts were too small, of which only
-- the counted part was applied; tool calls streamed as server-sent events.
-- Each goes through the client's reply decoding and kopt.experts, as a
-- run's replies do; no server, no GPU.
local T = require("testlib")
local json = require("kopt.json")
local llm = require("kopt.llm")
local patch = require("kopt.patch")
local X = require("kopt.experts")

local SRC = T.slurp("kernels/reduce.cu")
local ENTRY = "reduce_rows"
local KNOBS = {
  { name = "BLOCK_SIZE", values = { 64, 128, 256, 512, 1024 }, family = "block" },
  { name = "ROWS_PER_BLOCK", values = { 1, 2, 4, 8 }, family = "rows" },
  { name = "VEC", values = { 1, 2, 4 }, family = "vector" },
  { name = "UNROLL", values = { 1, 2, 4, 8 }, family = "unroll" },
}
local VIEW = { knobs = KNOBS, edits = true, entry = ENTRY, source = SRC }
local client = assert(llm.new({ base_url = "http://127.0.0.1:1/v1", model = "m", mode = "json_schema" }))

local function parse(content)
  local body = json.encode({ choices = { { index = 0, message = { role = "assistant", content = content },
                                           finish_reason = "stop" } } })
  local r = client:interpret({ schema = X.schema(VIEW) }, { status = 200, body = body, headers = {} })
  if not r.ok then return {}, { { index = 0, why = r.err } }, {} end
  return X.parse(r.value, VIEW, "t", r.content)
end

local function one(p) return json.encode({ analysis = "a", proposals = { p } }) end

-- knob changes
local CHANGES = {
  { "UNROLL: 2 -> 4, VEC: 4", { UNROLL = 4, VEC = 4 } },
  { { BLOCK_SIZE = "256 \226\134\146 512" }, { BLOCK_SIZE = 512 } },
  { "UNROLL=2->8, BLOCK_SIZE=256=>512", { UNROLL = 8, BLOCK_SIZE = 512 } },
  { "-DBLOCK_SIZE=512 -DUNROLL=4", { BLOCK_SIZE = 512, UNROLL = 4 } },
  { "#define BLOCK_SIZE 512\n#define UNROLL 4", { BLOCK_SIZE = 512, UNROLL = 4 } },
  { { UNROLL = { current = 2, proposed = 8 } }, { UNROLL = 8 } },
  { { knob = "BLOCK_SIZE", value = 512 }, { BLOCK_SIZE = 512 } },
  { "UNROLL from 2 to 8", { UNROLL = 8 } },
  { "set UNROLL to 8", { UNROLL = 8 } },
  { "BLOCK_SIZE=512", { BLOCK_SIZE = 512 } },  -- (as before)
  -- prose after an arrow, "from ... to" or "set ... to" is no value
  { "TILE_UNUSED=1, UNROLL=8 -> fewer global loads", { UNROLL = 8 } },
  { "VEC=4, move UNROLL from registers to shared", { VEC = 4 } },
  { "BLOCK_SIZE=256 (set UNROLL to taste)", { BLOCK_SIZE = 256 } },
  { "increase UNROLL -> 8", { UNROLL = 8 } },
}
local function kv(t)
  if type(t) ~= "table" then return tostring(t) end
  local out = {}
  for k, v in pairs(t) do out[#out + 1] = k .. "=" .. tostring(v) end
  table.sort(out)
  return table.concat(out, " ")
end
for _, c in ipairs(CHANGES) do
  local moves, rejected = parse(one({ method = "more_threads", changes = c[1], reason = "r", patch = json.null }))
  T.eq(moves[1] and kv(moves[1].changes), kv(c[2]),
       "changes " .. json.encode(c[1]) .. (rejected[1] and (" (" .. rejected[1].why .. ")") or ""))
end

-- wrappers around the answer
local P = { method = "more_threads", changes = { BLOCK_SIZE = 512 }, reason = "r", patch = json.null }
local WRAPPED = {
  response = json.encode({ response = { analysis = "x", proposals = { P } } }),
  schema_name = json.encode({ kopt_proposals = { analysis = "x", proposals = { P } } }),
  schema_echo = json.encode({ type = "object", properties = { analysis = "x", proposals = { P } } }),
  items = json.encode({ analysis = "x", proposals = { items = { P } } }),
  json_strings = json.encode({ analysis = "x", proposals = { json.encode(P) } }),
  capitalised = [[{"Analysis":"x","Proposals":[{"Method":"more_threads","Changes":{"BLOCK_SIZE":512},"Reason":"r","Patch":null}]}]],
}
for name, content in pairs(WRAPPED) do
  local moves, rejected, notes = parse(content)
  T.check(moves[1] and moves[1].changes.BLOCK_SIZE == 512 and moves[1].method == "more_threads",
          "wrapped (%s): %s %s", name, rejected[1] and rejected[1].why or "", notes[1] and notes[1].note or "")
end

-- a kernel sent as a list of lines, in "source" or "kernel"
do
  local edited = SRC:gsub("s %+= acc%[u%];", "s += acc[u] * 1.0f;")
  local lines = {}
  for l in edited:gmatch("(.-)\n") do lines[#lines + 1] = l end
  for _, field in ipairs({ "source", "kernel" }) do
    local p = { method = "strength_reduction", changes = { UNROLL = 4 }, reason = "r", patch = json.null }
    p[field] = lines
    local moves = parse(one(p))
    local new = moves[1] and moves[1].edit and patch.apply_edit(SRC, moves[1].edit, { entry = ENTRY })
    T.check(new and new:find("acc[u] * 1.0f", 1, true), "%s as a list of lines is the edit", field)
  end
  -- an object that holds code kopt cannot read: refused, not measured as
  -- the knob change; one that names the kernel is no edit
  local moves, rejected = parse(one({ method = "strength_reduction", changes = { UNROLL = 4 }, reason = "r",
                                      patch = json.null, source = { language = "cuda", body = { "x\ny" } } }))
  T.check(#moves == 0 and rejected[1] and rejected[1].why:find('"source"', 1, true),
          "an unreadable source object refuses the proposal (%s)", rejected[1] and rejected[1].why)
  for _, named in ipairs({ { kernel = { name = "reduce_rows", file = "kernels/reduce.cu" } },
                           { source = { "kernels/reduce.cu" } } }) do
    local p = { method = "more_unroll", changes = { UNROLL = 4 }, reason = "r", patch = json.null }
    for k, v in pairs(named) do p[k] = v end
    local m3 = parse(one(p))
    T.check(m3[1] and not m3[1].edit and m3[1].changes.UNROLL == 4, "a field naming the kernel: %s", json.encode(named))
  end
end

-- "Same patch as proposal 1."
do
  local d = "@@ -72,2 +72,2 @@\n \tfor (int u = 0; u < UNROLL; u++)\n-\t\ts += acc[u];\n+\t\ts += acc[u] * 1.0f;\n"
  local moves, rejected = parse(json.encode({ analysis = "a", proposals = {
    { method = "strength_reduction", changes = {}, reason = "r", patch = d },
    { method = "strength_reduction", changes = { BLOCK_SIZE = 512 }, reason = "r", patch = "Same patch as proposal 1." },
    { method = "strength_reduction", changes = { BLOCK_SIZE = 256 }, reason = "r", patch = "The diff from proposal 7." },
  } }))
  T.check(moves[2] and moves[2].edit and moves[2].edit.text == d and moves[2].changes.BLOCK_SIZE == 512,
          "the second proposal takes the first's edit")
  T.check(#moves == 2 and rejected[1] and rejected[1].index == 3 and rejected[1].why:find("proposal 7", 1, true),
          "an edit naming a proposal with none is refused (%s)", rejected[1] and rejected[1].why)
  -- a "no edit" sentence that mentions another proposal is no edit
  for _, said in ipairs({ "None: knob-only, unlike proposal 1 this keeps the source as it is",
                          "No code change (the kernel from proposal 1 is not needed here)" }) do
    local m2 = parse(json.encode({ analysis = "a", proposals = {
      { method = "strength_reduction", changes = {}, reason = "r", patch = d },
      { method = "more_threads", changes = { BLOCK_SIZE = 512 }, reason = "r", patch = said } } }))
    T.check(m2[2] and not m2[2].edit, "no edit: %s", said)
  end
end

-- a diff whose counts cover only its first change: both changes, not the first alone
do
  local d = "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -70,3 +70,3 @@\n" ..
    " \tfloat s = 0.0f;\n-#pragma unroll\n+#pragma unroll 4\n \tfor (int u = 0; u < UNROLL; u++)\n-\t\ts += acc[u];\n" ..
    "+\t\ts += acc[u] * 1.0f;\n #pragma unroll\n \tfor (int off = (GROUP < 32 ? GROUP : 32)/2; off > 0; off /= 2)\n"
  local moves = parse(one({ method = "loop_unrolling", changes = {}, reason = "r", patch = d }))
  local new, err
  if moves[1] then new, err = patch.apply_edit(SRC, moves[1].edit, { entry = ENTRY }) end
  T.check(new and new:find("#pragma unroll 4", 1, true) and new:find("acc[u] * 1.0f", 1, true),
          "short counts: both changes applied (%s)", tostring(err))
end

-- a counted diff, a blank line, then "+" prose: cut at its counts (the
-- prose was put into the kernel, four lines away)
do
  local src = "__global__ void k(float* x) {\n  int i = threadIdx.x;\n  x[i] = 1.0f;\n}\n__global__ void other(float* y) {\n" ..
    "  y[0] = 0.0f;\n}\n\n// end\n"
  local d = "@@ -2,3 +2,3 @@\n   int i = threadIdx.x;\n-  x[i] = 1.0f;\n+  x[i] = 2.0f;\n }\n\n" ..
    "+ This doubles the value stored per thread.\n+ It needs no more registers.\n"
  local new = patch.apply(src, d)
  T.check(new and new:find("x[i] = 2.0f;", 1, true) and not new:find("doubles", 1, true), "prose after the counts: %s",
          tostring(new))
  -- (a blank context line, then more changes, is no prose: both apply)
  local src2 = table.concat({ "__global__ void k(float *o) {", "  int a = 1;", "  int b = 2;", "  int x = 0;", "",
                              "  int c = 3;", "  int d = 4;", "  o[0] = a + b + c + d + x;", "}", "" }, "\n")
  local d2 = table.concat({ "--- a/k.cu", "+++ b/k.cu", "@@ -2,2 +2,2 @@", "-  int a = 1;", "+  int a = 10;", "   int b = 2;",
                            "", "-  int c = 3;", "+  int c = 30;", "   int d = 4;", "" }, "\n")
  local new2 = patch.apply_edit(src2, d2, {})
  T.check(new2 and new2:find("int a = 10;", 1, true) and new2:find("int c = 30;", 1, true),
          "changes after a blank line under short counts: %s", tostring(new2))
end

-- two hunks in the source's order, the second numbered wrong (counted from
-- the kernel's first line): sorted by the numbers they did not apply
do
  local d = "--- a/kernel.cu\n+++ b/kernel.cu\n" ..
    "@@ -45,4 +45,4 @@\n \tfloat acc[UNROLL];\n #pragma unroll\n \tfor (int u = 0; u < UNROLL; u++)\n" ..
    "-\t\tacc[u] = 0.0f;\n+\t\tacc[u] = 0.f;\n" ..
    "@@ -34,4 +34,4 @@\n \tfloat s = 0.0f;\n #pragma unroll\n \tfor (int u = 0; u < UNROLL; u++)\n" ..
    "-\t\ts += acc[u];\n+\t\ts += acc[u] * 1.0f;\n"
  local new, err = patch.apply(SRC, d)
  T.check(new and new:find("acc[u] = 0.f;", 1, true) and new:find("acc[u] * 1.0f", 1, true),
          "a hunk numbered wrong, in the right order: both applied (%s)", tostring(err))
end

-- "See the diff below.": the diff (or search/replace blocks) in a fence
-- of its own beside the JSON is the edit
do
  local json_part = one({ method = "strength_reduction", changes = {}, reason = "r", patch = "See the diff below." })
  local diffs = {
    diff = "```diff\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -72,2 +72,2 @@\n \tfor (int u = 0; u < UNROLL; u++)\n" ..
           "-\t\ts += acc[u];\n+\t\ts += acc[u] * 1.0f;\n```\n",
    search_replace = "```\n<<<<<<< SEARCH\n\t\ts += acc[u];\n=======\n\t\ts += acc[u] * 1.0f;\n>>>>>>> REPLACE\n```\n",
  }
  for name, block in pairs(diffs) do
    local moves, rejected, notes = parse("The JSON:\n\n```json\n" .. json_part .. "\n```\n\nThe edit:\n\n" .. block)
    local new
    if moves[1] and moves[1].edit then new = patch.apply_edit(SRC, moves[1].edit, { entry = ENTRY }) end
    T.check(new and new:find("acc[u] * 1.0f", 1, true) and notes[1] and notes[1].note:find("beside its JSON", 1, true),
            "%s beside the JSON is the edit (%s)", name, rejected[1] and rejected[1].why or "")
  end
end

-- a diff without headers whose context lines lost their leading space (a
-- tab-indented kernel): three such lines made it "a whole source"
do
  local d = "\tfloat s = 0.0f;\n#pragma unroll\n\tfor (int u = 0; u < UNROLL; u++)\n-\t\ts += acc[u];\n" ..
    "+\t\ts += acc[u] * 1.0f;\n#pragma unroll\n\tfor (int off = (GROUP < 32 ? GROUP : 32) / 2; off > 0; off /= 2)\n"
  T.eq(patch.detect(d), "diff", "a headerless diff with unprefixed context is a diff")
end

-- a knob's default changed inside its #ifndef guard: never compiled (the
-- knob's define comes first), so no edit to measure
do
  local new = SRC:gsub("#define UNROLL 2", "#define UNROLL 8")
  T.check(new ~= SRC and patch.only_knob_defaults(SRC, new, { "UNROLL", "VEC" }), "a default in its guard")
  local real = SRC:gsub("s %+= acc%[u%];", "s += acc[u] * 1.0f;")
  T.check(not patch.only_knob_defaults(SRC, real, { "UNROLL" }), "a real edit is not one")
end

-- tool calls streamed as server-sent events
do
  -- (two calls at one index, told apart by their ids: some servers send
  -- every call at index 0)
  local two = table.concat({
    'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function",' ..
      '"function":{"name":"overview","arguments":"{}"}}]}}]}',
    'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function",' ..
      '"function":{"name":"compile","arguments":"{\\"config\\":{\\"BLOCK\\":128}}"}}]}}]}',
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}', "data: [DONE]", "" }, "\n")
  local calls = llm.assemble_stream(two).choices[1].message.tool_calls
  T.check(calls and #calls == 2 and calls[1]["function"].name == "overview" and calls[2]["function"].name == "compile",
          "two streamed calls at one index stay two (%s)", json.encode(calls))
  -- (continuation chunks with an empty id are the same call)
  local one_call = table.concat({
    'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",' ..
      '"function":{"name":"compile","arguments":""}}]}}]}',
    'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"","function":{"arguments":"{\\"a\\""}}]}}]}',
    'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"","function":{"arguments":": 1}"}}]}}]}',
    "data: [DONE]", "" }, "\n")
  local c1 = llm.assemble_stream(one_call).choices[1].message.tool_calls
  T.check(c1 and #c1 == 1 and c1[1]["function"].arguments == '{"a": 1}', "empty ids continue a call (%s)", json.encode(c1))
end
do
  local function chunk(delta, finish)
    return "data: " .. json.encode({ choices = { { index = 0, delta = delta, finish_reason = finish } } }) .. "\n\n"
  end
  local body = chunk({ role = "assistant", tool_calls = { { index = 0, id = "call_1", type = "function",
                                                             ["function"] = { name = "overview", arguments = "" } } } })
    .. chunk({ tool_calls = { { index = 0, ["function"] = { arguments = '{"de' } } } })
    .. chunk({ tool_calls = { { index = 0, ["function"] = { arguments = 'pth": 2}' } } } })
    .. chunk({}, "tool_calls") .. "data: [DONE]\n\n"
  local r = client:interpret({ schema = X.schema(VIEW), tools = { { type = "function", ["function"] = { name = "overview" } } } },
                             { status = 200, body = body, headers = {} })
  local call = r.tool_calls and r.tool_calls[1]
  T.check(r.ok and call and call["function"].name == "overview", "a streamed tool call is read (%s)", tostring(r.err))
  T.eq(call and call["function"].arguments, '{"depth": 2}', "its arguments joined from the pieces")
end

-- synthesis: the kernel as "kernel" or as lines, values as one string or
-- under "options", gridDim/blockDim
do
  local synth = require("kopt.synth")
  local spec = require("kopt.spec").load("examples/synth/gelu.json")
  local src = "#define BLOCK 256\nextern \"C\" __global__ void synth_gelu_synth(float *__restrict__ y, " ..
    "const float *__restrict__ x, int n)\n{\n    int i = blockIdx.x * BLOCK + threadIdx.x;\n    if (i < n) { float v = x[i]; " ..
    "y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))); }\n}\n"
  local lines = {}
  for l in src:gmatch("(.-)\n") do lines[#lines + 1] = l end
  local knob = { name = "BLOCK", values = { 128, 256, 512 }, default = 256 }
  local launch = { grid = { "cdiv(n, BLOCK)", 1, 1 }, block = { "BLOCK", 1, 1 }, smem = 0 }
  local CASES = {
    kernel_string = { entry = "synth_gelu_synth", kernel = src, knobs = { knob }, launch = launch },
    source_lines = { entry = "synth_gelu_synth", source = lines, knobs = { knob }, launch = launch },
    values_string = { entry = "synth_gelu_synth", source = src,
                      knobs = { { name = "BLOCK", values = "128, 256, 512", default = 256 } }, launch = launch },
    options = { entry = "synth_gelu_synth", source = src,
                knobs = { { name = "BLOCK", options = { 128, 256, 512 }, default = 256 } }, launch = launch },
    griddim = { entry = "synth_gelu_synth", source = src, knobs = { knob },
                launch = { gridDim = { "cdiv(n, BLOCK)", 1, 1 }, blockDim = { "BLOCK", 1, 1 }, sharedMem = 0 } },
  }
  -- values as prose are no list: refused, not "64-512" as one value
  for _, prose in ipairs({ "64-512", "powers of two from 32 to 1024" }) do
    local v = { analysis = "a", entry = "synth_gelu_synth", source = src, launch = launch,
                knobs = { { name = "BLOCK", values = prose, default = 256 } } }
    local K = synth.parse(v, json.encode(v), { prefer = synth.entry_for(spec), avoid = "gelu_ref" })
    local K2, cwhy
    if K then K2, cwhy = synth.check(K, spec) end
    T.check(not K2 and tostring(cwhy):find("no allowed values", 1, true), "values %q are refused (%s)", prose, tostring(cwhy))
  end
  for name, v in pairs(CASES) do
    v.analysis = "a"
    local K, why = synth.parse(v, json.encode(v), { prefer = synth.entry_for(spec), avoid = "gelu_ref" })
    local K2, cwhy
    if K then K2, cwhy = synth.check(K, spec) end
    T.check(K2 and #K2.knobs == 1 and #K2.knobs[1].values == 3 and K2.launch.block[1] == "BLOCK",
            "synthesis (%s): %s", name, tostring(K and cwhy or why))
  end
end

-- the prompt about a state that is not the best (MCGS asks about any
-- state) says so, and asks for configurations other than the current one
-- when it lists no measurements
do
  local space = require("kopt.space").new({ knobs = { { name = "BLOCK_SIZE", values = { 64, 128 } } } })
  local ctx = { space = space, best = { key = "128" } }
  local function text(key)
    local v = X.view(ctx, { config = { BLOCK_SIZE = 64 }, key = key, result = { status = "ok", time_ms = 2 } }, { n = 2 })
    local msgs = X.messages({ name = "throughput", focus = "f" }, v)
    return msgs[#msgs].content
  end
  local other, best = text("64"), text("128")
  T.check(other:find("Current state (not the best measured) (JSON)", 1, true) and other:find("differ from the current one", 1, true),
          "a state that is not the best is named so:\n%s", other:sub(1, 400))
  T.check(best:find("Current best (JSON)", 1, true), "the best is the current best")
  -- under replay the GPU is the recording's, by name
  local v = X.view({ space = space, spec = { name = "s", recorded_device = "NVIDIA RTX A4000", device = { name = "NVIDIA H100 (assumed: no GPU attached)" } } },
                   { config = { BLOCK_SIZE = 64 }, key = "64" }, { n = 2 })
  local msgs = X.messages({ name = "throughput", focus = "f" }, v)
  T.check(msgs[#msgs].content:find("GPU: NVIDIA RTX A4000 (the recording's", 1, true), "the recording's GPU in the prompt")
end

return T.done()
