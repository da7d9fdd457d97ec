-- kopt.relabel: free-form method labels onto the canonical set O.
-- The corpus tests/data/method_labels.json (113 labels as models write them,
-- each with the method a reader would give it) maps with the offline
-- fallback at >= 90 % (it maps all of them today; the floor leaves room for
-- synonym-table changes that trade one label for another, not for a
-- regression of the matcher). Then: a label that matches nothing becomes a
-- new method of O; mapping is idempotent and deterministic; O persists in
-- its file, and a second run (another process) sees the first one's new
-- methods, also those named from a label starting with a digit, and a file
-- of an older build naming one with the digit first; KOPT_METHODS=off writes nothing; the LLM path validates its
-- answer and falls back offline on a bad one; the run's LLM line counts the
-- relabel request's tokens beside the experts'.
local T = require("testlib")
local cjson = require("cjson")
local R = require("kopt.relabel")

local corpus = cjson.decode(T.slurp("tests/data/method_labels.json")).labels
T.check(#corpus >= 50, "corpus of %d labels", #corpus)
local O = R.new({ path = false })
local seed_names = {}
for _, n in ipairs(O:names()) do seed_names[n] = true end
local hit, misses = 0, {}
for _, e in ipairs(corpus) do
  T.check(seed_names[e[2]], "corpus expects %s, not a seed method", e[2])
  local m = O:canonical(e[1])
  if m == e[2] then hit = hit + 1 else misses[#misses + 1] = string.format("%q -> %s (want %s)", e[1], m, e[2]) end
end
local acc = hit / #corpus
io.stdout:write(string.format("relabel accuracy (offline): %d/%d = %.1f %%\n", hit, #corpus, 100 * acc))
for _, m in ipairs(misses) do io.stdout:write("  miss: " .. m .. "\n") end
T.check(acc >= 0.90, "offline relabel accuracy %.3f below 0.90", acc)

-- the two old vocabularies are one: rule names are aliases of expert names
T.eq(O:canonical("tile_k_up"), "tile_up", "rule name")
T.eq(O:canonical("tile_up"), "tile_up", "expert name")
T.eq(O:canonical("block_size_x_down"), "fewer_threads", "rule name with axis")
T.eq(O:canonical("toggle_async"), "async_copy", "toggle of async")
T.eq(O:canonical("nb_up"), "step_up", "rule move on an unknown knob")
T.eq(O:canonical(""), "other", "empty label")
-- a word ending in "ss" is no plural: MCGS's "cross" move stays "cross"
T.eq(R.normalize("cross"), "cross", "cross is not stemmed to cros")
T.eq(R.normalize("crosses"), "cross", "crosses is cross")
T.eq(O:canonical(nil), "other", "no label")

-- a new method, idempotent, deterministic
local label = "Hilbert-curve rasterization of thread blocks"
local n0 = #O:names()
local m1, how1 = O:canonical(label)
T.eq(how1, "new", "unmatched label is new")
T.eq(#O:names(), n0 + 1, "O grew by one")
local m2, how2 = O:canonical(label)
T.eq(m2, m1, "idempotent")
T.eq(how2, "exact", "second time is an exact match")
T.eq(#O:names(), n0 + 1, "O did not grow again")
T.eq(R.new({ path = false }):canonical(label), m1, "deterministic across sets")
T.eq(O:canonical("hilbert curve rasterization"), m1, "a variant maps onto the new method")

-- experts accept any label: the move carries the canonical method and the label
local X = require("kopt.experts")
local view = { knobs = { { name = "BLOCK_K", values = { 16, 32, 64 } } }, config = { BLOCK_K = 16 } }
local mvs = X.parse({ proposals = {
  { method = "Increase BLOCK_K to 64", changes = { BLOCK_K = 64 }, reason = "r" },
  { method = "tile_up", changes = { BLOCK_K = 32 }, reason = "r" },
  { changes = { BLOCK_K = 32 }, reason = "no method" },
} }, view, "t")
T.eq(#mvs, 3, "three moves")
T.eq(mvs[1].method, "tile_up", "free label canonicalized")
T.eq(mvs[1].label, "Increase BLOCK_K to 64", "label kept")
T.eq(mvs[2].method, "tile_up", "canonical name kept")
T.eq(mvs[2].label, nil, "no label when it is the method")
T.eq(mvs[3].method, "other", "no method is other")

-- persistence: a second process sees the first one's new methods
local tmp = T.tmpdir("relabel")
local file = tmp .. "/cache/methods.json"
local script = tmp .. "/map.lua"
T.write(script, [[
local R = require("kopt.relabel")
local O = R.new()
for _, l in ipairs(arg) do
  local m, how = O:canonical(l)
  io.stdout:write(m, " ", how, "\n")
end
]])
local code, out = T.run("script " .. script .. " 'Hilbert-curve rasterization of thread blocks'",
                        "KOPT_METHODS=" .. file)
T.eq(code, 0, "first run")
T.check(out:find("new", 1, true), "first run adds the method: %s", out)
local saved = cjson.decode(T.slurp(file))
T.eq(saved.version, 1, "file version")
T.eq(saved.methods[1].name, m1, "file holds the new method")
code, out = T.run("script " .. script .. " 'hilbert curve rasterization' 'Increase BLOCK_K to 64'",
                  "KOPT_METHODS=" .. file)
T.eq(code, 0, "second run")
T.check(out:find(m1 .. " exact", 1, true) or out:find(m1 .. " overlap", 1, true),
        "second run sees the first run's method: %s", out)
T.check(out:find("tile_up", 1, true), "seed still maps: %s", out)
-- a label whose first word starts with a digit: its new method is named so
-- that the file loads it again, and a file of an older build that named it
-- with the digit first still loads
local dfile = tmp .. "/digit/methods.json"
local dm, dhow = R.new({ path = dfile }):canonical("2CTA cluster launch")
T.eq(dhow, "new", "digit label adds a method")
T.check(dm:match("^%a"), "new method name starts with a letter: %s", dm)
local D2 = R.new({ path = dfile })
T.check(D2.by_name[dm] ~= nil, "second set loads %s", dm)
local dm2, dhow2 = D2:canonical("2CTA cluster launch")
T.eq(dm2, dm, "second set maps the label onto the saved method")
T.eq(dhow2, "exact", "second set does not add it again")
local lfile = tmp .. "/legacy_methods.json"
T.write(lfile, cjson.encode({ version = 1, methods = { { name = "2cta_cluster_launch", aliases = { "2CTA cluster launch" } } } }))
local L = R.new({ path = lfile })
local lm, lhow = L:canonical("2CTA cluster launch")
T.eq(lm, dm, "an older file's method loads under today's name")
T.eq(lhow, "exact", "an older file's method is no new one")
T.eq(L:canonical("2cta_cluster_launch"), dm, "the older name maps onto it too")
-- opt-out
local off = tmp .. "/off.json"
code = T.run("script " .. script .. " 'some brand new trick'", "KOPT_METHODS=off XDG_CACHE_HOME=" .. tmp .. "/xdg")
T.eq(code, 0, "run with KOPT_METHODS=off")
T.check(not T.exists(off) and not T.exists(tmp .. "/xdg/kopt/methods.json"), "KOPT_METHODS=off wrote a file")
T.eq(R.path(function(k) return ({ XDG_CACHE_HOME = "/x" })[k] end), "/x/kopt/methods.json", "xdg path")
T.eq(R.path(function(k) return ({ HOME = "/h" })[k] end), "/h/.cache/kopt/methods.json", "home path")

-- the LLM path: a valid answer is used, a bad one falls back offline
local function client(value)
  return { chat_many = function(_, reqs)
    T.eq(reqs[1].tag, "relabel", "request tag")
    return { { ok = true, value = value } }
  end }
end
local P = R.new({ path = false })
local map, detail, why = P:map({ "software prefetch into L2", "tile_k_up" },
  client({ mapping = { { label = "software prefetch into L2", method = "l2_prefetch", new = true } } }))
T.eq(why, nil, "llm answer used")
T.eq(map["software prefetch into L2"], "l2_prefetch", "llm new method")
T.eq(map["tile_k_up"], "tile_up", "rule name offline beside the llm")
T.eq(detail[1].how, "llm_new", "detail says llm")
T.check(P.by_name.l2_prefetch, "llm method added to O")
map, detail, why = P:map({ "Increase BLOCK_K to 64" },
  client({ mapping = { { label = "something else", method = "tile_up", new = false } } }))
T.check(why ~= nil, "bad llm answer rejected")
T.eq(map["Increase BLOCK_K to 64"], "tile_up", "fallback offline")
T.eq(detail[1].how, "exact", "fallback detail")
map, detail, why = P:map({ "Increase BLOCK_K to 64" },
  client({ mapping = { { label = "Increase BLOCK_K to 64", method = "Not A Name!", new = true } } }))
T.check(why ~= nil, "bad method name rejected")
T.eq(map["Increase BLOCK_K to 64"], "tile_up", "fallback offline on a bad name")
T.check(detail[1].how ~= "llm", "fallback detail on a bad name")

-- the LLM's mapping onto an existing method is learned as an alias, persists,
-- and a later set maps the label offline the same way
local afile = tmp .. "/aliases/methods.json"
local A = R.new({ path = afile })
map = A:map({ "zorp the quux" }, client({ mapping = { { label = "zorp the quux", method = "fuse_loops", new = false } } }))
T.eq(map["zorp the quux"], "fuse_loops", "llm maps onto an existing method")
local A2 = R.new({ path = afile })
local am, ahow = A2:canonical("zorp the quux")
T.eq(am, "fuse_loops", "learned alias persists")
T.eq(ahow, "exact", "learned alias is an exact match")
T.eq(R.new({ path = false }):canonical("zorp the quux") ~= "fuse_loops", true, "not without the file")

-- experts ask_all with relabel=llm: one relabel call sees the replies' labels
-- before they are parsed
local seen_tags = {}
local fake = { chat_many = function(_, reqs)
  local replies = {}
  for i, rq in ipairs(reqs) do
    seen_tags[#seen_tags + 1] = rq.tag
    if rq.tag == "relabel" then
      replies[i] = { ok = true, value = { mapping = { { label = "grault the garply", method = "tile_up", new = false } } } }
    else
      replies[i] = { ok = true, value = { analysis = "a", proposals = {
        { method = "grault the garply", changes = { BLOCK_K = 64 }, reason = "r" } } } }
    end
  end
  return replies
end }
local E = { name = "e1", heuristic = function() return {} end, prompt = function() return { { role = "user", content = "x" } } end,
            parse = function(value, v) return X.parse(value, v, "e1") end }
local shared_before = R.shared():canonical("grault the garply")
T.check(shared_before ~= "tile_up", "offline alone does not know the label")
local answers = X.ask_all({ E }, view, nil, fake, { relabel = "llm" })
T.check(table.concat(seen_tags, ","):find("relabel", 1, true), "a relabel request was sent: %s", table.concat(seen_tags, ","))
T.eq(answers[1].moves[1].method, "tile_up", "the LLM's mapping is used for the proposal")

-- the run's LLM line names the relabel request's tokens beside the experts'
-- (the experts strategy and MCGS's expert moves name their experts alone)
do
  local llm = require("kopt.llm")
  local function tokens(n) return { requests = 1, failures = 0, total_tokens = n, prompt_tokens = n, completion_tokens = 0 } end
  local usage_client = { usage = { requests = 4, failures = 0, total_tokens = 1361, prompt_tokens = 1361,
                                   completion_tokens = 0 },
                         by_tag = { throughput = tokens(120), memory = tokens(120), robustness = tokens(120),
                                    relabel = tokens(1001) } }
  local ctx = {}
  llm.record_usage(ctx, usage_client, { "throughput", "memory", "robustness" })
  T.check(ctx.summary_lines[1]:find("1361 tokens (1361 prompt, 0 completion); throughput 120, memory 120, " ..
                                    "robustness 120, relabel 1001", 1, true), "the LLM line: %s", ctx.summary_lines[1])
  T.eq(ctx.llm_usage.experts.relabel.total_tokens, 1001, "results.json: the relabel tokens")
end
return T.done()
