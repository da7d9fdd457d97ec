/* kopt.gp: Gaussian-process regression (core/gp.h) over a value model's
 * ordinal vectors, as a "kopt.GP" object.
 *
 *   local model, err = gp.fit(X, y, {cols = {j, ...}, levels = {n, ...},
 *                                    scales = {...}, noises = {...}, ard = true})
 *   local model, err = gp.fit(X, y, {cols = ..., levels = ...,
 *                                    fixed = {scales = {one per column}, noise = v}})
 *   local mean, sd = model:predict(x)
 *   local scales, noise, lml = model:params()   -- scales: one per column
 *
 * X is a list of vectors (Lua arrays of value indices 1..levels), y their
 * targets. Only the columns in cols are read; column cols[k] with levels[k]
 * values is mapped to [0,1] as (index - 1) / (levels - 1). The first form
 * chooses the length scales and the noise (struct kopt_gp_grid); the second
 * refits with the ones given (a previous fit's params). Bad arguments raise;
 * a fit that cannot be made returns nil and the reason. */
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "gp.h"

#define GP_META "kopt.GP"
#define MAX_COLS 64

struct lgp {
	struct kopt_gp *gp;
	int d;
	int cols[MAX_COLS];
	double span[MAX_COLS]; /* levels - 1, at least 1 */
};

/* A list of positive numbers at field `name` of the options table, into a
 * scratch array owned by the Lua stack (a userdata, so an error frees it). */
static double *number_list(lua_State *L, int opts, const char *key, const char *name, int *count)
{
	if (lua_getfield(L, opts, key) != LUA_TTABLE)
		luaL_error(L, "gp.fit: options.%s: expected a list of numbers", name);
	int n = (int)luaL_len(L, -1);
	if (n < 1)
		luaL_error(L, "gp.fit: options.%s: empty list", name);
	double *out = lua_newuserdatauv(L, sizeof(double) * (size_t)n, 0);
	for (int i = 0; i < n; i++) {
		lua_geti(L, -2, i + 1);
		int ok;
		out[i] = lua_tonumberx(L, -1, &ok);
		if (!ok)
			luaL_error(L, "gp.fit: options.%s[%d]: not a number", name, i + 1);
		lua_pop(L, 1);
	}
	lua_remove(L, -2); /* the list; the scratch userdata stays */
	*count = n;
	return out;
}

static void read_vector(lua_State *L, int idx, const struct lgp *m, double *out, const char *what, int row)
{
	for (int k = 0; k < m->d; k++) {
		lua_geti(L, idx, m->cols[k]);
		int ok;
		double v = lua_tonumberx(L, -1, &ok);
		if (!ok)
			luaL_error(L, "gp: %s %d: column %d is not a number", what, row, m->cols[k]);
		out[k] = (v - 1) / m->span[k];
		lua_pop(L, 1);
	}
}

