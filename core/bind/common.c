/* Helpers shared by the bindings: result shapes and class setup (common.h). */
#include <stdarg.h>

#include "bind/common.h"

int kopt_bind_fail(lua_State *L, const char *msg)
{
	luaL_pushfail(L);
	lua_pushstring(L, msg);
	return 2;
}

int kopt_bind_failf(lua_State *L, const char *fmt, ...)
{
	luaL_pushfail(L);
	va_list ap;
	va_start(ap, fmt);
	lua_pushvfstring(L, fmt, ap);
	va_end(ap);
	return 2;
}

int kopt_bind_fail_kind(lua_State *L, const char *kind, const char *msg)
{
	luaL_pushfail(L);
	lua_pushstring(L, kind);
	lua_pushstring(L, msg);
	return 3;
}

int kopt_bind_ok(lua_State *L)
{
	lua_pushboolean(L, 1);
	return 1;
}

void kopt_bind_class(lua_State *L, const char *name, const luaL_Reg *meta,
		     const luaL_Reg *methods)
{
	luaL_newmetatable(L, name);
	luaL_setfuncs(L, meta, 0);
	if (methods != NULL) {
		lua_newtable(L);
		luaL_setfuncs(L, methods, 0);
		lua_setfield(L, -2, "__index");
	}
	lua_pop(L, 1);
}
