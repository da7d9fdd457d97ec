/* kopt.graph, the moves of an expansion as Lua lists (kopt.moves.collect_lists
 * gives them): graph.new_lists makes the lists with room for every proposal,
 * graph.one_knob_moves checks and merges one-knob proposals into them,
 * graph.permutation draws the seeded tie-break order MCGS ranks them by, and
 * g:add_children registers them in one call. Each runs once per
 * expansion over every proposed move (about 50 for the rule moves), which
 * made them the search's hottest loops in Lua. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/graph_lists.h"
#include "graph.h"

struct ranked {
	double rank;
	double prior; /* with lists.tie: prior[i] / lists.scale; else read when linked */
	lua_Integer i;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* lists.<name>[i] as a string; `list` is the index of lists.<name> */
static const char *move_string(lua_State *L, int list, lua_Integer i, const char *name, size_t *len)
{
	lua_rawgeti(L, list, i);
	const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, len) : NULL;
	if (s == NULL)
		luaL_error(L, "graph:add_children: %s[%I] must be a string", name, i);
	return s; /* stays on the stack, so the string lives until the caller pops it */
}

/* The key of a move given as knob[i] and value[i] instead of key[i]: the
 * state's key parts (lists.parts, joined by ',' into `joined` with part k at
 * [start[k], start[k + 1] - 1)) with part knob[i] replaced by value[i], the
 * key kopt.moves would have built, without a Lua string per move. Written to
 * the scratch userdata at stack index `scratch`, grown as needed. */
struct key_parts {
	const char *joined;
	size_t *start; /* n + 1 offsets; start[n]: the length of joined, which ends in ',' */
	lua_Integer n;
	int knob, value, scratch;
};

static const char *built_key(lua_State *L, const struct key_parts *kp, lua_Integer i, size_t *len)
{
	if (kp->n == 0 || !lua_istable(L, kp->knob) || !lua_istable(L, kp->value))
		luaL_error(L,
			   "graph:add_children: key[%I] is missing (and lists.knob, "
			   "lists.value or lists.parts with it)",
			   i);
	if (lua_rawgeti(L, kp->knob, i) != LUA_TNUMBER)
		luaL_error(L, "graph:add_children: key[%I] or knob[%I] must be given", i, i);
	lua_Integer k = lua_tointeger(L, -1);
	lua_pop(L, 1);
	if (k < 1 || k > kp->n)
		luaL_error(L, "graph:add_children: knob[%I] is not a part of the key", i);
	size_t vlen;
	const char *v = move_string(L, kp->value, i, "value", &vlen);
	size_t head = kp->start[k - 1], tail = kp->start[kp->n] - 1 - (kp->start[k] - 1);
	size_t need = head + vlen + tail;
	char *buf = lua_touserdata(L, kp->scratch);
	if (need > lua_rawlen(L, kp->scratch)) {
		buf = lua_newuserdatauv(L, need, 0);
		lua_replace(L, kp->scratch);
	}
	memcpy(buf, kp->joined, head);
	memcpy(buf + head, v, vlen);
	memcpy(buf + head + vlen, kp->joined + kp->start[k] - 1, tail);
	lua_pop(L, 1); /* the value (a string of lists.value, which keeps it) */
	*len = need;
	return buf;
}

/* Reads lists.parts (stack index `parts`, a table or nil) into kp: the
 * joined key in a userdata pushed on the stack (so an error leaks nothing). */
static void read_parts(lua_State *L, int parts, struct key_parts *kp)
{
	kp->n = 0;
	kp->start = NULL;
	kp->joined = "";
	if (!lua_istable(L, parts)) {
		lua_pushnil(L);
		return;
	}
	kp->n = (lua_Integer)lua_rawlen(L, parts);
	luaL_argcheck(L, kp->n < 100000, 3, "too many key parts");
	size_t total = 0;
	for (lua_Integer k = 1; k <= kp->n; k++) {
		size_t len;
		move_string(L, parts, k, "parts", &len);
		lua_pop(L, 1);
		total += len + 1;
	}
	char *mem = lua_newuserdatauv(L, (size_t)(kp->n + 1) * sizeof(size_t) + total + 1, 0);
	kp->start = (size_t *)(void *)mem;
	char *joined = mem + (size_t)(kp->n + 1) * sizeof(size_t);
	size_t at = 0;
	for (lua_Integer k = 1; k <= kp->n; k++) {
		size_t len;
		const char *s = move_string(L, parts, k, "parts", &len);
		kp->start[k - 1] = at;
		memcpy(joined + at, s, len);
		joined[at + len] = ',';
		at += len + 1;
		lua_pop(L, 1);
	}
	kp->start[kp->n] = at;
	kp->joined = joined;
}

