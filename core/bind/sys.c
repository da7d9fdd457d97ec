/* kopt.sys: clocks, directories, hashing, signals, terminal facts, checked
 * durable writes and the run folder's lock for Lua. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "memlimit.h"
#include "sha256.h"
#include "sys.h"

/* sys.memory() -> bytes held, the limit asked for (0: none), whether an
 * allocation was refused; sys.memory_grant() -> whether the reserve was
 * added now; sys.memory_rearm() -> whether the limit went back to its base
 * (core/memlimit.h). Without kopt's allocator (a test harness): 0, 0, false. */
static struct kopt_memlimit *memlimit_of(lua_State *L)
{
	void *ud = NULL;
	return lua_getallocf(L, &ud) == kopt_memlimit_alloc ? ud : NULL;
}

static int l_memory(lua_State *L)
{
	struct kopt_memlimit *m = memlimit_of(L);
	lua_pushinteger(L, m ? (lua_Integer)m->used : 0);
	lua_pushinteger(L, m ? (lua_Integer)m->base : 0);
	lua_pushboolean(L, m ? m->hit : 0);
	return 3;
}

static int l_memory_rearm(lua_State *L)
{
	struct kopt_memlimit *m = memlimit_of(L);
	lua_pushboolean(L, m ? kopt_memlimit_rearm(m) : 0);
	return 1;
}

static int l_memory_grant(lua_State *L)
{
	struct kopt_memlimit *m = memlimit_of(L);
	lua_pushboolean(L, m ? kopt_memlimit_grant(m) : 0);
	return 1;
}

static int l_now(lua_State *L)
{
	lua_pushnumber(L, kopt_sys_now());
	return 1;
}

static int l_utc_iso(lua_State *L)
{
	char buf[32];
	kopt_sys_utc_iso(buf, sizeof buf);
	lua_pushstring(L, buf);
	return 1;
}

static int l_mkdir_p(lua_State *L)
{
	char err[512];
	if (kopt_sys_mkdir_p(kopt_bind_check_text(L, 1), err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	return kopt_bind_ok(L);
}

/* stat(path) -> "file"|"dir"|"other", size  or nil when absent */
static int l_stat(lua_State *L)
{
	struct stat st;
	if (stat(kopt_bind_check_text(L, 1), &st) != 0) {
		return kopt_bind_fail(L, strerror(errno));
	}
	lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : "other");
	lua_pushinteger(L, (lua_Integer)st.st_size);
	return 2;
}

static int l_list_dir(lua_State *L)
{
	const char *path = kopt_bind_check_text(L, 1);
	DIR *d = opendir(path);
	if (d == NULL) {
		return kopt_bind_failf(L, "%s: %s", path, strerror(errno));
	}
	lua_newtable(L);
	lua_Integer i = 1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		lua_pushstring(L, e->d_name);
		lua_rawseti(L, -2, i++);
	}
	closedir(d);
	return 1;
}

static int l_realpath(lua_State *L)
{
	char *p = realpath(kopt_bind_check_text(L, 1), NULL);
	if (p == NULL) {
		return kopt_bind_fail(L, strerror(errno));
	}
	lua_pushstring(L, p);
	free(p);
	return 1;
}

static int l_sha256(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	char hex[65];
	kopt_sha256_hex(s, n, hex);
	lua_pushstring(L, hex);
	return 1;
}

static int l_isatty(lua_State *L)
{
	lua_pushboolean(L, isatty((int)luaL_checkinteger(L, 1)));
	return 1;
}

static int l_getpid(lua_State *L)
{
	lua_pushinteger(L, getpid());
	return 1;
}

/* sys.die_with_parent(pid): this process is killed when its parent exits (a
 * kopt compare child whose parent was killed by SIGKILL must not run on for
 * minutes); false when the parent is not pid any more (it died before). */
static int l_die_with_parent(lua_State *L)
{
	lua_Integer parent = luaL_checkinteger(L, 1);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	lua_pushboolean(L, getppid() == (pid_t)parent);
	return 1;
}

static int l_cpu_count(lua_State *L)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	lua_pushinteger(L, n > 0 ? n : 1);
	return 1;
}

static int l_sleep(lua_State *L)
{
	double s = luaL_checknumber(L, 1);
	/* (NaN fails both comparisons) */
	luaL_argcheck(L, s >= 0 && s <= 1e6, 1, "expected seconds from 0 to 1e6");
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
	return 0;
}

