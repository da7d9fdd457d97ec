/* Module registry and the searcher for built-in Lua. A module "kopt.engine" is
 * the file lua/kopt/engine.lua; a module "strategies.random" is
 * strategies/random.lua. With --lua-dev DIR the same paths are read from DIR,
 * so the Lua can be edited without rebuilding. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua-cjson.h>
#include <lualib.h>

#include "bind/modules.h"
#include "embedded.h"

static const luaL_Reg c_modules[] = {
	{"kopt.sys", luaopen_kopt_sys},
	{"kopt.gpu", luaopen_kopt_gpu},
	{"kopt.cupti", luaopen_kopt_cupti},
	{"kopt.nvrtc", luaopen_kopt_nvrtc},
	{"kopt.cpool", luaopen_kopt_cpool},
	{"kopt.http", luaopen_kopt_http},
	{"cjson", luaopen_cjson},
	{"kopt.graph", luaopen_kopt_graph},
	{"kopt.ptx", luaopen_kopt_ptx},
	{"kopt.mpi", luaopen_kopt_mpi},
	{"kopt.db", luaopen_kopt_db},
	{"kopt.gp", luaopen_kopt_gp},
	{NULL, NULL},
};

static const struct kopt_embedded_file *find_embedded(const char *path)
{
	for (const struct kopt_embedded_file *f = kopt_embedded_files; f->path; f++)
		if (strcmp(f->path, path) == 0)
			return f;
	return NULL;
}

/* "kopt.engine" -> "lua/kopt/engine.lua"; "strategies.x" -> "strategies/x.lua" */
static const char *module_path(lua_State *L, const char *name)
{
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	if (strncmp(name, "strategies.", 11) != 0)
		luaL_addstring(&b, "lua/");
	for (const char *p = name; *p; p++)
		luaL_addchar(&b, *p == '.' ? '/' : *p);
	luaL_addstring(&b, ".lua");
	luaL_pushresult(&b);
	return lua_tostring(L, -1);
}

/* Loads a built-in file by source-tree path; pushes the chunk or an error
 * message. Returns 1 when found. */
static int load_builtin(lua_State *L, const char *path)
{
	const char *dev = lua_tostring(L, lua_upvalueindex(1));
	if (dev != NULL) {
		const char *file = lua_pushfstring(L, "%s/%s", dev, path);
		FILE *fp = fopen(file, "r");
		if (fp != NULL) {
			fclose(fp);
			if (luaL_loadfilex(L, file, "t") != LUA_OK)
				return lua_error(L);
			lua_remove(L, -2);
			return 1;
		}
		/* not in the dev tree: fall back to the built-in copy */
		lua_pop(L, 1);
	}
	const struct kopt_embedded_file *f = find_embedded(path);
	if (f == NULL)
		return 0;
	const char *chunkname = lua_pushfstring(L, "@%s", path);
	if (luaL_loadbufferx(L, f->text, f->len, chunkname, "t") != LUA_OK)
		return lua_error(L);
	lua_remove(L, -2);
	return 1;
}

static int builtin_searcher(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	const char *path = module_path(L, name);
	if (!load_builtin(L, path)) {
		lua_pushfstring(L, "no built-in file '%s'", path);
		return 1;
	}
	lua_pushstring(L, path);
	return 2;
}

/* kopt.builtin.read(path) -> text|nil; kopt.builtin.list(prefix) -> {paths} */
static int builtin_read(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	const char *dev = lua_tostring(L, lua_upvalueindex(1));
	if (dev != NULL) {
		lua_getglobal(L, "io");
		lua_getfield(L, -1, "open");
		lua_pushfstring(L, "%s/%s", dev, path);
		lua_call(L, 1, 1);
		if (!lua_isnil(L, -1)) {
			lua_getfield(L, -1, "read");
			lua_insert(L, -2);
			lua_pushliteral(L, "a");
			lua_call(L, 2, 1);
			return 1;
		}
		lua_pop(L, 2);
	}
	const struct kopt_embedded_file *f = find_embedded(path);
	if (f == NULL)
		lua_pushnil(L);
	else
		lua_pushlstring(L, f->text, f->len);
	return 1;
}

/* With a dev tree, files there are listed too (a new strategy being written);
 * prefix must then name a directory ("strategies/"). */
static int builtin_list(lua_State *L)
{
	const char *prefix = luaL_optstring(L, 1, "");
	const char *dev = lua_tostring(L, lua_upvalueindex(1));
	size_t n = strlen(prefix);
	lua_newtable(L); /* set of paths */
	for (const struct kopt_embedded_file *f = kopt_embedded_files; f->path; f++) {
		if (strncmp(f->path, prefix, n) == 0) {
			lua_pushboolean(L, 1);
			lua_setfield(L, -2, f->path);
		}
	}
	if (dev != NULL && n > 0 && prefix[n - 1] == '/') {
		DIR *d = opendir(lua_pushfstring(L, "%s/%s", dev, prefix));
		lua_pop(L, 1);
		struct dirent *e;
		while (d != NULL && (e = readdir(d)) != NULL) {
			size_t len = strlen(e->d_name);
			if (len > 4 && strcmp(e->d_name + len - 4, ".lua") == 0) {
				lua_pushfstring(L, "%s%s", prefix, e->d_name);
				lua_pushboolean(L, 1);
				lua_settable(L, -3);
			}
		}
		if (d != NULL)
			closedir(d);
	}
	lua_newtable(L);
	lua_Integer i = 1;
	lua_pushnil(L);
	while (lua_next(L, -3) != 0) {
		lua_pop(L, 1);
		lua_pushvalue(L, -1);
		lua_rawseti(L, -3, i++);
	}
	return 1;
}

void kopt_lua_open_modules(lua_State *L, const char *lua_dev)
{
	luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
	for (const luaL_Reg *m = c_modules; m->name; m++) {
		lua_pushcfunction(L, m->func);
		lua_setfield(L, -2, m->name);
	}
	lua_pop(L, 1);

	/* builtin searcher goes right after the preload searcher */
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "searchers");
	for (lua_Integer i = (lua_Integer)luaL_len(L, -1); i >= 2; i--) {
		lua_rawgeti(L, -1, i);
		lua_rawseti(L, -2, i + 1);
	}
	if (lua_dev)
		lua_pushstring(L, lua_dev);
	else
		lua_pushnil(L);
	lua_pushcclosure(L, builtin_searcher, 1);
	lua_rawseti(L, -2, 2);
	lua_pop(L, 1);

	static const luaL_Reg builtin_funcs[] = {
		{"read", builtin_read}, {"list", builtin_list}, {NULL, NULL}};
	luaL_newlibtable(L, builtin_funcs);
	if (lua_dev)
		lua_pushstring(L, lua_dev);
	else
		lua_pushnil(L);
	luaL_setfuncs(L, builtin_funcs, 1);
	lua_pushboolean(L, lua_dev != NULL);
	lua_setfield(L, -2, "dev");
	lua_setfield(L, -2, "builtin");
	lua_pop(L, 1);
}
