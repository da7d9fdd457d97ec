/* kopt.graph: the search graph store for Lua (see graph.h).
 *
 *   local graph = require("kopt.graph")
 *   local g = graph.new([expected_nodes])      -- or graph.load(path) -> g | nil, msg
 *   local id, created = g:add(key)             -- node ids and edge ids are integers from 1
 *   g:find(key) -> id|nil ; g:set(id, {config=, source=, status=, time_ms=, reward=, flags=})
 *   g:node(id) -> {key=, config=, source=, status=, time_ms=, reward=, visits=, flags=,
 *                  edges=, parents=, edge_visits=}
 *   g:reward(id), g:flags(id), g:set_flags(id, f), g:key(id), g:visit(id[, k])
 *   g:counts(id) -> visits, number of edges ; g:ends(eid) -> child, parent
 *   local eid, created = g:link(parent, action, child[, prior])
 *   g:add_children(parent, lists, ranks|nil[, always]) -> created, child, edge  (g:add and
 *     g:link for moves as lists {key={}, action={}, prior={}}, in ascending rank, or by prior
 *     and lists.tie: see graph_lists.c)
 *   graph.permutation(s, n) -> 1..n shuffled as kopt.rng:shuffle would (graph_lists.c)
 *   graph.one_knob_moves(...) -> kopt.moves.collect_lists' loop over one-knob moves (graph_lists.c)
 *   graph.gammas(s, n, a) -> n Gamma(a) variates as kopt.rng would draw them, sum (graph_lists.c)
 *   graph.normalise(list, n): list[1..n] divided by their sum in place (graph_lists.c)
 *   graph.new_lists(size, names[, t]) -> t with t[name] an empty list with room for size (graph_lists.c)
 *   g:find_edge(parent, action) -> eid|nil ; g:edges(id) -> {eid, ...}
 *   g:edge(eid) -> {action=, parent=, child=, n=, w=, q=, max=, prior=, fails=, vloss=, flags=}
 *   g:backup(eid, value[, failed]) ; g:vloss(eid, delta) ; g:set_prior(eid, p)
 *   g:descend(path) (vloss +1 per edge, a visit per parent) ; g:backup_path(path, value[, failed])
 *   g:set_edge_flags(eid, f)   (graph.edge_always: selectable whatever the widening limit)
 *   g:select(id, {c_puct=, fpu=, beta_max=, vl_value=, limit=, skip_mask=, max_fails=}) -> eid|nil
 *     (or the same as positional numbers: g:select(id, c_puct, fpu, beta_max, vl_value, limit, ...))
 *   g:greedy(id, lambda, fpu, beta_max, skip_mask) -> eid|nil, eligible ; g:eligible(id, mask) -> {eid}
 *   g:first_eligible(id, mask) -> the first eid of g:eligible(id, mask), or nil
 *   g:size() -> nodes, edges ; g:digest() -> hex ; g:save(path) -> true | nil, msg
 *   g:close()   (also __gc and __close)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/graph_lists.h"
#include "bind/modules.h"
#include "graph.h"

#define GRAPH_MT "kopt.Graph"

struct lgraph {
	struct kopt_graph *g; /* NULL once closed */
};

/* The metatable is the first upvalue of every function in graph_methods
 * (luaopen_kopt_graph): comparing it is the fast path, as luaL_checkudata
 * finds the metatable by name each time, a tenth of a graph method call
 * (MCGS makes about 70 per iteration). Anything else takes the
 * luaL_checkudata path, which raises with the usual message. */
static struct kopt_graph *check_graph(lua_State *L, int idx)
{
	struct lgraph *lg = lua_touserdata(L, idx);
	int fast = lg != NULL && lua_getmetatable(L, idx);
	if (fast) {
		fast = lua_rawequal(L, -1, lua_upvalueindex(1));
		lua_pop(L, 1);
	}
	if (!fast)
		lg = luaL_checkudata(L, idx, GRAPH_MT);
	if (lg->g == NULL)
		luaL_argerror(L, idx, "graph is closed");
	return lg->g;
}

/* Lua ids are 1-based; returns the 0-based id after a range check. */
static uint32_t check_node(lua_State *L, struct kopt_graph *g, int idx)
{
	lua_Integer id = luaL_checkinteger(L, idx);
	luaL_argcheck(L, id >= 1 && (size_t)id <= kopt_graph_node_count(g), idx, "no such node");
	return (uint32_t)(id - 1);
}

