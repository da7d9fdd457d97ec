-- The experience database held by another process (a second connection
-- here: SQLite's locks hold between connections of one process too):
-- * held under SQLite's exclusive locking mode, the default file stopped
--   the run after the busy timeout ("database is locked", exit 2, no run
--   folder); the docs promise that a failing database never stops a run:
--   the default file is now given up with one line and the run goes on
--   without it, while a file named with --db or KOPT_DB stays an error;
-- * a signal while kopt waited on a writer's lock was answered only when
--   SQLite's 15 s busy wait ended (docker stop kills after 10 s): kopt now
--   waits in short slices and a signal between two ends the wait.
local T = require("testlib")
local db_mod = require("kopt.db")
local errors = require("kopt.errors")
local expdb = require("kopt.expdb")
local sys = require("kopt.sys")

local tmp = T.tmpdir("expdb-busy")
local path = tmp .. "/experience.db"
expdb.open(path):close()  -- the schema, in WAL mode

-- held under the exclusive locking mode: even a read waits
do
  local holder = assert(db_mod.open(path, { busy_ms = 0 }))
  assert(holder:exec("PRAGMA locking_mode=EXCLUSIVE"))
  assert(holder:exec("BEGIN EXCLUSIVE"))
  assert(holder:rows("SELECT count(*) AS n FROM runs"))
  local busy_ms = expdb.BUSY_MS
  expdb.BUSY_MS = 600
  local t0 = sys.now()
  local db, why = expdb.open(path, false, true)
  T.check(db == nil and tostring(why):find("database is locked", 1, true), "the default file, held: given up (%s)",
          tostring(why))
  T.check(sys.now() - t0 < 5, "after the busy timeout (%.1f s)", sys.now() - t0)
  local ok, err = pcall(expdb.open, path, false, false)
  T.check(not ok and errors.is_user_error(err) and err.msg:find("cannot be used: .*database is locked"),
          "a named file, held: an error naming it (%s)", tostring(err))
  -- a run's session on the default file goes on without it, in one line
  local default_path = expdb.path
  expdb.path = function() return path, true end
  local session = expdb.session({}, {})
  expdb.path = default_path
  T.eq(session, nil, "the run's session on the default file, held: none")
  expdb.BUSY_MS = busy_ms
  holder:exec("COMMIT")
  holder:close()
end

-- a writer holds the file (BEGIN IMMEDIATE) and a signal comes while kopt
-- waits for it: the wait ends within a slice, not after BUSY_MS
do
  local holder = assert(db_mod.open(path, { busy_ms = 0 }))
  assert(holder:exec("BEGIN IMMEDIATE"))
  local db = expdb.open(path)
  sys.install_signal_handlers()
  sys.kill_self("INT")
  local t0 = sys.now()
  local ok, err = pcall(db.exec, db, "BEGIN IMMEDIATE")
  local took = sys.now() - t0
  T.check(not ok and tostring(err):find("interrupted while waiting for it", 1, true),
          "the wait ends with the signal: %s", tostring(err))
  T.check(took < 3, "within a slice of the signal (%.1f s, the busy timeout is %d s)", took, expdb.BUSY_MS // 1000)
  db:close()
  holder:exec("COMMIT")
  holder:close()
end
T.done()
