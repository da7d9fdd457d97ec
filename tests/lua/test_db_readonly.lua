-- `kopt db list/show` on an experience database in a folder kopt cannot
-- write to (a shared, read-only copy): SQLite opens a WAL file read-only
-- only if it can create FILE-shm beside it, so the listing failed with
-- "unable to open database file". It is now read as immutable.
-- A read-only folder needs a read-only bind mount (root ignores file
-- modes): where mount is not allowed, the test says it is skipped.
local T = require("testlib")
local tmp = T.tmpdir("db-readonly")
local DB = tmp .. "/w/e.db"
local code, _, err = T.run("random tests/data/specs/vector_add.json --backend replay:tests/data/vector_add_A4000.json " ..
                           "--budget 3 --out " .. tmp .. "/run -q", "KOPT_DB=" .. DB)
T.eq(code, 0, "a run that records into the database\n" .. err)
os.execute("mkdir -p '" .. tmp .. "/ro'")
local mounted = os.execute("mount --bind -o ro '" .. tmp .. "/w' '" .. tmp .. "/ro' 2>/dev/null")
if not mounted then
  os.execute("rm -rf '" .. tmp .. "'")
  return T.skip("a read-only bind mount is not allowed here (mount --bind -o ro)")
end
local ok, why = pcall(function()
  T.check(not os.execute("touch '" .. tmp .. "/ro/probe' 2>/dev/null"), "the mount is read-only")
  local c, out, e = T.run("db --db " .. tmp .. "/ro/e.db list", "")
  T.check(c == 0 and out:find("vector_add_test", 1, true), "db list in a read-only folder: %s%s", out, e)
  c, out, e = T.run("db --db " .. tmp .. "/ro/e.db show 1", "")
  T.check(c == 0 and out:find("block_size_x", 1, true), "db show in a read-only folder: %s%s", out, e)
end)
os.execute("umount '" .. tmp .. "/ro'")
T.check(ok, "%s", tostring(why))
os.execute("rm -rf '" .. tmp .. "'")
return T.done()
