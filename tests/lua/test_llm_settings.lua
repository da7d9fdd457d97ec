-- LLM settings are checked before anything runs, in one sentence naming
-- where the value came from (exit 2):
--  1. llm.config: KOPT_LLM_TIMEOUT, _RETRIES, _MAX_TOKENS, _TEMPERATURE,
--     _MODE, _MAX_TOKENS_FIELD out of range or not numbers ("30s" was
--     silently 120, -1 retries stopped the run mid-way, 1000 retries or a
--     mode "foo" silently cost MCGS every expert move), numbers not in
--     decimal ("0x10" was 16), a field name no server reads ("max_token"
--     was sent); good values read;
--     the experts' llm_max_tokens option (the run's token budget) is not
--     the reply cap;
--  2. through the binary: the experts strategy, MCGS with moves=experts,
--     and llm_deadline / llm_timeout of 0 or below as --opt (the deadline
--     passed without a request, the endpoint blamed; a timeout of 0 became
--     0.5 s).
local T = require("testlib")
local errors = require("kopt.errors")
local llm = require("kopt.llm")
local REC = "tests/data/convolution_A100.json"

-- 1. llm.config
local function config_error(env)
  local ok, err = pcall(llm.config, {}, function(name) return env[name] end)
  if ok then return nil end
  T.check(errors.is_user_error(err), "a usage error, got: %s", tostring(err))
  return tostring(err)
end
for _, case in ipairs({ { "KOPT_LLM_TIMEOUT", "30s" }, { "KOPT_LLM_TIMEOUT", "0" }, { "KOPT_LLM_TIMEOUT", "-5" },
                        { "KOPT_LLM_TIMEOUT", "abc" }, { "KOPT_LLM_RETRIES", "-1" }, { "KOPT_LLM_RETRIES", "1000" },
                        { "KOPT_LLM_RETRIES", "1.5" }, { "KOPT_LLM_MAX_TOKENS", "0" },
                        { "KOPT_LLM_TEMPERATURE", "7" }, { "KOPT_LLM_MODE", "foo" },
                        { "KOPT_LLM_MAX_TOKENS_FIELD", "max tokens" }, { "KOPT_LLM_MAX_TOKENS_FIELD", "max_token" },
                        { "KOPT_LLM_MAX_TOKENS", "0x10" }, { "KOPT_LLM_TIMEOUT", "0x1E" } }) do
  local name, value = case[1], case[2]
  local err = config_error({ [name] = value })
  T.check(err and err:find(name .. "=" .. value, 1, true), "%s=%s: refused by name, got: %s", name, value,
          tostring(err))
end
do
  local cfg = llm.config({}, function(name)
    return ({ KOPT_LLM_TIMEOUT = "30", KOPT_LLM_RETRIES = "0", KOPT_LLM_MAX_TOKENS = "512",
              KOPT_LLM_TEMPERATURE = "0.5", KOPT_LLM_MODE = "none", KOPT_LLM_MAX_TOKENS_FIELD = "max_tokens" })[name]
  end)
  T.eq(cfg.timeout_s, 30, "a good timeout")
  T.eq(cfg.max_retries, 0, "no retries")
  T.eq(cfg.max_tokens, 512, "a reply cap")
  T.eq(cfg.temperature, 0.5, "a temperature")
  T.eq(cfg.mode, "none", "a mode")
  T.eq(cfg.max_tokens_field, "max_tokens", "a field")
  local err = select(2, pcall(llm.config, { llm_timeout = 0 }, function() return nil end))
  T.check(tostring(err):find("--opt llm_timeout=0", 1, true), "an option is named as one: %s", tostring(err))
  T.eq(llm.config({ llm_max_tokens = 0 }, function() return nil end).max_tokens, 4096,
       "the experts' token budget option is not the reply cap")
end

-- 2. through the binary
local tmp = T.tmpdir("llm_settings")
local URL = "KOPT_LLM_BASE_URL=http://127.0.0.1:9/v1 "
-- { folder, command (run into the folder), environment, the name said }
local runs = {
  { "a", "experts --backend replay:" .. REC, URL .. "KOPT_LLM_RETRIES=-1", "KOPT_LLM_RETRIES" },
  { "b", "experts --backend replay:" .. REC, URL .. "KOPT_LLM_MAX_TOKENS=0", "KOPT_LLM_MAX_TOKENS" },
  { "b2", "mcgs --backend replay:" .. REC .. " --budget 20 --opt moves=rules,experts", URL .. "KOPT_LLM_MODE=foo",
    "KOPT_LLM_MODE" },
  { "c", "mcgs --backend replay:" .. REC .. " --budget 20 --opt moves=rules,experts", URL .. "KOPT_LLM_RETRIES=1000",
    "KOPT_LLM_RETRIES" },
  { "d", "mcgs --backend replay:" .. REC .. " --budget 20 --opt moves=rules,experts", URL .. "KOPT_LLM_TIMEOUT=30s",
    "KOPT_LLM_TIMEOUT" },
  { "e", "mcgs --backend replay:" .. REC .. " --budget 20 --opt moves=rules,experts", URL .. "KOPT_LLM_TIMEOUT=0",
    "KOPT_LLM_TIMEOUT" },
  { "f", "experts --backend replay:" .. REC .. " --opt llm_deadline=0", URL, "llm_deadline" },
  { "g", "experts --backend replay:" .. REC .. " --opt llm_deadline=-3", URL, "llm_deadline" },
  { "h", "experts --backend replay:" .. REC .. " --opt llm_timeout=0", URL, "llm_timeout" },
  { "i", "experts --backend replay:" .. REC .. " --opt llm_max_tokens=-1", URL, "llm_max_tokens" },
  { "j", "synthesize examples/synth/row_softmax.json --opt llm_deadline=0", URL, "llm_deadline" },
}
for _, r in ipairs(runs) do
  local out_dir = tmp .. "/" .. r[1]
  local code, _, err = T.run(r[2] .. " --out " .. out_dir, r[3])
  T.eq(code, 2, r[2] .. " with " .. r[3] .. ": exit 2")
  local line = T.one_sentence(err, r[4])
  T.check(line:find(r[4], 1, true), "%s: the sentence names it: %s", r[4], line)
  T.check(not T.exists(out_dir .. "/events.jsonl"), "%s: nothing ran", r[4])
end

os.execute("rm -rf '" .. tmp .. "'")
return T.done()