/* --- signals ---------------------------------------------------------
 * A signal sets a flag the engine polls between evaluations. If the strategy
 * does not give control back to the engine in time (stuck in a loop), a hook
 * set from the signal handler (as lua.c's `laction` does) raises the
 * interruption error inside its code a second after the signal; a second
 * signal raises it at once, in whatever Lua code runs. Code outside the
 * strategy (the engine, a backend waiting for a GPU batch) is left to reach
 * the poll by itself. Polling with sys.interrupted() answers the signal and
 * removes the hook. */
#define INTERRUPT_GRACE_S 1.0
/* A strategy that keeps running after the interruption was raised in it
 * (its pcall caught the error, its loop runs in a coroutine the hook does
 * not watch, or it is inside one long C call) is ended this many seconds
 * after the signal: everything measured is in events.jsonl already, and
 * the message says how to continue. */
#define INTERRUPT_HARD_S 5
static lua_State *main_thread;
static int interrupt_key;
static volatile sig_atomic_t in_strategy, answered;
static double raised_at; /* when the hook last raised the interruption, 0: never */

static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	if (raised_at > 0.0) {
		/* raised before and caught by the strategy: again, a grace later */
		if (!in_strategy || kopt_sys_now() - raised_at < INTERRUPT_GRACE_S)
			return;
	} else {
		int urgent = kopt_sys_interrupt_overdue(HUGE_VAL);
		if (!urgent && !(in_strategy && kopt_sys_interrupt_overdue(INTERRUPT_GRACE_S)))
			return;
		kopt_sys_acknowledge_interrupt();
	}
	/* the hook stays until the engine answers (sys.interrupted()) */
	raised_at = kopt_sys_now();
	lua_rawgetp(L, LUA_REGISTRYINDEX, &interrupt_key);
	lua_error(L);
}

static void on_alarm(int sig)
{
	(void)sig;
	if (answered)
		return;
	if (in_strategy) {
		static const char msg[] =
		    "kopt: the strategy did not stop within 5 s of the signal; exiting. Everything "
		    "measured is in the run's events.jsonl: continue with --resume\n";
		ssize_t w = write(2, msg, sizeof msg - 1);
		(void)w;
		_exit(130);
	}
	alarm(1); /* engine or backend code: it polls by itself; look again */
}

/* Called in the signal handler: lua_sethook and alarm are async-signal-safe. */
static void on_signal(void)
{
	if (main_thread != NULL)
		lua_sethook(main_thread, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT,
			    1000);
	if (!answered)
		alarm(INTERRUPT_HARD_S);
}

static int l_install_signal_handlers(lua_State *L)
{
	lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
	main_thread = lua_tothread(L, -1);
	lua_pop(L, 1);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	kopt_sys_install_signal_handlers(on_signal);
	return 0;
}

static int l_interrupted(lua_State *L)
{
	int sig = kopt_sys_interrupted();
	if (sig != 0) {
		kopt_sys_acknowledge_interrupt();
		if (main_thread != NULL)
			lua_sethook(main_thread, NULL, 0, 0);
		answered = 1;
		raised_at = 0.0;
		alarm(0);
	}
	lua_pushboolean(L, sig != 0);
	return 1;
}

/* in_strategy(flag): the engine marks the time spent in strategy code */
static int l_in_strategy(lua_State *L)
{
	in_strategy = lua_toboolean(L, 1);
	return 0;
}

static int interrupt_tostring(lua_State *L)
{
	lua_pushliteral(L, "interrupted by a signal");
	return 1;
}

/* --- kopt.File: an append-only (or truncated) file whose every write is
 * checked; a failed write is cut back so the file ends where it ended
 * before it. --------------------------------------------------------- */
#define FILE_MT "kopt.File"

struct log_file {
	int fd; /* -1 once closed */
	long long size;
};

static struct log_file *check_file(lua_State *L)
{
	struct log_file *f = luaL_checkudata(L, 1, FILE_MT);
	if (f->fd < 0)
		luaL_error(L, "attempt to use a closed file");
	return f;
}

/* open_log(path, "a"|"w") -> file | nil, msg */
static int l_open_log(lua_State *L)
{
	const char *path = kopt_bind_check_text(L, 1);
	const char *mode = luaL_optstring(L, 2, "a");
	if (strcmp(mode, "a") != 0 && strcmp(mode, "w") != 0)
		return luaL_argerror(L, 2, "expected \"a\" or \"w\"");
	struct log_file *f = lua_newuserdatauv(L, sizeof *f, 0);
	f->fd = -1;
	luaL_setmetatable(L, FILE_MT);
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode[0] == 'a' ? O_APPEND : O_TRUNC);
	int fd = open(path, flags, 0666);
	if (fd < 0)
		return kopt_bind_fail(L, strerror(errno));
	off_t end = lseek(fd, 0, SEEK_END);
	if (end < 0) {
		int e = errno;
		close(fd);
		return kopt_bind_fail(L, strerror(e));
	}
	f->fd = fd;
	f->size = (long long)end;
	return 1;
}

