#ifndef KOPT_LUA_MODULES_H
#define KOPT_LUA_MODULES_H
#include <lua.h>

/* Registers every C module under package.preload ("kopt.sys", ...) and the
 * searcher that finds the built-in Lua: from DIR/<path> when lua_dev is set,
 * else from the sources embedded at build time. */
void kopt_lua_open_modules(lua_State *L, const char *lua_dev);

/* One luaopen per binding file (core/bind/<mod>.c). */
int luaopen_kopt_sys(lua_State *L);
int luaopen_kopt_gpu(lua_State *L);
int luaopen_kopt_cupti(lua_State *L);
int luaopen_kopt_graph(lua_State *L);
int luaopen_kopt_nvrtc(lua_State *L);
int luaopen_kopt_cpool(lua_State *L);
int luaopen_kopt_http(lua_State *L);
int luaopen_kopt_ptx(lua_State *L);
int luaopen_kopt_mpi(lua_State *L);
int luaopen_kopt_db(lua_State *L);
int luaopen_kopt_gp(lua_State *L);

#endif
