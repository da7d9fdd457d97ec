-- Reply shapes met in the wild that kopt had misread (tests/data/
-- llm_replies_unseen/, one reply per file: the kernel's whole source lost to
-- a quoted signature, one proposal per fence with all but the last dropped,
-- "no edit" sentences taken for edits, answers left in reasoning_content,
-- changes written as strings or lists, text escaped twice, other
-- search/replace dialects, a synthesized kernel outside its JSON). Each case
-- goes through the client's reply decoding and kopt.experts (or
-- kopt.synth), as a run's replies do; no server, no GPU.
local T = require("testlib")
local json = require("kopt.json")
local llm = require("kopt.llm")
local patch = require("kopt.patch")
local X = require("kopt.experts")
local synth = require("kopt.synth")

local DIR = "tests/data/llm_replies_unseen/"
local function slurp(p) local f = assert(io.open(p, "rb")) local s = f:read("a") f:close() return s end
local client = assert(llm.new({ base_url = "http://127.0.0.1:1/v1", model = "m", mode = "json_schema" }))

local function interpret(case, schema)
  local msg = case.message or { role = "assistant", content = case.content }
  local body = json.encode({ choices = { { index = 0, message = msg, finish_reason = "stop" } } })
  return client:interpret({ schema = schema }, { status = 200, body = body, headers = {} })
end

-- experts: the reply's moves, and each move's edit applied to the base
local function expert(name)
  local case = dofile(DIR .. name .. ".lua")
  local base = slurp(case.kernel or "tests/data/specs/vector_add.cu")
  local entry = case.entry or "vector_add"
  local view = { knobs = case.knobs or { { name = "block_size_x", values = { 64, 128, 256, 512 }, family = "block" } },
                 edits = true, entry = entry }
  local r = interpret(case, X.schema(view))
  if not r.ok then return { err = r.err } end
  local moves, rejected = X.parse(r.value, view, "t")
  local out = { moves = moves, rejected = rejected }
  for i, mv in ipairs(moves) do
    if mv.edit then
      local new, err = patch.apply_edit(base, mv.edit, { entry = entry })
      out[i] = { new = new, err = err }
    end
  end
  return out
end

-- The whole source, not a signature quoted after it, nor a diff or a
-- snippet taken for one
for _, name in ipairs({ "e09_signature_only_patch", "e10_signature_fenced_prose" }) do
  local o = expert(name)
  T.check(o[1] and not o[1].new and tostring(o[1].err):find("does not define the entry kernel", 1, true),
          "%s: a signature line alone is no kernel (%s)", name, tostring(o[1] and o[1].err))
end
local o = expert("e12_whole_then_signature_snippet")
T.check(o[1] and o[1].new and o[1].new:find("__launch_bounds__(256) vector_add", 1, true)
        and o[1].new:find("c[i] = a[i] + b[i];", 1, true), "e12: the whole kernel, not the signature after it (%s)",
        tostring(o[1] and (o[1].new or o[1].err)))
o = expert("e14_prose_then_indented_source")
T.check(o[1] and o[1].new and not o[1].new:find("kernel:", 1, true) and o[1].new:find("^%S"),
        "e14: the prose before an indented kernel is not source (%s)", tostring(o[1] and (o[1].new or o[1].err)))
o = expert("e16_diff_in_source_field")
T.check(o[1] and o[1].new and not o[1].new:find("+++", 1, true), "e16: a diff in \"source\" is applied as a diff (%s)",
        tostring(o[1] and (o[1].new or o[1].err)))
o = expert("e08_line_range_content")
T.check(o[1] and not o[1].new and tostring(o[1].err):find("braces do not pair up", 1, true),
        "e08: a snippet is not the whole kernel (%s)", tostring(o[1] and o[1].err))

-- An edit field that points at the kernel the reply wrote beside its JSON
do
  local case = dofile(DIR .. "e15_patch_refers_to_fence_below.lua")
  local base = slurp("tests/data/specs/vector_add.cu")
  local view15 = { knobs = { { name = "block_size_x", values = { 64, 128, 256, 512 }, family = "block" } },
                   edits = true, entry = "vector_add" }
  local r = interpret(case, X.schema(view15))
  local moves, _, notes = X.parse(r.value, view15, "t", r.content)
  local new = moves[1] and moves[1].edit and patch.apply_edit(base, moves[1].edit, { entry = "vector_add" })
  T.check(new and new:find("__launch_bounds__(512) vector_add", 1, true), "e15: the kernel beside the JSON is the edit (%s)",
          tostring(new))
  T.check(notes[1] and notes[1].note:find("beside its JSON", 1, true), "e15: and the note says so")