/* g:add_children(parent, lists, ranks|nil[, always]) -> created, child, edge
 *
 * The children of a node in one call: `lists` holds the moves as parallel
 * lists {key = {...}, action = {...}, prior = {...}} (kopt.moves.collect_lists
 * gives them), one entry per move (lists.n of them, else #lists.key), and
 * ranks[i] is the rank of move i. Without ranks (nil), move i has the prior
 * prior[i] / lists.scale (default 1) and the rank -(that - tie[i] * 1e-9),
 * with lists.tie a permutation of 1..n: prior descending, ties in the order
 * of tie (MCGS's ranking, without a Lua loop over the moves). A move without
 * key[i] is a one-knob change given as knob[i] and value[i] (a formatted
 * value): its key is lists.parts, the state's formatted values, joined by
 * ',' with part knob[i] replaced by value[i]. In ascending rank (equal ranks in list order), the node of each
 * key is found or added and, unless it is the parent itself, linked from the
 * parent by the action with the prior (an existing edge keeps its prior and
 * statistics). With `always`, each edge is flagged edge_always and an
 * existing edge's prior is raised to the move's when that is larger.
 * Returns the number of edges created and two lists by move: child[i], the
 * node id, negated when the node is new; edge[i], the edge id, negated when
 * the edge already existed, 0 for the parent itself. */