struct kopt_graph *kopt_bind_check_graph(lua_State *L, int idx)
{
	return check_graph(L, idx);
}

uint32_t kopt_bind_check_node(lua_State *L, struct kopt_graph *g, int idx)
{
	return check_node(L, g, idx);
}

static uint32_t check_edge(lua_State *L, struct kopt_graph *g, int idx)
{
	lua_Integer id = luaL_checkinteger(L, idx);
	luaL_argcheck(L, id >= 1 && (size_t)id <= kopt_graph_edge_count(g), idx, "no such edge");
	return (uint32_t)(id - 1);
}

static void push_id(lua_State *L, uint32_t id)
{
	if (id == KOPT_GRAPH_NONE)
		lua_pushnil(L);
	else
		lua_pushinteger(L, (lua_Integer)id + 1);
}

static void push_new(lua_State *L, struct kopt_graph *g)
{
	struct lgraph *lg = lua_newuserdatauv(L, sizeof *lg, 0);
	lg->g = NULL;
	luaL_setmetatable(L, GRAPH_MT);
	lg->g = g;
}

static int l_new(lua_State *L)
{
	lua_Integer n = luaL_optinteger(L, 1, 0);
	luaL_argcheck(L, n >= 0 && n <= (lua_Integer)KOPT_GRAPH_RESERVE_MAX, 1,
		      "expected a count of nodes from 0 to 2^30");
	struct lgraph *lg = lua_newuserdatauv(L, sizeof *lg, 0);
	lg->g = NULL;
	luaL_setmetatable(L, GRAPH_MT);
	lg->g = kopt_graph_new((size_t)n);
	if (lg->g == NULL)
		return luaL_error(L, "out of memory creating a graph");
	return 1;
}

