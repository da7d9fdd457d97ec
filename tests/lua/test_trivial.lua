-- kopt.trivial: the worker's words on trivial outputs (zeros, one value, a
-- copy of an input, a narrower float type) as the run's warning and note
-- lines, per output in the order given; unknown words are ignored.
local T = require("testlib")
local trivial = require("kopt.trivial")

T.eq(#trivial.describe(nil), 0, "no reply field: no lines")
T.eq(#trivial.describe(""), 0, "empty: no lines")

local lines = trivial.describe("y:copy:x y:zeros out:round:f16 y:round:bf16 out:round:bf16")
T.eq(#lines, 3, "a warning and a note for y, a note for out")
T.check(lines[1]:match("^warning: output 'y' passes both checks when a kernel writes a copy of input 'x', or all zeros"),
        "the warning names y's trivial outputs: %s", lines[1])
T.check(lines[1]:find("docs/TRUST.md", 1, true), "the warning says where to read more")
T.check(lines[2]:match("^note: output 'y': the tolerance accepts the reference rounded to bf16"), "y's note: %s", lines[2])
T.check(lines[3]:match("^note: output 'out': the tolerance accepts the reference rounded to f16 or bf16 in both checks, " ..
                       "so arithmetic in bf16 may pass too$"), "out's note: %s", lines[3])

lines = trivial.describe("c:constant:1 bogus c:unknown:thing")
T.eq(#lines, 1, "unknown words are ignored")
T.check(lines[1]:find("the value 1 everywhere", 1, true), "a constant output: %s", lines[1])
-- an in/out buffer's own input: an exact copy is stale (caught), a copy
-- moved by a rounding step is not, and the warning says so
lines = trivial.describe("y:copy:y0 y:copy:x", { args = { { name = "y0" }, { name = "y", init = "copy:y0" } } })
T.eq(#lines, 1, "in/out: one warning")
T.check(lines[1]:find("its own initial content ('y0') moved by a rounding step (an exact copy is caught as stale), " ..
                      "or a copy of input 'x'", 1, true), "in/out's own input: %s", lines[1])
return T.done()