int kopt_bind_graph_add_children(lua_State *L)
{
	struct kopt_graph *g = kopt_bind_check_graph(L, 1);
	uint32_t parent = kopt_bind_check_node(L, g, 2);
	luaL_checktype(L, 3, LUA_TTABLE);
	lua_settop(L, 5);
	int by_tie = lua_isnil(L, 4);
	if (by_tie) {
		lua_getfield(L, 3, "tie");
		lua_replace(L, 4);
		if (!lua_istable(L, 4))
			return luaL_error(L, "graph:add_children: without ranks, lists.tie must be a table");
	}
	luaL_checktype(L, 4, LUA_TTABLE);
	double scale = 1.0;
	if (by_tie && lua_getfield(L, 3, "scale") != LUA_TNIL)
		scale = luaL_checknumber(L, -1);
	int always = lua_toboolean(L, 5);
	lua_settop(L, 4);
	luaL_checkstack(L, 32, "graph:add_children"); /* 15 slots below, a few per move */
	static const char *const names[] = {"key", "action", "prior"};
	for (int f = 0; f < 3; f++) /* 5: keys, 6: actions, 7: priors */
		if (lua_getfield(L, 3, names[f]) != LUA_TTABLE)
			return luaL_error(L, "graph:add_children: lists.%s must be a table",
					  names[f]);
	int has_n;
	lua_getfield(L, 3, "n");
	lua_Integer n = lua_tointegerx(L, -1, &has_n);
	if (!has_n && !lua_isnil(L, -1))
		return luaL_error(L, "graph:add_children: lists.n must be an integer");
	if (!has_n)
		n = (lua_Integer)lua_rawlen(L, 5);
	lua_pop(L, 1);
	luaL_argcheck(L, n >= 0, 3, "lists.n must be a count >= 0");
	luaL_argcheck(
	    L, n < (lua_Integer)(SIZE_MAX / sizeof(struct ranked)) && n < INT32_MAX, 3,
	    "too many moves");
	struct key_parts kp;
	lua_getfield(L, 3, "knob");  /* 8 */
	lua_getfield(L, 3, "value"); /* 9 */
	lua_getfield(L, 3, "parts"); /* 10 */
	read_parts(L, 10, &kp);	     /* 11: the joined parts (or nil) */
	kp.knob = 8;
	kp.value = 9;
	kp.scratch = 12;
	lua_newuserdatauv(L, 64, 0); /* 12: a key built from the parts */
	/* scratch owned by the Lua state, so an error below leaks nothing */
	struct ranked *order = lua_newuserdatauv(L, (size_t)n * sizeof *order + 1, 0); /* 13 */
	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_rawgeti(L, 4, i) != LUA_TNUMBER)
			return luaL_error(L, "graph:add_children: %s[%I] must be a number",
					  by_tie ? "tie" : "ranks", i);
		order[i - 1].rank = lua_tonumber(L, -1);
		order[i - 1].i = i;
		lua_pop(L, 1);
		if (by_tie) {
			/* as MCGS ranked them in Lua: -(p - tie * 1e-9), p = prior / scale */
			if (lua_rawgeti(L, 7, i) != LUA_TNUMBER)
				return luaL_error(L, "graph:add_children: prior[%I] must be a number",
						  i);
			double p = lua_tonumber(L, -1) / scale;
			lua_pop(L, 1);
			order[i - 1].prior = p;
			order[i - 1].rank = -(p - order[i - 1].rank * 1e-9);
		}
	}
	qsort(order, (size_t)n, sizeof *order, cmp_ranked);
	lua_createtable(L, (int)n, 0); /* 14: child */
	lua_createtable(L, (int)n, 0); /* 15: edge */
	lua_Integer made = 0;
	char err[256];
	struct kopt_graph_linker lk;
	kopt_graph_linker_init(g, &lk, parent);
	for (lua_Integer k = 0; k < n; k++) {
		lua_Integer i = order[k].i;
		int t = lua_gettop(L);
		size_t klen;
		const char *key;
		if (lua_rawgeti(L, 5, i) == LUA_TNIL) {
			lua_pop(L, 1);
			key = built_key(L, &kp, i, &klen);
		} else {
			lua_pop(L, 1);
			key = move_string(L, 5, i, "key", &klen);
		}
		uint32_t child, eid;
		int fresh, created;
		if (kopt_graph_add(g, key, klen, &child, &fresh, err, sizeof err) != 0)
			return luaL_error(L, "%s", err);
		lua_Integer c = (lua_Integer)child + 1, e = 0;
		if (child != parent) {
			size_t alen;
			const char *action = move_string(L, 6, i, "action", &alen);
			double prior = order[k].prior;
			if (!by_tie) {
				if (lua_rawgeti(L, 7, i) != LUA_TNUMBER)
					return luaL_error(
					    L, "graph:add_children: prior[%I] must be a number", i);
				prior = lua_tonumber(L, -1);
			}
			if (kopt_graph_linker_link(g, &lk, action, alen, child, prior, &eid,
						   &created, err, sizeof err) != 0)
				return luaL_error(L, "%s", err);
			if (always) {
				struct kopt_graph_edge_view v;
				kopt_graph_set_edge_flags(g, eid, KOPT_GRAPH_EDGE_ALWAYS);
				kopt_graph_edge(g, eid, &v);
				if (!created && prior > v.prior)
					kopt_graph_set_prior(g, eid, prior);
			}
			e = created ? (lua_Integer)eid + 1 : -((lua_Integer)eid + 1);
			made += created;
		}
		lua_settop(L, t);
		lua_pushinteger(L, fresh ? -c : c);
		lua_rawseti(L, 14, i);
		lua_pushinteger(L, e);
		lua_rawseti(L, 15, i);
	}
	lua_pushinteger(L, made);
	lua_insert(L, 14);
	return 3;
}

/* One step of kopt.rng's xoshiro256** (rng:next64), on its state s1..s4. */
static uint64_t next64(uint64_t s[4])
{
	uint64_t r = s[1] * 5;
	r = ((r << 7) | (r >> 57)) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = (s[3] << 45) | (s[3] >> 19);
	return r;
}