static int l_load(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	char err[512];
	struct kopt_graph *g;
	if (kopt_graph_load(path, &g, err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	push_new(L, g);
	return 1;
}

static int l_close(lua_State *L)
{
	struct lgraph *lg = luaL_checkudata(L, 1, GRAPH_MT);
	kopt_graph_free(lg->g);
	lg->g = NULL;
	return 0;
}

static int l_tostring(lua_State *L)
{
	struct lgraph *lg = luaL_checkudata(L, 1, GRAPH_MT);
	if (lg->g == NULL)
		lua_pushliteral(L, "kopt.Graph (closed)");
	else
		lua_pushfstring(L, "kopt.Graph (%I nodes, %I edges)",
				(lua_Integer)kopt_graph_node_count(lg->g),
				(lua_Integer)kopt_graph_edge_count(lg->g));
	return 1;
}

/* A string argument a graph stores (key, action): at most 16 MiB - 1. */
static const char *check_graph_str(lua_State *L, int idx, size_t *len)
{
	const char *s = luaL_checklstring(L, idx, len);
	luaL_argcheck(L, *len <= KOPT_GRAPH_STR_MAX, idx, "string longer than 16 MiB - 1");
	return s;
}

/* A number the search ranks by (a value backed up, a prior): NaN would win
 * every comparison it met, so it is refused here. */
static double check_finite(lua_State *L, int idx)
{
	double x = luaL_checknumber(L, idx);
	luaL_argcheck(L, isfinite(x), idx, "expected a finite number");
	return x;
}

static int l_add(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	size_t len;
	const char *key = check_graph_str(L, 2, &len);
	uint32_t id;
	int created;
	char err[256];
	if (kopt_graph_add(g, key, len, &id, &created, err, sizeof err) != 0)
		return luaL_error(L, "%s", err);
	push_id(L, id);
	lua_pushboolean(L, created);
	return 2;
}

static int l_find(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	size_t len;
	const char *key = luaL_checklstring(L, 2, &len);
	push_id(L, kopt_graph_find(g, key, len));
	return 1;
}

static void set_str_field(lua_State *L, struct kopt_graph *g, uint32_t id, const char *name,
			  int which)
{
	if (lua_getfield(L, 3, name) != LUA_TNIL) {
		size_t len;
		const char *s = lua_tolstring(L, -1, &len);
		if (s == NULL)
			luaL_error(L, "graph:set: field '%s' must be a string", name);
		if (len > KOPT_GRAPH_STR_MAX)
			luaL_error(L, "graph:set: field '%s' is longer than 16 MiB - 1", name);
		if (kopt_graph_set_str(g, id, which, s, len) != 0)
			luaL_error(L, "out of memory in graph:set");
	}
	lua_pop(L, 1);
}

static int l_set(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	luaL_checktype(L, 3, LUA_TTABLE);
	set_str_field(L, g, id, "config", KOPT_GRAPH_STR_CONFIG);
	set_str_field(L, g, id, "source", KOPT_GRAPH_STR_SOURCE);
	set_str_field(L, g, id, "status", KOPT_GRAPH_STR_STATUS);
	struct kopt_graph_node_view v;
	kopt_graph_node(g, id, &v);
	double t = v.time_ms, r = v.reward;
	if (lua_getfield(L, 3, "time_ms") != LUA_TNIL)
		t = luaL_checknumber(L, -1);
	if (lua_getfield(L, 3, "reward") != LUA_TNIL)
		r = luaL_checknumber(L, -1);
	kopt_graph_set_result(g, id, t, r);
	if (lua_getfield(L, 3, "flags") != LUA_TNIL) {
		lua_Integer f = luaL_checkinteger(L, -1);
		if (f < 0 || f > (lua_Integer)UINT32_MAX)
			return luaL_error(L, "graph:set: field 'flags' must be 32-bit flags");
		kopt_graph_set_flags(g, id, (uint32_t)f);
	}
	return 0;
}

static void push_number_or_nil(lua_State *L, double x)
{
	if (isnan(x))
		lua_pushnil(L);
	else
		lua_pushnumber(L, x);
}

static int l_node(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	struct kopt_graph_node_view v;
	kopt_graph_node(g, id, &v);
	lua_createtable(L, 0, 11);
	lua_pushlstring(L, v.key, v.key_len);
	lua_setfield(L, -2, "key");
	lua_pushlstring(L, v.config, v.config_len);
	lua_setfield(L, -2, "config");
	lua_pushlstring(L, v.source, v.source_len);
	lua_setfield(L, -2, "source");
	lua_pushlstring(L, v.status, v.status_len);
	lua_setfield(L, -2, "status");
	push_number_or_nil(L, v.time_ms);
	lua_setfield(L, -2, "time_ms");
	push_number_or_nil(L, v.reward);
	lua_setfield(L, -2, "reward");
	lua_pushinteger(L, v.visits);
	lua_setfield(L, -2, "visits");
	lua_pushinteger(L, v.flags);
	lua_setfield(L, -2, "flags");
	lua_pushinteger(L, v.n_edges);
	lua_setfield(L, -2, "edges");
	lua_pushinteger(L, v.n_in);
	lua_setfield(L, -2, "parents");
	lua_pushinteger(L, (lua_Integer)v.edge_visits);
	lua_setfield(L, -2, "edge_visits");
	return 1;
}

static int l_reward(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	push_number_or_nil(L, kopt_graph_reward(g, check_node(L, g, 2)));
	return 1;
}

static int l_flags(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	lua_pushinteger(L, kopt_graph_flags(g, check_node(L, g, 2)));
	return 1;
}

static int l_key(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	struct kopt_graph_node_view v;
	kopt_graph_node(g, check_node(L, g, 2), &v);
	lua_pushlstring(L, v.key, v.key_len);
	return 1;
}

static int l_set_flags(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	lua_Integer f = luaL_checkinteger(L, 3);
	luaL_argcheck(L, f >= 0 && f <= (lua_Integer)UINT32_MAX, 3, "expected 32-bit flags");
	kopt_graph_set_flags(g, id, (uint32_t)f);
	return 0;
}

/* visits, number of outgoing edges */
static int l_counts(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	struct kopt_graph_node_view v;
	kopt_graph_node(g, check_node(L, g, 2), &v);
	lua_pushinteger(L, v.visits);
	lua_pushinteger(L, v.n_edges);
	return 2;
}

/* child, parent of an edge */
static int l_ends(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	struct kopt_graph_edge_view v;
	kopt_graph_edge(g, check_edge(L, g, 2), &v);
	lua_pushinteger(L, (lua_Integer)v.child + 1);
	lua_pushinteger(L, (lua_Integer)v.parent + 1);
	return 2;
}

static int l_visit(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	lua_Integer k = luaL_optinteger(L, 3, 1);
	luaL_argcheck(L, k >= 0 && k <= 1000000, 3, "expected a small count >= 0");
	kopt_graph_visit(g, id, (uint32_t)k);
	return 0;
}

static int l_link(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t parent = check_node(L, g, 2);
	size_t len;
	const char *action = check_graph_str(L, 3, &len);
	uint32_t child = check_node(L, g, 4);
	double prior = lua_isnoneornil(L, 5) ? 1.0 : check_finite(L, 5);
	uint32_t eid;
	int created;
	char err[256];
	if (kopt_graph_link(g, parent, action, len, child, prior, &eid, &created, err,
			    sizeof err) != 0)
		return luaL_error(L, "%s", err);
	push_id(L, eid);
	lua_pushboolean(L, created);
	return 2;
}

static int l_find_edge(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t parent = check_node(L, g, 2);
	size_t len;
	const char *action = luaL_checklstring(L, 3, &len);
	push_id(L, kopt_graph_find_edge(g, parent, action, len));
	return 1;
}

static int l_edges(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	lua_newtable(L);
	lua_Integer i = 1;
	for (uint32_t e = kopt_graph_first_edge(g, id); e != KOPT_GRAPH_NONE;
	     e = kopt_graph_next_edge(g, e)) {
		lua_pushinteger(L, (lua_Integer)e + 1);
		lua_rawseti(L, -2, i++);
	}
	return 1;
}

static int l_edge(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	struct kopt_graph_edge_view v;
	kopt_graph_edge(g, check_edge(L, g, 2), &v);
	lua_createtable(L, 0, 10);
	lua_pushlstring(L, v.action, v.action_len);
	lua_setfield(L, -2, "action");
	lua_pushinteger(L, (lua_Integer)v.parent + 1);
	lua_setfield(L, -2, "parent");
	lua_pushinteger(L, (lua_Integer)v.child + 1);
	lua_setfield(L, -2, "child");
	lua_pushinteger(L, v.n);
	lua_setfield(L, -2, "n");
	lua_pushnumber(L, v.w);
	lua_setfield(L, -2, "w");
	if (v.n > 0) {
		lua_pushnumber(L, v.w / v.n);
		lua_setfield(L, -2, "q");
		lua_pushnumber(L, v.max);
		lua_setfield(L, -2, "max");
	}
	lua_pushnumber(L, v.prior);
	lua_setfield(L, -2, "prior");
	lua_pushinteger(L, v.fails);
	lua_setfield(L, -2, "fails");
	lua_pushinteger(L, v.vloss);
	lua_setfield(L, -2, "vloss");
	lua_pushinteger(L, v.flags);
	lua_setfield(L, -2, "flags");
	return 1;
}

static int l_backup(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t eid = check_edge(L, g, 2);
	double value = check_finite(L, 3);
	kopt_graph_backup(g, eid, value, lua_toboolean(L, 4));
	return 0;
}

static int l_vloss(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t eid = check_edge(L, g, 2);
	lua_Integer d = luaL_checkinteger(L, 3);
	luaL_argcheck(L, d >= -1000000 && d <= 1000000, 3, "expected a small count");
	kopt_graph_vloss(g, eid, (int)d);
	return 0;
}

/* The edge ids of a path (a list at stack index idx) as 0-based ids, in a
 * userdata pushed on the stack; *n gets the count. Raises on a bad id. */
static uint32_t *check_path(lua_State *L, struct kopt_graph *g, int idx, lua_Integer *n)
{
	luaL_checktype(L, idx, LUA_TTABLE);
	*n = (lua_Integer)lua_rawlen(L, idx);
	luaL_argcheck(L, *n < INT32_MAX, idx, "path too long");
	uint32_t *ids = lua_newuserdatauv(L, (size_t)*n * sizeof *ids + 1, 0);
	for (lua_Integer i = 1; i <= *n; i++) {
		int isnum;
		lua_rawgeti(L, idx, i);
		lua_Integer id = lua_tointegerx(L, -1, &isnum);
		if (!isnum || id < 1 || (size_t)id > kopt_graph_edge_count(g))
			luaL_error(L, "graph: path[%I] is not an edge id", i);
		ids[i - 1] = (uint32_t)(id - 1);
		lua_pop(L, 1);
	}
	return ids;
}

/* g:descend(path): a selection's path taken, as MCGS marks it while its leaf
 * is measured: one virtual loss on every edge and a visit of its parent
 * (g:vloss(e, 1) and g:visit(parent) per edge, in one call: paths are a
 * dozen edges and every candidate has one). All ids are checked first. */
static int l_descend(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	lua_Integer n;
	uint32_t *ids = check_path(L, g, 2, &n);
	for (lua_Integer i = 0; i < n; i++) {
		struct kopt_graph_edge_view v;
		kopt_graph_vloss(g, ids[i], 1);
		kopt_graph_edge(g, ids[i], &v);
		kopt_graph_visit(g, v.parent, 1);
	}
	return 0;
}

/* g:backup_path(path, value[, failed]): the leaf's value backed up along the
 * path it was selected by: the virtual loss of g:descend taken back and
 * g:backup(e, value, failed) on every edge, in order. */
static int l_backup_path(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	double value = check_finite(L, 3);
	int failed = lua_toboolean(L, 4);
	lua_Integer n;
	uint32_t *ids = check_path(L, g, 2, &n);
	for (lua_Integer i = 0; i < n; i++) {
		kopt_graph_vloss(g, ids[i], -1);
		kopt_graph_backup(g, ids[i], value, failed);
	}
	return 0;
}

static int l_set_edge_flags(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t eid = check_edge(L, g, 2);
	lua_Integer f = luaL_checkinteger(L, 3);
	luaL_argcheck(L, f >= 0 && f <= (lua_Integer)UINT32_MAX, 3, "expected 32-bit flags");
	kopt_graph_set_edge_flags(g, eid, (uint32_t)f);
	return 0;
}

static int l_set_prior(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t eid = check_edge(L, g, 2);
	kopt_graph_set_prior(g, eid, check_finite(L, 3));
	return 0;
}

static double opt_num(lua_State *L, int t, const char *name, double dflt)
{
	double x = dflt;
	if (lua_getfield(L, t, name) != LUA_TNIL)
		x = luaL_checknumber(L, -1);
	lua_pop(L, 1);
	return x;
}

static uint32_t opt_u32(lua_State *L, int t, const char *name, uint32_t dflt)
{
	uint32_t x = dflt;
	if (lua_getfield(L, t, name) != LUA_TNIL) {
		lua_Integer v = luaL_checkinteger(L, -1);
		x = v < 0 ? 0u : v > (lua_Integer)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	}
	lua_pop(L, 1);
	return x;
}

static uint32_t opt_u32_arg(lua_State *L, int idx, uint32_t dflt)
{
	if (lua_isnoneornil(L, idx))
		return dflt;
	lua_Integer v = luaL_checkinteger(L, idx);
	return v < 0 ? 0u : v > (lua_Integer)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* g:select(id, {c_puct=, ...}) or, without a table per call on hot paths,
 * g:select(id, c_puct, fpu, beta_max, vl_value, limit, skip_mask, max_fails). */
static int l_select(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	struct kopt_graph_puct p = {1.5, 0.0, 0.0, -1.0, UINT32_MAX, 0, 0};
	if (lua_type(L, 3) == LUA_TNUMBER) {
		p.c_puct = luaL_checknumber(L, 3);
		p.fpu = luaL_optnumber(L, 4, p.fpu);
		p.beta_max = luaL_optnumber(L, 5, p.beta_max);
		p.vl_value = luaL_optnumber(L, 6, p.vl_value);
		p.limit = opt_u32_arg(L, 7, p.limit);
		p.skip_mask = opt_u32_arg(L, 8, p.skip_mask);
		p.max_fails = opt_u32_arg(L, 9, p.max_fails);
	} else if (!lua_isnoneornil(L, 3)) {
		luaL_checktype(L, 3, LUA_TTABLE);
		p.c_puct = opt_num(L, 3, "c_puct", p.c_puct);
		p.fpu = opt_num(L, 3, "fpu", p.fpu);
		p.beta_max = opt_num(L, 3, "beta_max", p.beta_max);
		p.vl_value = opt_num(L, 3, "vl_value", p.vl_value);
		p.limit = opt_u32(L, 3, "limit", p.limit);
		p.skip_mask = opt_u32(L, 3, "skip_mask", p.skip_mask);
		p.max_fails = opt_u32(L, 3, "max_fails", p.max_fails);
	}
	push_id(L, kopt_graph_select(g, id, &p));
	return 1;
}

/* g:greedy(id, lambda, fpu, beta_max, skip_mask) -> eid|nil, eligible count */
static int l_greedy(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	double lambda = luaL_checknumber(L, 3), fpu = luaL_checknumber(L, 4);
	double beta = luaL_checknumber(L, 5);
	uint32_t mask = opt_u32_arg(L, 6, 0), count;
	push_id(L, kopt_graph_greedy(g, id, lambda, fpu, beta, mask, &count));
	lua_pushinteger(L, count);
	return 2;
}

/* g:eligible(id, skip_mask) -> {eid, ...} whose child has no flag in the mask */
static int l_eligible(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	uint32_t mask = opt_u32_arg(L, 3, 0);
	lua_newtable(L);
	lua_Integer i = 1;
	for (uint32_t e = kopt_graph_first_edge(g, id); e != KOPT_GRAPH_NONE;
	     e = kopt_graph_next_edge(g, e)) {
		struct kopt_graph_edge_view v;
		kopt_graph_edge(g, e, &v);
		if (kopt_graph_flags(g, v.child) & mask)
			continue;
		lua_pushinteger(L, (lua_Integer)e + 1);
		lua_rawseti(L, -2, i++);
	}
	return 1;
}

static int l_first_eligible(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	uint32_t id = check_node(L, g, 2);
	push_id(L, kopt_graph_first_eligible(g, id, opt_u32_arg(L, 3, 0)));
	return 1;
}

static int l_size(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	lua_pushinteger(L, (lua_Integer)kopt_graph_node_count(g));
	lua_pushinteger(L, (lua_Integer)kopt_graph_edge_count(g));
	return 2;
}

static int l_digest(lua_State *L)
{
	char hex[17];
	kopt_graph_digest(check_graph(L, 1), hex);
	lua_pushstring(L, hex);
	return 1;
}

static int l_save(lua_State *L)
{
	struct kopt_graph *g = check_graph(L, 1);
	const char *path = luaL_checkstring(L, 2);
	char err[512];
	if (kopt_graph_save(g, path, err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	return kopt_bind_ok(L);
}

static const luaL_Reg graph_methods[] = {
	{"add", l_add},
	{"find", l_find},
	{"set", l_set},
	{"node", l_node},
	{"reward", l_reward},
	{"flags", l_flags},
	{"set_flags", l_set_flags},
	{"counts", l_counts},
	{"ends", l_ends},
	{"key", l_key},
	{"visit", l_visit},
	{"link", l_link},
	{"add_children", kopt_bind_graph_add_children},
	{"find_edge", l_find_edge},
	{"edges", l_edges},
	{"edge", l_edge},
	{"backup", l_backup},
	{"descend", l_descend},
	{"backup_path", l_backup_path},
	{"vloss", l_vloss},
	{"set_prior", l_set_prior},
	{"set_edge_flags", l_set_edge_flags},
	{"select", l_select},
	{"greedy", l_greedy},
	{"eligible", l_eligible},
	{"first_eligible", l_first_eligible},
	{"size", l_size},
	{"digest", l_digest},
	{"save", l_save},
	{"close", l_close},
	{NULL, NULL},
};

static const luaL_Reg graph_meta[] = {
	{"__gc", l_close},
	{"__close", l_close},
	{"__tostring", l_tostring},
	{NULL, NULL},
};

static const luaL_Reg graph_funcs[] = {
	{"new", l_new},
	{"load", l_load},
	{"permutation", kopt_bind_graph_permutation},
	{"one_knob_moves", kopt_bind_graph_one_knob_moves},
	{"new_lists", kopt_bind_graph_new_lists},
	{"gammas", kopt_bind_graph_gammas},
	{"normalise", kopt_bind_graph_normalise},
	{NULL, NULL},
};

int luaopen_kopt_graph(lua_State *L)
{
	/* kopt_bind_class, with the metatable as the methods' upvalue (check_graph) */
	luaL_newmetatable(L, GRAPH_MT);
	luaL_setfuncs(L, graph_meta, 0);
	lua_newtable(L);
	lua_pushvalue(L, -2);
	luaL_setfuncs(L, graph_methods, 1);
	lua_setfield(L, -2, "__index");
	lua_pop(L, 1);
	luaL_newlib(L, graph_funcs);
	lua_pushinteger(L, KOPT_GRAPH_VERSION);
	lua_setfield(L, -2, "version");
	lua_pushinteger(L, KOPT_GRAPH_EDGE_ALWAYS);
	lua_setfield(L, -2, "edge_always");
	return 1;
}
