/* kopt.cupti: whether CUPTI profiling can work in this process, the default
 * metric set, and error sentences. Collection itself runs in the GPU worker
 * (the process that owns the context), reached through the cuda backend's
 * "profile" request. */
#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "gpu/cupti_prof.h"

/* load() -> true | nil, reason */
static int l_load(lua_State *L)
{
	char err[700];
	if (kopt_cupti_load(err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	return kopt_bind_ok(L);
}

/* default_metrics([matrix]) -> { name, ... }; the tensor-pipe metric only
 * for matrix kernels. */
static int l_default_metrics(lua_State *L)
{
	int matrix = lua_toboolean(L, 1);
	lua_newtable(L);
	lua_Integer k = 1;
	for (int i = 0; kopt_cupti_default_metrics[i] != NULL; i++) {
		if (i >= KOPT_CUPTI_DEFAULT_BASE && !matrix)
			break;
		lua_pushstring(L, kopt_cupti_default_metrics[i]);
		lua_rawseti(L, -2, k++);
	}
	return 1;
}

static int l_strerror(lua_State *L)
{
	char buf[700];
	lua_pushstring(L, kopt_cupti_strerror((int)luaL_checkinteger(L, 1), buf, sizeof buf));
	return 1;
}

static const luaL_Reg cupti_funcs[] = {
	{"load", l_load},
	{"default_metrics", l_default_metrics},
	{"strerror", l_strerror},
	{NULL, NULL},
};

int luaopen_kopt_cupti(lua_State *L)
{
	luaL_newlib(L, cupti_funcs);
	lua_pushinteger(L, KOPT_CUPTI_MAX_METRICS);
	lua_setfield(L, -2, "max_metrics");
	return 1;
}
