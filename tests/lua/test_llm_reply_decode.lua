-- A chat reply's body to a value, offline (Client:interpret on a canned
-- response): content sent as a list of parts, an empty refusal field beside
-- an answer, a draft object inside a reasoning block (<think>, or the
-- harmony format's analysis channel), a model that corrects itself in
-- prose, a multi-line string with raw newlines after prose; and the kernel
-- source of a synthesis reply in the fences models use.
local json = require("kopt.json")
local llm = require("kopt.llm")
local synth = require("kopt.synth")
local X = require("kopt.experts")
local T = require("testlib")

local client = assert(llm.new({ base_url = "http://127.0.0.1:1/v1", model = "m", mode = "json_schema" }))
local view = { knobs = { { name = "block_size_x", values = { 128, 256, 512, 1024 }, family = "block" } }, edits = true }
local req = { schema = X.schema(view) }

local function reply(msg)
  local body = json.encode({ choices = { { index = 0, message = msg, finish_reason = "stop" } } })
  return client:interpret(req, { status = 200, body = body, headers = {} })
end
local function answer(bx, note)
  return json.encode({ analysis = note or "a", proposals = { { method = "m", changes = { block_size_x = bx }, reason = "r" } } })
end
local function bx_of(r)
  if not T.check(r.ok, "reply not ok: %s %s", tostring(r.kind), tostring(r.err)) then return nil end
  return r.value.proposals[1].changes.block_size_x
end

-- content parts: the text parts joined, the thinking part left out
T.eq(bx_of(reply({ role = "assistant", content = { { type = "thinking", thinking = answer(1024) },
                                                     { type = "text", text = answer(256) } } })), 256, "content parts")
-- an empty refusal beside an answer is no refusal; a real one is
T.eq(bx_of(reply({ role = "assistant", content = answer(256), refusal = "" })), 256, "empty refusal")
local r = reply({ role = "assistant", content = answer(256), refusal = "I cannot help with that." })
T.check(not r.ok and r.kind == "refusal", "a refusal was not reported")

-- reasoning drafts never win over the answer after them
for _, text in ipairs({
  "<think>maybe " .. answer(1024, "draft") .. " no, too many registers</think>\n" .. answer(256),
  "thinking without the opening tag: " .. answer(1024, "draft") .. "</think>\n\nFinal:\n" .. answer(256),
  "<|channel|>analysis<|message|>" .. answer(1024, "draft") .. "<|end|><|start|>assistant<|channel|>final<|message|>" ..
    answer(256),
  "First thought: " .. answer(1024, "draft") .. "\nActually, that spills. Final: " .. answer(256),
}) do
  T.eq(bx_of(reply({ role = "assistant", content = text })), 256, "draft before the answer: " .. text:sub(1, 40))
end
-- an answer inside the reasoning block alone is still found
T.eq(bx_of(reply({ role = "assistant", content = "<think>" .. answer(512) .. "</think>" })), 512, "answer in think only")

-- a patch with raw newlines in its string, after a line of prose: the whole
-- proposal, not the inner "changes" object
local raw = 'Answer:\n{"analysis":"a","proposals":[{"method":"m","changes":{"block_size_x":256},"reason":"r",' ..
            '"patch":"@@ -5,2 +5,2 @@\n     if (i < n)\n-        c[i] = a[i] + b[i];\n+        c[i] = __fadd_rn(a[i], b[i]);\n"}]}'
local rr = reply({ role = "assistant", content = raw })
T.eq(bx_of(rr), 256, "raw newlines")
T.check(rr.ok and rr.value.proposals[1].patch:find("__fadd_rn", 1, true), "raw newlines: the patch was lost")

-- a Python dict printed instead of JSON (single quotes, None, True)
local py = reply({ role = "assistant", content = "Here you go:\n{'analysis': 'it\\'s \"memory\" bound', " ..
                   "'proposals': [{'method': 'm', 'changes': {'block_size_x': 256}, 'reason': None, 'keep': True}]}" })
T.eq(bx_of(py), 256, "python literal")
T.eq(py.ok and py.value.analysis, "it's \"memory\" bound", "python literal: the string's quotes")

-- a reply with no proposals reads as none (the caller falls back)
local moves, rejected = X.parse(llm.extract_json("I would raise the block size, see [1]."), view, "t")
T.eq(#moves, 0, "prose with [1]: moves")
T.eq(rejected[1] and rejected[1].index, 0, "prose with [1]: the whole reply is rejected")

-- a tool call written as text in the Llama format is seen as one (the
-- server did not parse it: kopt then inlines what the tools would give)
local tools = require("kopt.tools")
T.check(tools.text_tool_call({ content = '<function=overview>{"detail": 1}</function>' }),
        "a <function=...> tool call in the text is not recognised")
T.check(not tools.text_tool_call({ content = "the function = f(x) is fast" }), "prose taken for a tool call")
-- gpt-oss writes its calls in the harmony format, or as a JSON object
-- naming functions.NAME
T.check(tools.text_tool_call({ content = "<|channel|>commentary to=functions.overview <|constrain|>json<|message|>{}<|call|>" }),
        "a harmony tool call")
T.check(tools.text_tool_call({ content = "x", value = { name = "functions.overview", arguments = {} } }),
        "a JSON call naming functions.overview")

-- synthesis: the source inside its JSON string, in any fence
local K = 'extern "C" __global__ void k(float *y) { y[threadIdx.x] = 1.0f; }\n'
for _, wrap in ipairs({ "```cuda-c\n%s```", "~~~cuda\n%s~~~", "Here is the kernel:\n```cuda\n%s```\nIt is fast.",
                        "Old:\n```\nint unused;\n```\nNew:\n```cuda\n%s```" }) do
  local parsed, why = synth.parse({ entry = "k", source = wrap:format(K), launch = { grid = { 1 }, block = { 32 } } })
  T.check(parsed, "synth %q: %s", wrap, tostring(why))
  T.eq(parsed.source, K, "synth source in " .. wrap:gsub("\n", "\\n"))
end

-- proposals in other shapes models write: keyed by a label, sent as a JSON
-- string, changes as a list of {knob, value}; an empty list says so
do
  local function sizes(value)
    local found, rej = X.parse(value, view, "t")
    local out = {}
    for _, m in ipairs(found) do out[#out + 1] = tostring(m.changes.block_size_x) end
    return table.concat(out, ","), rej[1] and rej[1].why
  end
  T.eq(sizes({ proposals = { p2 = { method = "b", changes = { block_size_x = 512 } },
                             p1 = { method = "a", changes = { block_size_x = 256 } } } }), "256,512", "keyed proposals")
  T.eq(sizes({ proposals = '[{"method": "m", "changes": {"block_size_x": 1024}}]' }), "1024", "proposals as a string")
  T.eq(sizes({ proposals = { { method = "m", changes = { { knob = "block_size_x", value = 256 } } } } }), "256",
       "changes as a list of {knob, value}")
  local _, why = sizes({ proposals = {} })
  T.eq(why, "an empty proposals list (nothing proposed)", "an empty proposals list")
end

-- a failed request names what the server said, in the shapes servers use
for _, case in ipairs({
  { 400, '{"error": {"message": "bad schema", "type": "invalid_request_error"}}', "HTTP 400: bad schema" },
  { 404, '{"error": "model \\"m\\" not found, try pulling it first"}', 'HTTP 404: model "m" not found, try pulling it first' },
  { 400, '{"object": "error", "message": "maximum context length is 4096 tokens"}',
    "HTTP 400: maximum context length is 4096 tokens" },
  { 422, '{"detail": "field required"}', "HTTP 422: field required" },
  { 502, "<html><body><h1>502 Bad Gateway</h1></body></html>", "HTTP 502: 502 Bad Gateway" },
  { 500, "", "HTTP 500" },
}) do
  local got = client:interpret(req, { status = case[1], body = case[2], headers = {} })
  T.eq(got.err, case[3], "the server's message of an HTTP " .. case[1])
end

return T.done()