static int l_fit(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checktype(L, 2, LUA_TTABLE);
	luaL_checktype(L, 3, LUA_TTABLE);
	int n = (int)luaL_len(L, 1);
	luaL_argcheck(L, (int)luaL_len(L, 2) == n, 2, "as many targets as vectors expected");
	struct lgp *m = lua_newuserdatauv(L, sizeof *m, 0);
	m->gp = NULL;
	luaL_setmetatable(L, GP_META);
	int model = lua_gettop(L);
	luaL_argcheck(L, lua_getfield(L, 3, "cols") == LUA_TTABLE, 3, "options.cols: expected a list of columns");
	luaL_argcheck(L, lua_getfield(L, 3, "levels") == LUA_TTABLE, 3, "options.levels: expected a list of counts");
	m->d = (int)luaL_len(L, -2);
	luaL_argcheck(L, m->d >= 1 && m->d <= MAX_COLS, 3, "options.cols: 1 to 64 columns expected");
	luaL_argcheck(L, (int)luaL_len(L, -1) == m->d, 3, "options.levels: one count per column expected");
	for (int k = 0; k < m->d; k++) {
		lua_geti(L, -2, k + 1);
		lua_geti(L, -2, k + 1);
		lua_Integer col = lua_tointeger(L, -2), lv = lua_tointeger(L, -1);
		luaL_argcheck(L, col >= 1 && col <= INT32_MAX && lv >= 1, 3,
			      "options.cols and levels: positive integers expected");
		m->cols[k] = (int)col;
		m->span[k] = lv > 1 ? (double)(lv - 1) : 1.0;
		lua_pop(L, 2);
	}
	lua_pop(L, 2);
	int fixed = lua_getfield(L, 3, "fixed") == LUA_TTABLE;
	lua_pop(L, 1);
	int ns = 0, nn = 0, ard = 0;
	double *scales = NULL, *noises = NULL, noise = 0;
	if (fixed) {
		lua_getfield(L, 3, "fixed");
		scales = number_list(L, lua_gettop(L), "scales", "fixed.scales", &ns);
		if (ns != m->d)
			return luaL_error(L, "gp.fit: options.fixed.scales: one per column expected (%d, got %d)", m->d, ns);
		if (lua_getfield(L, -2, "noise") != LUA_TNUMBER)
			return luaL_error(L, "gp.fit: options.fixed.noise: expected a number");
		noise = lua_tonumber(L, -1);
		lua_pop(L, 1);
	} else {
		scales = number_list(L, 3, "scales", "scales", &ns);
		noises = number_list(L, 3, "noises", "noises", &nn);
		lua_getfield(L, 3, "ard");
		ard = lua_toboolean(L, -1);
		lua_pop(L, 1);
	}
	if (n == 0)
		return kopt_bind_fail(L, "gp: no points to fit");
	double *X = lua_newuserdatauv(L, sizeof(double) * (size_t)n * (size_t)m->d, 0);
	double *y = lua_newuserdatauv(L, sizeof(double) * (size_t)n, 0);
	for (int i = 0; i < n; i++) {
		if (lua_geti(L, 1, i + 1) != LUA_TTABLE)
			return luaL_error(L, "gp: vector %d is not a table", i + 1);
		read_vector(L, lua_gettop(L), m, X + (size_t)i * (size_t)m->d, "vector", i + 1);
		lua_pop(L, 1);
		lua_geti(L, 2, i + 1);
		int ok;
		y[i] = lua_tonumberx(L, -1, &ok);
		if (!ok)
			return luaL_error(L, "gp: target %d is not a number", i + 1);
		lua_pop(L, 1);
	}
	char err[256];
	if (fixed) {
		m->gp = kopt_gp_refit(X, y, n, m->d, scales, noise, err, sizeof err);
	} else {
		struct kopt_gp_grid grid = {scales, ns, noises, nn, ard};
		m->gp = kopt_gp_fit(X, y, n, m->d, &grid, err, sizeof err);
	}
	if (m->gp == NULL)
		return kopt_bind_fail(L, err);
	lua_pushvalue(L, model);
	return 1;
}

static struct lgp *check_gp(lua_State *L)
{
	struct lgp *m = luaL_checkudata(L, 1, GP_META);
	luaL_argcheck(L, m->gp != NULL, 1, "an unfitted GP");
	return m;
}

static int l_predict(lua_State *L)
{
	struct lgp *m = check_gp(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	double x[MAX_COLS], mean, sd;
	read_vector(L, 2, m, x, "query", 1);
	kopt_gp_predict(m->gp, x, &mean, &sd);
	lua_pushnumber(L, mean);
	lua_pushnumber(L, sd);
	return 2;
}

static int l_params(lua_State *L)
{
	struct lgp *m = check_gp(L);
	double scales[MAX_COLS], noise, lml;
	kopt_gp_params(m->gp, scales, &noise, &lml);
	lua_createtable(L, m->d, 0);
	for (int k = 0; k < m->d; k++) {
		lua_pushnumber(L, scales[k]);
		lua_rawseti(L, -2, k + 1);
	}
	lua_pushnumber(L, noise);
	lua_pushnumber(L, lml);
	return 3;
}

static int l_gc(lua_State *L)
{
	struct lgp *m = luaL_checkudata(L, 1, GP_META);
	kopt_gp_free(m->gp);
	m->gp = NULL;
	return 0;
}

static const luaL_Reg gp_methods[] = {
    {"predict", l_predict},
    {"params", l_params},
    {NULL, NULL},
};

static const luaL_Reg gp_meta[] = {
    {"__gc", l_gc},
    {NULL, NULL},
};

static const luaL_Reg gp_funcs[] = {
    {"fit", l_fit},
    {NULL, NULL},
};

int luaopen_kopt_gp(lua_State *L)
{
	kopt_bind_class(L, GP_META, gp_meta, gp_methods);
	luaL_newlib(L, gp_funcs);
	lua_pushinteger(L, MAX_COLS);
	lua_setfield(L, -2, "MAX_COLUMNS");
	return 1;
}
