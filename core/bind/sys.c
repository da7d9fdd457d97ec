/* kopt.sys: clocks, directories, hashing, signals and terminal facts for Lua. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "sha256.h"
#include "sys.h"

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
	if (kopt_sys_mkdir_p(luaL_checkstring(L, 1), err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	return kopt_bind_ok(L);
}

/* stat(path) -> "file"|"dir"|"other", size  or nil when absent */
static int l_stat(lua_State *L)
{
	struct stat st;
	if (stat(luaL_checkstring(L, 1), &st) != 0) {
		return kopt_bind_fail(L, strerror(errno));
	}
	lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : "other");
	lua_pushinteger(L, (lua_Integer)st.st_size);
	return 2;
}

static int l_list_dir(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
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
	char *p = realpath(luaL_checkstring(L, 1), NULL);
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

static int l_cpu_count(lua_State *L)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	lua_pushinteger(L, n > 0 ? n : 1);
	return 1;
}

static int l_sleep(lua_State *L)
{
	double s = luaL_checknumber(L, 1);
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
	return 0;
}

static int l_install_signal_handlers(lua_State *L)
{
	kopt_sys_install_signal_handlers();
	return 0;
}

static int l_interrupted(lua_State *L)
{
	lua_pushboolean(L, kopt_sys_interrupted());
	return 1;
}

static int l_kill_self(lua_State *L)
{
	raise(SIGKILL);
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
	{"utc_iso", l_utc_iso},
	{"mkdir_p", l_mkdir_p},
	{"stat", l_stat},
	{"list_dir", l_list_dir},
	{"realpath", l_realpath},
	{"sha256", l_sha256},
	{"isatty", l_isatty},
	{"getpid", l_getpid},
	{"cpu_count", l_cpu_count},
	{"sleep", l_sleep},
	{"install_signal_handlers", l_install_signal_handlers},
	{"interrupted", l_interrupted},
	{"hostname", l_hostname},
	{"kill_self", l_kill_self},
	{NULL, NULL},
};

int luaopen_kopt_sys(lua_State *L)
{
	luaL_newlib(L, sys_funcs);
	lua_pushliteral(L, KOPT_VERSION);
	lua_setfield(L, -2, "version");
	return 1;
}