/* file:write(s) -> true | nil, msg. A write that fails part-way takes its
 * part back, so the file stays whole lines; other kopt processes may append
 * to the same file (the experience dataset), so the write holds an
 * exclusive flock, and the part is cut only while it is still the file's
 * end (a writer that takes no lock may have appended after it: a cut would
 * take its lines). */
static int file_write(lua_State *L)
{
	struct log_file *f = check_file(L);
	size_t n;
	const char *s = luaL_checklstring(L, 2, &n);
	char err[256];
	int locked = flock(f->fd, LOCK_EX) == 0;
	off_t start = lseek(f->fd, 0, SEEK_END);
	int rc = kopt_sys_write_all(f->fd, s, n, err, sizeof err);
	if (rc != 0) {
		off_t end = lseek(f->fd, 0, SEEK_CUR);
		struct stat st;
		if (start >= 0 && end >= start && fstat(f->fd, &st) == 0 && st.st_size == end &&
		    ftruncate(f->fd, start) != 0) {
			/* the cut failed too: the next resume cuts the torn tail */
		}
	}
	if (locked)
		flock(f->fd, LOCK_UN);
	if (rc != 0)
		return kopt_bind_fail(L, err);
	f->size = start >= 0 ? (long long)start + (long long)n : f->size + (long long)n;
	return kopt_bind_ok(L);
}

/* file:sync() -> true | nil, msg */
static int file_sync(lua_State *L)
{
	struct log_file *f = check_file(L);
	char err[256];
	if (kopt_sys_fsync(f->fd, err, sizeof err) != 0)
		return kopt_bind_fail(L, err);
	return kopt_bind_ok(L);
}

static int file_close(lua_State *L)
{
	struct log_file *f = luaL_checkudata(L, 1, FILE_MT);
	if (f->fd >= 0) {
		int rc = close(f->fd);
		f->fd = -1;
		if (rc != 0)
			return kopt_bind_fail(L, strerror(errno));
	}
	return kopt_bind_ok(L);
}

static int file_tostring(lua_State *L)
{
	struct log_file *f = luaL_checkudata(L, 1, FILE_MT);
	if (f->fd < 0)
		lua_pushliteral(L, "kopt.File (closed)");
	else
		lua_pushfstring(L, "kopt.File (fd %d, %I bytes)", f->fd, (lua_Integer)f->size);
	return 1;
}

static const luaL_Reg file_meta[] = {
    {"__gc", file_close},
    {"__close", file_close},
    {"__tostring", file_tostring},
    {NULL, NULL},
};
static const luaL_Reg file_methods[] = {
    {"write", file_write},
    {"sync", file_sync},
    {"close", file_close},
    {NULL, NULL},
};

/* write_atomic(path, data) -> true | nil, msg */
static int l_write_atomic(lua_State *L)
{
	const char *path = kopt_bind_check_text(L, 1);
	size_t n;
	const char *data = luaL_checklstring(L, 2, &n);
	char err[512];
	if (kopt_sys_write_atomic(path, data, n, err, sizeof err) != 0)
		return kopt_bind_fail(L, err);
	return kopt_bind_ok(L);
}

/* truncate(path, size) -> true | nil, msg */
static int l_truncate(lua_State *L)
{
	const char *path = kopt_bind_check_text(L, 1);
	lua_Integer size = luaL_checkinteger(L, 2);
	luaL_argcheck(L, size >= 0, 2, "expected a non-negative size");
	char err[256];
	if (kopt_sys_truncate(path, (long long)size, err, sizeof err) != 0)
		return kopt_bind_fail(L, err);
	return kopt_bind_ok(L);
}

/* rmdir(path) -> true | nil, msg (an empty folder only) */
static int l_rmdir(lua_State *L)
{
	if (rmdir(kopt_bind_check_text(L, 1)) != 0)
		return kopt_bind_fail(L, strerror(errno));
	return kopt_bind_ok(L);
}

/* --- kopt.Lock: one process per run folder -------------------------- */
#define LOCK_MT "kopt.Lock"

struct run_lock {
	int fd;	    /* -1 once released */
	int dir_fd; /* the folder the lock file is in, locked too; -1 once released */
};

