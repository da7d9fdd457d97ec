/* kopt.nvrtc: one NVRTC compile in this process, and NVRTC's version. The
 * compile pool (kopt.cpool) runs the same compile in worker processes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "bind/nvrtc.h"
#include "compile/kopt_nvrtc.h"

/* The string at idx, which C reads up to its first NUL: one inside it would
 * cut what the compiler or the cache sees, unseen. */
static const char *text_without_nul(lua_State *L, int idx, const char *fmt, const char *what)
{
	size_t len;
	const char *s = lua_tolstring(L, idx, &len);
	if (strlen(s) != len)
		luaL_error(L, fmt, what);
	return s;
}

static const char *opt_field(lua_State *L, int idx, const char *key)
{
	int t = lua_getfield(L, idx, key);
	const char *s = NULL;
	if (t == LUA_TSTRING)
		s = text_without_nul(
		    L, -1, "job.%s holds a NUL byte, where the compiler would stop reading", key);
	else if (t != LUA_TNIL)
		luaL_error(L, "job.%s: expected a string, got %s", key, luaL_typename(L, -1));
	lua_pop(L, 1); /* the table still holds the string */
	return s;
}

void kopt_lua_check_job(lua_State *L, int idx, struct kopt_nvrtc_job *job)
{
	idx = lua_absindex(L, idx);
	luaL_checktype(L, idx, LUA_TTABLE);
	memset(job, 0, sizeof *job);
	job->source = opt_field(L, idx, "source");
	if (job->source == NULL)
		luaL_error(L, "job.source: expected the kernel's source text");
	job->entry = opt_field(L, idx, "entry");
	job->arch = opt_field(L, idx, "arch");
	job->name = opt_field(L, idx, "name");
	job->salt = opt_field(L, idx, "salt");
	int t = lua_getfield(L, idx, "options");
	/* the raw length: a __len could claim more than the loop below fills */
	size_t n = t == LUA_TTABLE ? lua_rawlen(L, -1) : 0;
	if (t != LUA_TTABLE && t != LUA_TNIL)
		luaL_error(L, "job.options: expected a list of strings");
	if (n > 4096)
		luaL_error(L, "job.options: %d options, more than 4096",
			   (int)(n > INT32_MAX ? INT32_MAX : n));
	const char **opts = lua_newuserdatauv(L, (n ? n : 1) * sizeof *opts, 0);
	for (size_t i = 0; i < n; i++) {
		if (lua_rawgeti(L, -2, (lua_Integer)i + 1) != LUA_TSTRING)
			luaL_error(L, "job.options[%d]: expected a string", (int)i + 1);
		char what[32];
		snprintf(what, sizeof what, "%d", (int)i + 1);
		opts[i] = text_without_nul(L, -1, "job.options[%s] holds a NUL byte", what);
		lua_pop(L, 1);
	}
	lua_remove(L, -2); /* options table (held by the job table); keep the array */
	job->options = opts;
	job->n_options = n;
}

static void set_number(lua_State *L, const char *key, long v)
{
	if (v < 0)
		return;
	lua_pushinteger(L, v);
	lua_setfield(L, -2, key);
}

void kopt_lua_push_result(lua_State *L, const struct kopt_nvrtc_result *res)
{
	lua_createtable(L, 0, 16);
	lua_pushboolean(L, res->ok);
	lua_setfield(L, -2, "ok");
	if (res->cubin != NULL) {
		lua_pushlstring(L, (const char *)res->cubin, res->cubin_size);
		lua_setfield(L, -2, "cubin");
	}
	lua_pushstring(L, res->log ? res->log : "");
	lua_setfield(L, -2, "log");
	if (res->lowered != NULL) {
		lua_pushstring(L, res->lowered);
		lua_setfield(L, -2, "lowered");
	}
	set_number(L, "regs", res->regs);
	set_number(L, "barriers", res->barriers);
	set_number(L, "smem_static", res->smem_static);
	set_number(L, "local_bytes", res->local_bytes);
	set_number(L, "spill_stores", res->spill_stores);
	set_number(L, "spill_loads", res->spill_loads);
	if (res->spill_stores >= 0 && res->spill_loads >= 0)
		set_number(L, "spills", res->spill_stores + res->spill_loads);
	set_number(L, "const_bytes", res->const_bytes);
	set_number(L, "max_threads", res->max_threads);
	lua_pushnumber(L, res->compile_s);
	lua_setfield(L, -2, "compile_s");
}

/* compile({source=, entry=, arch=, name=, options={...}}, cache_dir|nil)
 * -> result table (with cached = true on a cache hit). A compile error is a
 * result with ok == false; only running out of memory raises. */
