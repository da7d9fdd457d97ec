/* kopt.cpool: the compile worker pool as a "kopt.CompilePool" object.
 *
 *   local pool = cpool.new(n, {cache_dir = dir|nil, timeout_s = s|nil})
 *   local id = pool:submit{source=, entry=, arch=, name=, options={...}}
 *   local id, result = pool:wait_any(timeout_s|nil)   -- nil when nothing is pending / timed out
 *   pool:pending(), pool:size(), pool:close()
 *
 * lua/kopt/compile.lua builds the public API on top. */
#include <stdio.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "bind/nvrtc.h"
#include "compile/cpool.h"

#define POOL_META "kopt.CompilePool"

struct lpool {
	struct kopt_cpool *p; /* NULL once closed */
};

static struct lpool *check_pool(lua_State *L)
{
	struct lpool *lp = luaL_checkudata(L, 1, POOL_META);
	if (lp->p == NULL)
		luaL_error(L, "attempt to use a closed compile pool");
	return lp;
}

static int l_new(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);
	const char *dir = NULL;
	double timeout = 0;
	if (!lua_isnoneornil(L, 2)) {
		luaL_checktype(L, 2, LUA_TTABLE);
		/* (left on the stack until the pool has its copy: a number's
		 * text, or an __index's string, is held by nothing else) */
		if (lua_getfield(L, 2, "cache_dir") != LUA_TNIL)
			dir = luaL_checkstring(L, -1);
		if (lua_getfield(L, 2, "timeout_s") != LUA_TNIL)
			timeout = luaL_checknumber(L, -1);
		/* (NaN fails the comparison: it would disable the limit) */
		if (!(timeout >= 0) && !(timeout < 0))
			return luaL_error(L, "cpool.new: timeout_s is NaN");
	}
	luaL_argcheck(L, n >= 1 && n <= 1024, 1, "expected 1 to 1024 workers");
	struct lpool *lp = lua_newuserdatauv(L, sizeof *lp, 0);
	lp->p = NULL;
	luaL_setmetatable(L, POOL_META);
	char err[256];
	lp->p = kopt_cpool_new((int)n, dir, timeout, err, sizeof err);
	if (lp->p == NULL)
		return luaL_error(L, "compile pool: %s", err);
	return 1;
}

static int l_submit(lua_State *L)
{
	struct lpool *lp = check_pool(L);
	struct kopt_nvrtc_job job;
	kopt_lua_check_job(L, 2, &job);
	char err[256];
	long id = kopt_cpool_submit(lp->p, &job, err, sizeof err);
	if (id < 0)
		return luaL_error(L, "compile pool: %s", err);
	lua_pushinteger(L, id);
	return 1;
}

static int l_wait_any(lua_State *L)
{
	struct lpool *lp = check_pool(L);
	double timeout = luaL_optnumber(L, 2, -1);
	luaL_argcheck(L, timeout == timeout, 2, "timeout is NaN");
	long id;
	int cached;
	struct kopt_nvrtc_result res;
	char err[256];
	int r = kopt_cpool_wait_any(lp->p, timeout, &id, &res, &cached, err, sizeof err);
	if (r < 0)
		return luaL_error(L, "compile pool: %s", err);
	if (r == 0) {
		lua_pushnil(L);
		return 1;
	}
	lua_pushinteger(L, id);
	kopt_lua_push_result(L, &res);
	kopt_nvrtc_result_release(&res);
	lua_pushboolean(L, cached);
	lua_setfield(L, -2, "cached");
	return 2;
}

static int l_pending(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)kopt_cpool_pending(check_pool(L)->p));
	return 1;
}

static int l_size(lua_State *L)
{
	lua_pushinteger(L, kopt_cpool_size(check_pool(L)->p));
	return 1;
}

static int l_close(lua_State *L)
{
	struct lpool *lp = luaL_checkudata(L, 1, POOL_META);
	kopt_cpool_free(lp->p);
	lp->p = NULL;
	return 0;
}

static int l_tostring(lua_State *L)
{
	struct lpool *lp = luaL_checkudata(L, 1, POOL_META);
	if (lp->p == NULL)
		lua_pushliteral(L, "kopt.CompilePool (closed)");
	else
		lua_pushfstring(L, "kopt.CompilePool (%d workers, %d pending)",
				kopt_cpool_size(lp->p), (int)kopt_cpool_pending(lp->p));
	return 1;
}

static const luaL_Reg pool_methods[] = {
    {"submit", l_submit}, {"wait_any", l_wait_any}, {"pending", l_pending},
    {"size", l_size},	  {"close", l_close},	    {NULL, NULL},
};

static const luaL_Reg pool_meta[] = {
    {"__gc", l_close},
    {"__close", l_close},
    {"__tostring", l_tostring},
    {NULL, NULL},
};

static const luaL_Reg cpool_funcs[] = {
    {"new", l_new},
    {NULL, NULL},
};

int luaopen_kopt_cpool(lua_State *L)
{
	kopt_bind_class(L, POOL_META, pool_meta, pool_methods);
	luaL_newlib(L, cpool_funcs);
	return 1;
}