/* The generator state s = {s1, s2, s3, s4} of a kopt.rng at stack index idx. */
static void read_state(lua_State *L, int idx, uint64_t s[4])
{
	luaL_checktype(L, idx, LUA_TTABLE);
	for (int k = 0; k < 4; k++) {
		if (lua_rawgeti(L, idx, k + 1) != LUA_TNUMBER || !lua_isinteger(L, -1))
			luaL_argerror(L, idx, "expected a generator state of 4 integers");
		s[k] = (uint64_t)lua_tointeger(L, -1);
		lua_pop(L, 1);
	}
}

static void write_state(lua_State *L, int idx, const uint64_t s[4])
{
	for (int k = 0; k < 4; k++) {
		lua_pushinteger(L, (lua_Integer)s[k]);
		lua_rawseti(L, idx, k + 1);
	}
}

/* graph.permutation(s, n) -> list
 *
 * The list 1..n shuffled (Fisher-Yates: for i = n down to 2, j uniform in
 * [1, i] by rejection, swap) with the xoshiro256** state s = {s1, s2, s3, s4}
 * of a kopt.rng generator, which it advances in place: the same draws and the
 * same list as rng:shuffle({1, ..., n}) (lua/kopt/rng.lua), which it must
 * stay in step with. kopt.rng:permutation calls it. */
