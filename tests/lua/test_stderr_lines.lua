-- Every line kopt writes to stderr on the way of an MPI run goes out in one
-- write: mpirun forwards each write() of a rank as it comes, so a line
-- written in pieces ("kopt: ", the text, "\n") arrived cut up and mixed
-- into stdout (the line of evaluations by rank, among others). Checked in
-- the source: no io.stderr:write call in the files an MPI run goes through
-- passes more than one argument.
local T = require("testlib")

local FILES = { "lua/kopt/cluster.lua", "lua/kopt/backends/mpi.lua", "lua/kopt/backends/replay.lua",
                "lua/kopt/backends/cuda.lua", "lua/kopt/run.lua", "lua/kopt/cli.lua", "lua/kopt/progress.lua",
                "lua/kopt/engine.lua", "lua/kopt/finish.lua" }

-- The lines of io.stderr:write calls with a comma at their top level
-- (strings and nested brackets skipped).
local function pieced_writes(src)
  local found, pos = {}, 1
  while true do
    local s, e = src:find("io%.stderr:write%(", pos)
    if not s then break end
    local depth, i, quote, commas = 1, e + 1, nil, 0
    while depth > 0 and i <= #src do
      local ch = src:sub(i, i)
      if quote then
        if ch == "\\" then i = i + 1 elseif ch == quote then quote = nil end
      elseif ch == '"' or ch == "'" then quote = ch
      elseif ch == "(" or ch == "{" or ch == "[" then depth = depth + 1
      elseif ch == ")" or ch == "}" or ch == "]" then depth = depth - 1
      elseif ch == "," and depth == 1 then commas = commas + 1 end
      i = i + 1
    end
    if commas > 0 then found[#found + 1] = select(2, src:sub(1, s):gsub("\n", "")) + 1 end
    pos = e + 1
  end
  return found
end

-- the scanner itself
T.eq(#pieced_writes('io.stderr:write("a", b, "\\n")'), 1, "a write in three pieces is found")
T.eq(#pieced_writes('io.stderr:write(string.format("%s, %s", a, b) .. "\\n")'), 0, "commas inside calls and strings")

local root = os.getenv("KOPT_SOURCE_DIR") or "."
for _, file in ipairs(FILES) do
  local lines = pieced_writes(T.slurp(root .. "/" .. file))
  T.check(#lines == 0, "%s: io.stderr:write in pieces at line %s", file, table.concat(lines, ", "))
end

os.exit(T.done())
