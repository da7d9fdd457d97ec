/* kopt entry point: builds the Lua state, registers the core modules and hands
 * the command line to lua/kopt/cli.lua, all under one protected call (as lua.c
 * does), so no Lua error escapes as a crash. Exit codes: 0 success, 1 runtime
 * failure, 2 bad input (decided by cli.lua), 130 interrupted. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "bind/modules.h"
#include "memlimit.h"
#include "pool.h"
#include "worker/worker.h"

struct main_args {
	int argc;
	char **argv;
	const char *lua_dev;
	int exit_code;
};

static int message_handler(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	if (msg == NULL)
		msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	luaL_traceback(L, L, msg, 1);
	return 1;
}

/* An error outside any protected call (luaL_newstate's handler does the same;
 * everything kopt runs is under one, so this is a broken invariant). */
static int panic(lua_State *L)
{
	const char *msg = lua_tostring(L, -1);
	fprintf(stderr, "kopt: unprotected Lua error: %s\n", msg ? msg : "(not a string)");
	return 0; /* Lua aborts */
}

static int protected_main(lua_State *L)
{
	struct main_args *args = lua_touserdata(L, 1);
	luaL_openlibs(L);
	kopt_lua_open_modules(L, args->lua_dev);

	lua_getglobal(L, "require");
	lua_pushliteral(L, "kopt.cli");
	lua_call(L, 1, 1);
	lua_getfield(L, -1, "main");
	lua_createtable(L, args->argc, 0);
	for (int i = 1; i < args->argc; i++) {
		lua_pushstring(L, args->argv[i]);
		lua_rawseti(L, -2, i);
	}
	lua_call(L, 1, 1);
	args->exit_code = (int)luaL_optinteger(L, -1, 0);
	return 0;
}

/* --lua-dev DIR must be known before any Lua is loaded, so it is taken out of
 * argv here; KOPT_LUA_DEV does the same from the environment. */
static void take_lua_dev(struct main_args *args)
{
	args->lua_dev = getenv("KOPT_LUA_DEV");
	int out = 1;
	for (int i = 1; i < args->argc; i++) {
		if (strcmp(args->argv[i], "--lua-dev") == 0 && i + 1 < args->argc) {
			args->lua_dev = args->argv[++i];
			continue;
		}
		if (strncmp(args->argv[i], "--lua-dev=", 10) == 0) { /* as every other flag */
			args->lua_dev = args->argv[i] + 10;
			continue;
		}
		args->argv[out++] = args->argv[i];
	}
	args->argc = out;
	if (args->lua_dev != NULL && args->lua_dev[0] == '\0')
		args->lua_dev = NULL;
}

static int is_dir(const char *dir, const char *sub)
{
	char path[4096];
	struct stat st;
	if (snprintf(path, sizeof path, "%s%s", dir, sub) >= (int)sizeof path)
		return 0;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A --lua-dev folder that is not there (a typo) would silently run the
 * built-in copies: refused, as any bad flag, with exit code 2. */
static int check_lua_dev(const char *dir)
{
	if (dir == NULL)
		return 0;
	if (!is_dir(dir, "")) {
		fprintf(stderr, "kopt: --lua-dev (or KOPT_LUA_DEV) %s: no such directory\n", dir);
		return 2;
	}
	if (!is_dir(dir, "/lua/kopt") && !is_dir(dir, "/strategies")) {
		fprintf(
		    stderr,
		    "kopt: --lua-dev (or KOPT_LUA_DEV) %s has neither lua/kopt/ nor strategies/: "
		    "name the root of a kopt source tree\n",
		    dir);
		return 2;
	}
	return 0;
}

/* Standard streams closed by the caller (2>&-) are opened on /dev/null: the
 * next file kopt opened took their number, and the progress lines written
 * to stderr went into the run folder's lock file. */
static void open_std_streams(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			continue;
		int null = open("/dev/null", O_RDWR);
		if (null >= 0 && null != fd) {
			dup2(null, fd);
			close(null);
		}
	}
}

int main(int argc, char **argv)
{
	open_std_streams();
	/* A write past a file-size limit (ulimit -f, batch clusters) fails with
	 * EFBIG, which kopt reports and recovers from, instead of SIGXFSZ
	 * killing it with a torn line and no summary. */
	signal(SIGXFSZ, SIG_IGN);
	/* A GPU worker process (core/worker.c), started by kopt itself: no Lua. */
	if (argc > 1 && strcmp(argv[1], KOPT_WORKER_ARG) == 0)
		return kopt_worker_main(argc, argv);
	struct main_args args = {argc, argv, NULL, 1};
	take_lua_dev(&args);
	if (check_lua_dev(args.lua_dev) != 0)
		return 2;
	/* the state's memory comes from a pool (core/pool.h), under a ceiling
	 * (core/memlimit.h); its warnings are off, as luaL_newstate leaves them */
	static struct kopt_memlimit mem;
	const char *limit_text = getenv("KOPT_MEMORY_LIMIT");
	mem.limit = kopt_memlimit_default();
	if (limit_text != NULL && limit_text[0] != '\0' &&
	    kopt_memlimit_parse(limit_text, &mem.limit) != 0) {
		fprintf(stderr,
			"kopt: KOPT_MEMORY_LIMIT: expected a size such as 8G, 512M or 65536 "
			"(bytes), or 0 "
			"for none; got '%s'\n",
			limit_text);
		return 2;
	}
	mem.base = mem.limit;
	/* room for the summary and results.json once a strategy hit the limit */
	mem.reserve = mem.limit / 8 > ((size_t)64 << 20) ? mem.limit / 8 : (size_t)64 << 20;
	struct kopt_pool *pool = kopt_pool_new();
	mem.pool = pool;
	lua_State *L = pool ? lua_newstate(kopt_memlimit_alloc, &mem) : NULL;
	if (L == NULL) {
		fprintf(stderr, "kopt: cannot create the Lua state (out of memory%s)\n",
			mem.hit ? ": KOPT_MEMORY_LIMIT is too small" : "");
		kopt_pool_free(pool);
		return 1;
	}
	lua_atpanic(L, panic);
	lua_pushcfunction(L, message_handler);
	lua_pushcfunction(L, protected_main);
	lua_pushlightuserdata(L, &args);
	if (lua_pcall(L, 1, 0, 1) != LUA_OK) {
		fprintf(stderr, "kopt: internal error: %s\n", lua_tostring(L, -1));
		args.exit_code = 1;
	}
	lua_close(L);
	kopt_pool_free(pool);
	return args.exit_code;
}