/* lock(path) -> lock | nil, msg, holder_pid (0: unknown; nil: not a conflict) */
static int l_lock(lua_State *L)
{
	const char *path = kopt_bind_check_text(L, 1);
	struct run_lock *k = lua_newuserdatauv(L, sizeof *k, 0);
	k->fd = k->dir_fd = -1;
	luaL_setmetatable(L, LOCK_MT);
	char err[512];
	long holder;
	int fd;
	if (kopt_sys_lock(path, &fd, &holder, err, sizeof err) != 0) {
		lua_pushnil(L);
		lua_pushstring(L, err);
		if (holder < 0)
			return 2;
		lua_pushinteger(L, (lua_Integer)holder);
		return 3;
	}
	int dir_fd = kopt_sys_lock_folder(path, err, sizeof err);
	if (dir_fd < 0) {
		close(fd);
		lua_pushnil(L);
		lua_pushstring(L, err);
		return 2;
	}
	k->fd = fd;
	k->dir_fd = dir_fd;
	return 1;
}

static int lock_close(lua_State *L)
{
	struct run_lock *k = luaL_checkudata(L, 1, LOCK_MT);
	if (k->fd >= 0) {
		close(k->fd);
		k->fd = -1;
	}
	if (k->dir_fd >= 0) {
		close(k->dir_fd);
		k->dir_fd = -1;
	}
	return 0;
}

static int lock_tostring(lua_State *L)
{
	struct run_lock *k = luaL_checkudata(L, 1, LOCK_MT);
	lua_pushstring(L, k->fd >= 0 ? "kopt.Lock (held)" : "kopt.Lock (released)");
	return 1;
}

static const luaL_Reg lock_meta[] = {
    {"__gc", lock_close},
    {"__close", lock_close},
    {"__tostring", lock_tostring},
    {NULL, NULL},
};
static const luaL_Reg lock_methods[] = {
    {"close", lock_close},
    {NULL, NULL},
};

/* kill_self([signal]): SIGKILL, or "INT" (test hooks: a kill -9, a Ctrl-C) */
static int l_kill_self(lua_State *L)
{
	const char *sig = luaL_optstring(L, 1, "KILL");
	raise(strcmp(sig, "INT") == 0 ? SIGINT : SIGKILL);
	return 0;
}

static int l_hostname(lua_State *L)
{
	char buf[256];
	if (gethostname(buf, sizeof buf) != 0)
		buf[0] = '\0';
	buf[sizeof buf - 1] = '\0';
	lua_pushstring(L, buf);
	return 1;
}

static const luaL_Reg sys_funcs[] = {
    {"now", l_now},
    {"memory", l_memory},
    {"memory_grant", l_memory_grant},
    {"memory_rearm", l_memory_rearm},
    {"utc_iso", l_utc_iso},
    {"mkdir_p", l_mkdir_p},
    {"stat", l_stat},
    {"list_dir", l_list_dir},
    {"realpath", l_realpath},
    {"sha256", l_sha256},
    {"isatty", l_isatty},
    {"getpid", l_getpid},
    {"die_with_parent", l_die_with_parent},
    {"cpu_count", l_cpu_count},
    {"sleep", l_sleep},
    {"install_signal_handlers", l_install_signal_handlers},
    {"interrupted", l_interrupted},
    {"in_strategy", l_in_strategy},
    {"hostname", l_hostname},
    {"kill_self", l_kill_self},
    {"open_log", l_open_log},
    {"write_atomic", l_write_atomic},
    {"truncate", l_truncate},
    {"rmdir", l_rmdir},
    {"lock", l_lock},
    {NULL, NULL},
};

int luaopen_kopt_sys(lua_State *L)
{
	kopt_bind_class(L, FILE_MT, file_meta, file_methods);
	kopt_bind_class(L, LOCK_MT, lock_meta, lock_methods);
	luaL_newlib(L, sys_funcs);
	/* the one interruption error value: kopt.errors.is_interrupt compares with it */
	lua_newtable(L);
	lua_newtable(L);
	lua_pushcfunction(L, interrupt_tostring);
	lua_setfield(L, -2, "__tostring");
	lua_setmetatable(L, -2);
	lua_pushvalue(L, -1);
	lua_rawsetp(L, LUA_REGISTRYINDEX, &interrupt_key);
	lua_setfield(L, -2, "interrupt_error");
	lua_pushliteral(L, KOPT_VERSION);
	lua_setfield(L, -2, "version");
	return 1;
}