end

-- Edits in other shapes, applied
for name, want in pairs({ c07_close_fence_same_line = "c[i] = b[i] + a[i];\n", e13_plain_diff_then_snippet_fence = "__fadd_rn",
                          e02_sr_original_updated = "b[i] + a[i]", e03_sr_cline = "b[i] + a[i]",
                          c01_literal_backslash_n = "b[i] + a[i]", c01b_literal_backslash_n_source = "__launch_bounds__" }) do
  o = expert(name)
  T.check(o[1] and o[1].new and o[1].new:find(want, 1, true) and not o[1].new:find("`", 1, true),
          "%s: the edit applies (%s)", name, tostring(o[1] and (o[1].new or o[1].err) or (o.err or "no move")))
end

-- One proposal per fence or per line: all of them
for _, name in ipairs({ "j01_one_fence_per_proposal", "j02_jsonl_proposals" }) do
  o = expert(name)
  T.eq(o.moves and #o.moves, 2, name .. ": both proposals")
end

-- Changes as a string, a JSON string, lists, {from, to}, another case, a boolean
for _, name in ipairs({ "c02_changes_string", "c02b_changes_list_of_strings", "c03_changes_fromto",
                        "c04_changes_nested_fromto", "c06_knob_case", "j03_changes_json_string" }) do
  o = expert(name)
  T.check(o.moves and #o.moves == 1 and o.moves[1].changes.block_size_x == 256, "%s: block_size_x=256 (%s)", name,
          o.moves and json.encode(o.rejected) or tostring(o.err))
end
o = expert("j04_bool_toggle")
T.check(o.moves and #o.moves == 1 and o.moves[1].changes.USE_LDG == 1, "j04: true for a 0/1 knob (%s)",
        o.moves and json.encode(o.rejected) or tostring(o.err))

-- The answer in reasoning_content (content null or empty), or only inside
-- the reasoning block with a sentence after it
for _, name in ipairs({ "c05_reasoning_content_only", "c05b_reasoning_content_empty_content",
                        "c08_answer_inside_think_then_sentence" }) do
  o = expert(name)
  T.check(o.moves and #o.moves == 1 and o.moves[1].changes.block_size_x == 256, "%s: the answer is read (%s)", name,
          tostring(o.err))
end

-- "No edit" said in a sentence: a knob-only move, not an edit that fails
local view = { knobs = { { name = "block_size_x", values = { 64, 128, 256, 512 }, family = "block" } }, edits = true }
for _, t in ipairs({ "The kernel remains unchanged.", "Only the block size changes.", "Configuration change only",
                     "This is a knob-only change.", "Leave the kernel as is.", "N.A.", "Empty", "null;",
                     "Config-only change; no code edit.", "The source code does not need to change.",
                     "identical to the current kernel", "No diff — knob change only." }) do
  local moves = X.parse({ proposals = { { method = "more_threads", changes = { block_size_x = 256 }, patch = t } } }, view, "t")
  T.check(moves[1] and not moves[1].edit, "%q: no edit", t)
end
-- while a sentence that describes an edit stays one (a repair turn asks for it)
local moves = X.parse({ proposals = { { method = "vectorize", changes = {}, patch = "Use float4 loads in the main loop." } } },
                      view, "t")
T.check(moves[1] and moves[1].edit, "a described edit is still an edit (and fails to apply)")

-- Synthesis: the kernel outside the JSON, a fence closed on the code's
-- line, a signature quoted after the kernel, dim3-style launch dimensions
local spec = require("kopt.spec").load("examples/synth/gelu.json")
for name, note in pairs({ s01_source_outside_json = true, s02_fence_close_same_line = false,
                          s06_synth_whole_then_snippet = false, s07_launch_dim3_objects = false }) do
  local case = dofile(DIR .. name .. ".lua")
  local r = interpret(case, synth.schema())
  local K, notes = synth.parse(r.value, r.content)
  T.check(K ~= nil, "%s: parsed (%s)", name, tostring(notes))
  if K then
    local K2, why = synth.check(K, spec)
    T.check(K2 ~= nil, "%s: checked (%s)", name, tostring(why))
    T.check(not K.source:find("`", 1, true) and K.source:find("{", 1, true), "%s: the whole source", name)
    T.eq(#K.launch.grid, 3, name .. ": three grid dimensions")
    if note then T.check(notes[1] and notes[1]:find("outside the JSON", 1, true), "%s: says where", name) end
  end
end
return T.done()