int kopt_bind_graph_permutation(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 2);
	luaL_argcheck(L, n >= 0 && n < INT32_MAX, 2, "expected a count >= 0");
	uint64_t s[4];
	read_state(L, 1, s);
	lua_Integer *list = lua_newuserdatauv(L, (size_t)n * sizeof *list + 1, 0);
	for (lua_Integer i = 0; i < n; i++)
		list[i] = i + 1;
	for (lua_Integer i = n; i >= 2; i--) {
		/* Lua: (-1 >> 1) // i * i, the largest multiple of i below 2^63 */
		uint64_t limit = (uint64_t)INT64_MAX / (uint64_t)i * (uint64_t)i;
		uint64_t x;
		do
			x = next64(s) >> 1;
		while (x >= limit);
		lua_Integer j = 1 + (lua_Integer)(x % (uint64_t)i);
		lua_Integer tmp = list[i - 1];
		list[i - 1] = list[j - 1];
		list[j - 1] = tmp;
	}
	write_state(L, 1, s);
	lua_createtable(L, (int)n, 0);
	for (lua_Integer i = 0; i < n; i++) {
		lua_pushinteger(L, list[i]);
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

/* The lists of kopt.moves.collect_lists that one_knob_moves appends to, by
 * stack index. */
enum {
	OUT_ACTION,
	OUT_METHOD,
	OUT_PRIOR,
	OUT_CHANGES,
	OUT_GENERATOR,
	OUT_EXPERT,
	OUT_CHAIN,
	OUT_REPAIR,
	OUT_KNOB,
	OUT_VALUE,
	OUT_PARTS,
	OUT_COUNT
};
static const char *const out_names[OUT_COUNT] = {"action",    "method", "prior", "changes",
						 "generator", "expert", "chain", "repair",
						 "knob",      "value",	"parts"};

/* t[name] without metamethods, pushed; its type */
static int raw_field(lua_State *L, int t, const char *name)
{
	lua_pushstring(L, name);
	return lua_rawget(L, t);
}

/* t[stack[name]] without metamethods, pushed; its type. A field name pushed
 * once and copied costs less than lua_pushstring's lookup of the string
 * every time (9 fields of 50 moves per expansion). */
static int raw_field_at(lua_State *L, int t, int name)
{
	lua_pushvalue(L, name);
	return lua_rawget(L, t);
}

/* A plain table (no metatable, so raw access reads what Lua code would). */
static int plain_table(lua_State *L, int idx)
{
	if (!lua_istable(L, idx))
		return 0;
	if (lua_getmetatable(L, idx)) {
		lua_pop(L, 1);
		return 0;
	}
	return 1;
}

/* graph.one_knob_moves(out, moves, count, generator, n, fast, index, plain_state, by_code, best
 *                      [, derived]) -> n, next
 *
 * The loop of kopt.moves.collect_lists over one generator's proposals
 * moves[1..count], for as long as they are one-knob changes without a patch
 * of a state whose keys need no string (see collect_lists): each is checked
 * (an unknown knob or value, or the state's own value when plain_state, is
 * dropped), merged by its (knob, value) code into by_code (priors summed,
 * method and expert of the larger single prior, best[j]) or appended to the
 * lists of `out` as move n + 1, with its key as knob and value. `fast` is
 * collect_lists' per-space table (fmt, act, code by knob position and value)
 * and `index` the space's knob index. Stops at the first proposal it leaves
 * to the Lua loop (not a plain table, not one change, a patch, a missing
 * entry): returns the number of moves now in the lists and the position of
 * that proposal (count + 1 when all were taken). The same decisions, in the
 * same order, as the Lua loop, which handles the rest.
 *
 * derived (for move tables that are shared and never change): a table, by
 * move table, of what was derived from each valid move before (DERIVED_*),
 * read instead of the move's fields and the per-space tables (a dozen
 * lookups a move), and written for moves seen the first time. */

/* A move's values, in stack slots from `at` on, and in a derived record */
enum {
	DERIVED_KNOB, /* the knob's position i (an integer) */
	DERIVED_VALUE, /* the formatted value */
	DERIVED_ACTION,
	DERIVED_CODE,
	DERIVED_PRIOR, /* tonumber(prior) or 1, at least 1e-3 */
	DERIVED_METHOD,
	DERIVED_EXPERT,
	DERIVED_CHANGES,
	DERIVED_CHAIN,
	DERIVED_REPAIR,
	DERIVED_COUNT
};

/* The fields of move table mv read per move: names + MV_* */
enum { MV_PATCH, MV_CHANGES, MV_POS, MV_I, MV_PRIOR, MV_METHOD, MV_EXPERT, MV_CHAIN, MV_REPAIR };
static const char *const mv_names[] = {"patch",	 "changes", "pos",   "i",     "prior",
				       "method", "expert",  "chain", "repair"};

/* The values of move mv (a plain table) into DERIVED_COUNT slots from `at`
 * (the stack's top is at - 1 on entry, at + DERIVED_COUNT - 1 on success).
 * 1 when they are there; 0 when the move is dropped (an unknown knob or
 * value); -1 when it is not a one-knob change without a patch (the Lua loop
 * takes it). fmt, act, code: fast's per-space tables. */
static int derive_move(lua_State *L, int mv, int at, int names, int index, int fmt, int act,
		       int code)
{
	if (raw_field_at(L, mv, names + MV_PATCH) != LUA_TNIL)
		return -1;
	lua_pop(L, 1);
	if (raw_field_at(L, mv, names + MV_CHANGES) != LUA_TTABLE || !plain_table(L, -1))
		return -1;
	int changes = lua_gettop(L);
	lua_pushnil(L);
	if (lua_next(L, changes) == 0)
		return -1;
	int k1 = changes + 1, v1 = changes + 2;
	lua_pushvalue(L, k1);
	if (lua_next(L, changes) != 0)
		return -1; /* more than one change */
	/* index[k1].pos[v1] ~= nil, else the move is dropped */
	lua_pushvalue(L, k1);
	if (lua_rawget(L, index) != LUA_TTABLE)
		return 0;
	int ix = lua_gettop(L);
	if (raw_field_at(L, ix, names + MV_POS) != LUA_TTABLE)
		return 0;
	lua_pushvalue(L, v1);
	if (lua_rawget(L, -2) == LUA_TNIL)
		return 0;
	raw_field_at(L, ix, names + MV_I);
	lua_Integer i = lua_tointeger(L, -1);
	int scratch = lua_gettop(L);
	lua_pushinteger(L, i);
	/* the formatted value, the action, the code */
	int per[3] = {fmt, act, code};
	for (int t = 0; t < 3; t++) {
		if (lua_rawgeti(L, per[t], i) != LUA_TTABLE)
			return luaL_error(L, "graph.one_knob_moves: no fast tables of knob %I", i);
		lua_pushvalue(L, v1);
		lua_rawget(L, -2);
		lua_replace(L, -2);
	}
	/* prior = tonumber(mv.prior) or 1, at least 1e-3 */
	int pt = raw_field_at(L, mv, names + MV_PRIOR);
	if (pt == LUA_TSTRING) {
		const char *str = lua_tostring(L, -1);
		if (lua_stringtonumber(L, str) == 0)
			lua_pushinteger(L, 1);
		lua_replace(L, -2);
	} else if (pt != LUA_TNUMBER) {
		lua_pop(L, 1);
		lua_pushinteger(L, 1);
	}
	lua_pushinteger(L, 0);
	if (lua_compare(L, -2, -1, LUA_OPLE)) {
		lua_pushnumber(L, 1e-3);
		lua_replace(L, -3);
	}
	lua_pop(L, 1);
	raw_field_at(L, mv, names + MV_METHOD);
	raw_field_at(L, mv, names + MV_EXPERT);
	lua_pushvalue(L, changes);
	raw_field_at(L, mv, names + MV_CHAIN);
	raw_field_at(L, mv, names + MV_REPAIR);
	/* the DERIVED_COUNT values down to `at` (the ranges overlap: upwards) */
	for (int k = 0; k < DERIVED_COUNT; k++)
		lua_copy(L, scratch + 1 + k, at + k);
	lua_settop(L, at + DERIVED_COUNT - 1);
	return 1;
}

int kopt_bind_graph_one_knob_moves(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	luaL_checktype(L, 2, LUA_TTABLE);
	lua_Integer count = luaL_checkinteger(L, 3);
	luaL_checkany(L, 4);
	lua_Integer n = luaL_checkinteger(L, 5);
	luaL_checktype(L, 6, LUA_TTABLE);
	luaL_checktype(L, 7, LUA_TTABLE);
	int plain_state = lua_toboolean(L, 8);
	luaL_checktype(L, 9, LUA_TTABLE);
	luaL_checktype(L, 10, LUA_TTABLE);
	int derived = lua_istable(L, 11) ? 11 : 0;
	lua_settop(L, 11);
	/* 34 slots below, up to 30 more per move: more than Lua grants a C function */
	luaL_checkstack(L, 72, "graph.one_knob_moves");
	const int by_code = 9, best = 10, gen = 4, index = 7;
	int out = lua_gettop(L) + 1; /* 12.. : the lists of out */
	for (int k = 0; k < OUT_COUNT; k++)
		if (raw_field(L, 1, out_names[k]) != LUA_TTABLE)
			return luaL_error(L, "graph.one_knob_moves: out.%s must be a table",
					  out_names[k]);
	int fmt = lua_gettop(L) + 1, act = fmt + 1, code = fmt + 2; /* per-space tables */
	if (raw_field(L, 6, "fmt") != LUA_TTABLE || raw_field(L, 6, "act") != LUA_TTABLE ||
	    raw_field(L, 6, "code") != LUA_TTABLE)
		return luaL_error(L,
				  "graph.one_knob_moves: fast.fmt, .act and .code must be tables");
	if (!plain_table(L, 2))
		goto done_at_first;
	int names = lua_gettop(L) + 1;
	for (size_t k = 0; k < sizeof mv_names / sizeof mv_names[0]; k++)
		lua_pushstring(L, mv_names[k]);
	int base = lua_gettop(L);
	int mv = base + 1, at = base + 2; /* the move, then its values */
	int fv = at + DERIVED_VALUE, action = at + DERIVED_ACTION, cd = at + DERIVED_CODE;
	int prior = at + DERIVED_PRIOR, method = at + DERIVED_METHOD, expert = at + DERIVED_EXPERT;
	int changes = at + DERIVED_CHANGES;
	lua_Integer mi;
	for (mi = 1; mi <= count; mi++) {
		lua_settop(L, base);
		if (lua_rawgeti(L, 2, mi) != LUA_TTABLE || !plain_table(L, -1))
			break; /* nil (the Lua loop stops), or not a table: Lua's */
		int cached = 0;
		if (derived) {
			lua_pushvalue(L, mv);
			cached = lua_rawget(L, derived) == LUA_TTABLE; /* at `at` */
		}
		if (cached) {
			for (int k = 0; k < DERIVED_COUNT; k++)
				lua_rawgeti(L, at, k + 1);
			lua_remove(L, at);
		} else {
			lua_settop(L, mv);
			int got = derive_move(L, mv, at, names, index, fmt, act, code);
			if (got < 0)
				break;
			if (got == 0)
				continue;
			if (derived) {
				lua_pushvalue(L, mv);
				lua_createtable(L, DERIVED_COUNT, 0);
				for (int k = 0; k < DERIVED_COUNT; k++) {
					lua_pushvalue(L, at + k);
					lua_rawseti(L, -2, k + 1);
				}
				lua_rawset(L, derived);
			}
		}
		lua_Integer i = lua_tointeger(L, at + DERIVED_KNOB);
		if (plain_state) {
			lua_rawgeti(L, out + OUT_PARTS, i);
			int same = lua_rawequal(L, fv, -1);
			lua_pop(L, 1);
			if (same)
				continue;
		}
		lua_pushvalue(L, cd);
		if (lua_rawget(L, by_code) != LUA_TNIL) {
			lua_Integer j = lua_tointeger(L, -1);
			lua_rawgeti(L, best, j);
			if (lua_compare(L, -1, prior, LUA_OPLT)) {
				lua_pushvalue(L, method);
				lua_rawseti(L, out + OUT_METHOD, j);
				lua_pushvalue(L, expert);
				lua_rawseti(L, out + OUT_EXPERT, j);
				lua_pushvalue(L, prior);
				lua_rawseti(L, best, j);
			}
			lua_rawgeti(L, out + OUT_PRIOR, j);
			lua_pushvalue(L, prior);
			lua_arith(L, LUA_OPADD);
			lua_rawseti(L, out + OUT_PRIOR, j);
			continue;
		}
		lua_Integer j = ++n;
		lua_pushvalue(L, action);
		lua_rawseti(L, out + OUT_ACTION, j);
		if (lua_toboolean(L, method))
			lua_pushvalue(L, method);
		else
			lua_pushliteral(L, "move");
		lua_rawseti(L, out + OUT_METHOD, j);
		lua_pushvalue(L, prior);
		lua_rawseti(L, out + OUT_PRIOR, j);
		lua_pushvalue(L, changes);
		lua_rawseti(L, out + OUT_CHANGES, j);
		lua_pushvalue(L, gen);
		lua_rawseti(L, out + OUT_GENERATOR, j);
		lua_pushinteger(L, i);
		lua_rawseti(L, out + OUT_KNOB, j);
		lua_pushvalue(L, fv);
		lua_rawseti(L, out + OUT_VALUE, j);
		lua_pushinteger(L, j);
		lua_pushvalue(L, cd);
		lua_insert(L, -2);
		lua_rawset(L, by_code);
		lua_pushvalue(L, prior);
		lua_rawseti(L, best, j);
		/* the lists with holes get only what the move has */
		if (!lua_isnil(L, expert)) {
			lua_pushvalue(L, expert);
			lua_rawseti(L, out + OUT_EXPERT, j);
		}
		if (!lua_isnil(L, at + DERIVED_CHAIN)) {
			lua_pushvalue(L, at + DERIVED_CHAIN);
			lua_rawseti(L, out + OUT_CHAIN, j);
		}
		if (!lua_isnil(L, at + DERIVED_REPAIR)) {
			lua_pushvalue(L, at + DERIVED_REPAIR);
			lua_rawseti(L, out + OUT_REPAIR, j);
		}
	}
	lua_pushinteger(L, n);
	lua_pushinteger(L, mi);
	return 2;
done_at_first:
	lua_pushinteger(L, n);
	lua_pushinteger(L, 1);
	return 2;
}

/* graph.new_lists(size, names[, t]) -> t
 *
 * t (a new table when not given) with t[name] a new empty list with room for
 * `size` entries for every name in the list `names`: kopt.moves.collect_lists
 * fills a handful of lists per expansion, and a list grown entry by entry is
 * reallocated at 1, 2, 4, ... 64 entries. */
int kopt_bind_graph_new_lists(lua_State *L)
{
	lua_Integer size = luaL_checkinteger(L, 1);
	luaL_argcheck(L, size >= 0 && size < INT32_MAX, 1, "expected a size >= 0");
	luaL_checktype(L, 2, LUA_TTABLE);
	if (lua_isnoneornil(L, 3))
		lua_newtable(L);
	else
		luaL_checktype(L, 3, LUA_TTABLE);
	lua_settop(L, 3);
	lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
	for (lua_Integer k = 1; k <= n; k++) {
		if (lua_rawgeti(L, 2, k) != LUA_TSTRING)
			return luaL_error(L, "graph.new_lists: names[%I] must be a string", k);
		lua_createtable(L, (int)size, 0);
		lua_rawset(L, 3);
	}
	return 1;
}

/* rng:uniform() */
static double uniform(uint64_t s[4])
{
	return (double)(next64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* rng:normal() */
static double normal(uint64_t s[4])
{
	double u1 = uniform(s), u2 = uniform(s);
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* A Gamma(a) variate (Marsaglia-Tsang; boosted for a < 1), drawn as the
 * gamma() MCGS had in Lua: the same draws in the same order and the same
 * floating-point operations (libm's pow, log, sqrt, cos, as Lua's ^ and math
 * functions), so its Dirichlet noise is unchanged. */
static double gamma_variate(uint64_t s[4], double a)
{
	if (a < 1) {
		double g = gamma_variate(s, a + 1);
		return g * pow(uniform(s), 1 / a);
	}
	double d = a - 1.0 / 3.0;
	double c = 1 / sqrt(9 * d);
	for (;;) {
		double x, v;
		do {
			x = normal(s);
			v = 1 + c * x;
		} while (!(v > 0));
		v = v * v * v;
		double u = uniform(s);
		if (u < 1 - 0.0331 * pow(x, 4) || log(u) < 0.5 * x * x + d * (1 - v + log(v)))
			return d * v;
	}
}

/* graph.gammas(s, n, a) -> list, sum
 *
 * n Gamma(a) variates (a > 0) from the kopt.rng state s (advanced in place)
 * and their sum in list order: MCGS's Dirichlet noise on the priors of an
 * expansion below the root, one variate per move. kopt.rng:gammas calls it. */
int kopt_bind_graph_gammas(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 2);
	luaL_argcheck(L, n >= 0 && n < INT32_MAX, 2, "expected a count >= 0");
	double a = luaL_checknumber(L, 3);
	luaL_argcheck(L, a > 0, 3, "expected a shape > 0");
	uint64_t s[4];
	read_state(L, 1, s);
	lua_createtable(L, (int)n, 0);
	double sum = 0;
	for (lua_Integer i = 1; i <= n; i++) {
		double g = gamma_variate(s, a);
		sum = sum + g;
		lua_pushnumber(L, g);
		lua_rawseti(L, -2, i);
	}
	write_state(L, 1, s);
	lua_pushnumber(L, sum);
	return 2;
}

/* graph.normalise(list, n): list[i] / (list[1] + ... + list[n]) for i = 1..n,
 * in place, the sum taken in order as Lua's loop took it (numbers only: an
 * integer sum of integers is exact in a double below 2^53, so the quotients
 * are the same). kopt.moves.collect_lists normalises its priors with it. */
int kopt_bind_graph_normalise(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_Integer n = luaL_checkinteger(L, 2);
	double sum = 0;
	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_rawgeti(L, 1, i) != LUA_TNUMBER)
			return luaL_error(L, "graph.normalise: list[%I] must be a number", i);
		sum = sum + lua_tonumber(L, -1);
		lua_pop(L, 1);
	}
	for (lua_Integer i = 1; i <= n; i++) {
		lua_rawgeti(L, 1, i);
		double x = lua_tonumber(L, -1);
		lua_pop(L, 1);
		lua_pushnumber(L, x / sum);
		lua_rawseti(L, 1, i);
	}
	return 0;
}
