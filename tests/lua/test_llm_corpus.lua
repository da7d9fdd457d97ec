-- The reply corpus (tests/data/llm_reply_corpus.json, made by
-- tools/make_reply_corpus.py): model replies carrying kernel edits in the
-- shapes different models produce. Each goes the way a live reply goes:
-- JSON extraction, proposal parsing, the edit applied to its kernel, the
-- device-code-only check. Reports the fraction of semantically valid edits
-- that apply to exactly the intended source (at least 95 % must), and that
-- every invalid one is refused.
local T = require("testlib")
local json = require("kopt.json")
local llm = require("kopt.llm")
local patch = require("kopt.patch")
local sys = require("kopt.sys")
local X = require("kopt.experts")

local corpus = json.decode(T.slurp("tests/data/llm_reply_corpus.json"))
T.check(type(corpus) == "table" and #corpus.entries > 50, "the corpus is missing or small")

local function norm_sha(text)
  local lines = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do
    lines[#lines + 1] = (l:gsub("^%s+", ""):gsub("%s+$", ""):gsub("%s+", " "))
  end
  while #lines > 0 and lines[#lines] == "" do lines[#lines] = nil end
  return sys.sha256(table.concat(lines, "\n"))
end

local view = { knobs = { { name = "BLOCK", values = { 64, 128, 256 }, family = "block" } }, edits = true }
local sources = {}

-- One reply -> the new source, or nil and why.
local function run_one(e)
  sources[e.kernel] = sources[e.kernel] or T.slurp(e.kernel)
  local base = sources[e.kernel]
  local value, err = llm.extract_json(e.reply)
  if not value then return nil, "extract: " .. err end
  local moves, rejected = X.parse(value, view, "corpus")
  if #moves == 0 then return nil, "parse: " .. ((rejected[1] or {}).why or "no move") end
  local mv = moves[1]
  local new, aerr = patch.apply_edit(base, mv.edit or mv.patch, {})
  if not new then return nil, "apply: " .. aerr end
  local ok, perr = patch.check_kernel_only(patch.diff(base, new), { knobs = { "BLOCK" } })
  if not ok then return nil, "policy: " .. perr end
  return new
end

local valid, applied, invalid, refused = 0, 0, 0, 0
local by_habit = {}
local t0 = sys.now()
for _, e in ipairs(corpus.entries) do
  local new, why = run_one(e)
  if e.valid then
    valid = valid + 1
    local good = new and norm_sha(new) == e.expect_norm_sha256
    if good then applied = applied + 1 else
      by_habit[e.habit] = (by_habit[e.habit] or 0) + 1
      print(string.format("not applied: %s (%s): %s", e.id, e.habit, new and "a different source" or why))
    end
  else
    invalid = invalid + 1
    if not new then refused = refused + 1 else print("accepted an invalid edit: " .. e.id .. " (" .. e.habit .. ")") end
  end
end
local frac = applied / math.max(1, valid)
print(string.format("corpus: %d of %d semantically valid edits apply (%.1f %%); %d of %d invalid ones refused; %.2f s",
                    applied, valid, 100 * frac, refused, invalid, sys.now() - t0))
for habit, n in pairs(by_habit) do print(string.format("  %d not applied: %s", n, habit)) end
T.check(frac >= 0.95, "only %.1f %% of the valid edits apply", 100 * frac)
T.eq(refused, invalid, "invalid edits refused")

-- Extraction is linear in the reply: 200 KB of brackets (nested, unclosed,
-- balanced, or many small broken objects) is rejected in milliseconds. The
-- bound is generous for slow and sanitized CI builds; the old quadratic extractor took
-- minutes on the first of these.
for name, text in pairs({
  nested_open = string.rep("[", 100000) .. string.rep("{", 100000),
  nested_balanced = string.rep("[", 100000) .. string.rep("]", 100000),
  many_broken = string.rep("{\"x\":}", 35000),
  open_then_close = string.rep("{[", 50000) .. string.rep("]", 50000),
  strings = string.rep("[\"a\\\"", 50000),
}) do
  local t = sys.now()
  local v = llm.extract_json(text)
  local dt = sys.now() - t
  T.check(v == nil or type(v) == "table", "%s: a value of the wrong type", name)
  T.check(dt < 3.0, "%s: 200 KB took %.3f s (quadratic?)", name, dt)
  print(string.format("extract %s (%d bytes): %.1f ms", name, #text, dt * 1000))
end

-- Near-JSON is repaired where it is unambiguous; a string is never touched.
local v = llm.extract_json('Answer:\n{"a": [1, 2,], "b": "x, ]", // note\n "c": /* c */ 3,}\nThanks.')
T.check(v and v.a[2] == 2 and v.b == "x, ]" and v.c == 3, "near-JSON repair")

-- Escapes JSON does not have: \' is a quote, \0 or \x41 a backslash written
-- once (C source in a patch string); valid escapes are left alone.
v = llm.extract_json([[{"analysis": "Don\'t unroll", "patch": "c = '\0'; s = \"\x41\"", "ok": "\u0041\n"}]])
T.check(v and v.analysis == "Don't unroll" and v.patch == "c = '\\0'; s = \"\\x41\"" and v.ok == "A\n",
        "invalid escapes repaired: %s", v and (tostring(v.analysis) .. " | " .. tostring(v.patch)) or "nil")

-- A fenced draft that the reply then corrects in prose is not its answer:
-- fenced and bare objects are read in the order they come.
do
  local accept = function(x) return type(x) == "table" and x.block_size_x ~= nil end
  local reply = 'My first idea:\n```json\n{"block_size_x": 128}\n```\nWait, 128 is slow here. Corrected final ' ..
                'answer:\n{"block_size_x": 256}\n'
  local got = llm.extract_json(reply, accept)
  T.check(got and got.block_size_x == 256, "a corrected answer after a fenced draft: got %s",
          tostring(got and got.block_size_x))
  -- a fenced answer followed by prose with no answer in it stays the answer
  got = llm.extract_json('```json\n{"block_size_x": 64}\n```\nThis keeps {"note": 1} in mind.', accept)
  T.check(got and got.block_size_x == 64, "a fenced answer before a fragment: got %s", tostring(got and got.block_size_x))
end

-- Errors name the first line that could not be matched, and why.
local src = "a\nb\nc\nd\n"
local _, err = patch.apply(src, "@@ -1,3 +1,3 @@\n a\n b\n-x\n+y\n")
T.check(err and err:find('line 3 of the hunk\'s old text, "x",', 1, true) and err:find("should follow source line 2", 1, true),
        "apply error: %s", tostring(err))
_, err = patch.apply_search_replace(src, { { search = "b\nq", replace = "z" } })
T.check(err and err:find('line 2 of the SEARCH part, "q",', 1, true), "search/replace error: %s", tostring(err))
return T.done()