static int l_compile(lua_State *L)
{
	/* (the cache folder first: checking the job pushes its options array) */
	const char *dir = luaL_optstring(L, 2, NULL);
	lua_settop(L, 2);
	struct kopt_nvrtc_job job;
	kopt_lua_check_job(L, 1, &job);
	struct kopt_nvrtc_result res;
	int cached;
	char err[256];
	if (kopt_nvrtc_compile_cached(&job, dir, &res, &cached, err, sizeof err) != 0)
		return luaL_error(L, "nvrtc: %s", err);
	kopt_lua_push_result(L, &res);
	kopt_nvrtc_result_release(&res);
	lua_pushboolean(L, cached);
	lua_setfield(L, -2, "cached");
	return 1;
}

/* cache_key(job) -> 64 hex digits */
static int l_cache_key(lua_State *L)
{
	struct kopt_nvrtc_job job;
	kopt_lua_check_job(L, 1, &job);
	char hex[65];
	kopt_nvrtc_cache_key(&job, hex);
	lua_pushstring(L, hex);
	return 1;
}

/* The two buffers of kopt_nvrtc_ptx live in a box whose __gc frees them,
 * so a memory error while they are pushed leaks nothing (STYLE.md rule 6). */
#define PTX_BOX "kopt.nvrtc_ptx_box"

static int ptx_box_gc(lua_State *L)
{
	char **box = luaL_checkudata(L, 1, PTX_BOX);
	for (int i = 0; i < 3; i++) {
		free(box[i]);
		box[i] = NULL;
	}
	return 0;
}

/* ptx(job) -> PTX text (compute_XX, -lineinfo) and the entry's symbol in
 * it (nil without an entry), or nil, log when the source does not compile.
 * A separate compile, made only when asked. */
static int l_ptx(lua_State *L)
{
	struct kopt_nvrtc_job job;
	kopt_lua_check_job(L, 1, &job);
	char **box = lua_newuserdatauv(L, 3 * sizeof *box, 0);
	box[0] = box[1] = box[2] = NULL;
	luaL_setmetatable(L, PTX_BOX);
	char err[256];
	if (kopt_nvrtc_ptx(&job, &box[0], &box[1], &box[2], err, sizeof err) != 0)
		return luaL_error(L, "nvrtc: %s", err);
	if (box[0] == NULL) {
		lua_pushnil(L);
		lua_pushstring(L, box[1]);
		return 2;
	}
	lua_pushstring(L, box[0]);
	if (box[2] != NULL)
		lua_pushstring(L, box[2]);
	else
		lua_pushnil(L);
	return 2;
}

/* version() -> "13.0", 13, 0 */
static int l_version(lua_State *L)
{
	int major, minor;
	kopt_nvrtc_version(&major, &minor);
	lua_pushfstring(L, "%d.%d", major, minor);
	lua_pushinteger(L, major);
	lua_pushinteger(L, minor);
	return 3;
}

/* parse_log(log, entry|nil [, cubin]) -> {regs=, ...}: the ptxas report of
 * one entry (ok false when the log has none); with the module's cubin, its
 * max_threads too (launch bounds and registers). */
static int l_parse_log(lua_State *L)
{
	const char *log = luaL_checkstring(L, 1);
	const char *entry = luaL_optstring(L, 2, NULL);
	size_t cubin_size = 0;
	const char *cubin = luaL_optlstring(L, 3, NULL, &cubin_size);
	struct kopt_nvrtc_result res;
	kopt_nvrtc_result_init(&res);
	kopt_nvrtc_parse_log(log, entry, &res);
	res.ok = res.regs >= 0;
	if (res.ok && cubin != NULL && entry != NULL)
		res.max_threads = kopt_nvrtc_entry_max_threads((const unsigned char *)cubin,
							       cubin_size, entry, res.regs);
	kopt_lua_push_result(L, &res);
	return 1;
}

static const luaL_Reg nvrtc_funcs[] = {
    {"compile", l_compile},	{"version", l_version}, {"parse_log", l_parse_log},
    {"cache_key", l_cache_key}, {"ptx", l_ptx},		{NULL, NULL},
};

int luaopen_kopt_nvrtc(lua_State *L)
{
	static const luaL_Reg box_meta[] = {{"__gc", ptx_box_gc}, {NULL, NULL}};
	kopt_bind_class(L, PTX_BOX, box_meta, NULL);
	luaL_newlib(L, nvrtc_funcs);
	lua_pushinteger(L, KOPT_NVRTC_LOG_CAP);
	lua_setfield(L, -2, "log_cap");
	lua_pushliteral(L, KOPT_CUDA_HOME);
	lua_setfield(L, -2, "cuda_home"); /* the toolkit kopt was built with */
	return 1;
}
