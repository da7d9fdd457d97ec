/* kopt.ptx: the static analysis of core/ptx.c as Lua tables.
 *
 *   parse(text) -> { lines, instructions, functions = {...}, regions = {...} }
 *                | nil, err     (not PTX, truncated, malformed)
 *   fields()    -> { {name, doc}, ... }: the work fields, in order
 *
 * A region: { id, func, parent (id; nil for a function), depth, kind
 * ("function", "stage", "loop"), name, trip (nil when unknown), blocks,
 * ptx_lines = {first, last}, src_lines = {first, last} (nil without .loc),
 * work, total, weighted = {<field> = n, ...} }. A function: { name, entry,
 * regs = {pred, b16, b32, b64}, smem, blocks, loops, ptx_lines, src_file,
 * regions = {ids} }. Ids are 1-based indices into `regions`. */
#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "ptx.h"

static void set_int(lua_State *L, const char *key, lua_Integer v)
{
	lua_pushinteger(L, v);
	lua_setfield(L, -2, key);
}

static void push_range(lua_State *L, const char *key, int first, int last)
{
	if (first <= 0)
		return;
	lua_createtable(L, 2, 0);
	lua_pushinteger(L, first);
	lua_rawseti(L, -2, 1);
	lua_pushinteger(L, last);
	lua_rawseti(L, -2, 2);
	lua_setfield(L, -2, key);
}

static void push_work(lua_State *L, const char *key, const struct kopt_ptx_work *w)
{
	lua_createtable(L, 0, 32);
#define KOPT_PTX_X(name, doc) set_int(L, #name, w->name);
	KOPT_PTX_WORK_FIELDS(KOPT_PTX_X)
#undef KOPT_PTX_X
	lua_setfield(L, -2, key);
}

static const char *kind_name(enum kopt_ptx_region_kind k)
{
	return k == KOPT_PTX_FUNCTION ? "function" : k == KOPT_PTX_STAGE ? "stage" : "loop";
}

static void push_region(lua_State *L, const struct kopt_ptx_region *r, int id)
{
	lua_createtable(L, 0, 16);
	set_int(L, "id", id);
	set_int(L, "func", r->function + 1);
	if (r->parent >= 0)
		set_int(L, "parent", r->parent + 1);
	set_int(L, "depth", r->depth);
	lua_pushstring(L, kind_name(r->kind));
	lua_setfield(L, -2, "kind");
	lua_pushstring(L, r->name);
	lua_setfield(L, -2, "name");
	if (r->trip >= 0)
		set_int(L, "trip", r->trip);
	set_int(L, "blocks", r->n_blocks);
	push_range(L, "ptx_lines", r->ptx_first, r->ptx_last);
	push_range(L, "src_lines", r->src_first, r->src_last);
	push_work(L, "work", &r->work);
	push_work(L, "total", &r->total);
	push_work(L, "weighted", &r->weighted);
}

static void push_function(lua_State *L, const struct kopt_ptx_function *f)
{
	lua_createtable(L, 0, 12);
	lua_pushstring(L, f->name);
	lua_setfield(L, -2, "name");
	lua_pushboolean(L, f->is_entry);
	lua_setfield(L, -2, "entry");
	lua_createtable(L, 0, 4);
	set_int(L, "pred", f->regs_pred);
	set_int(L, "b16", f->regs_16);
	set_int(L, "b32", f->regs_32);
	set_int(L, "b64", f->regs_64);
	lua_setfield(L, -2, "regs");
	set_int(L, "smem", f->smem_bytes);
	set_int(L, "blocks", f->n_blocks);
	set_int(L, "loops", f->n_loops);
	push_range(L, "ptx_lines", f->ptx_first, f->ptx_last);
	if (f->src_file != NULL) {
		lua_pushstring(L, f->src_file);
		lua_setfield(L, -2, "src_file");
	}
	lua_createtable(L, f->n_regions, 0);
	for (int i = 0; i < f->n_regions; i++) {
		lua_pushinteger(L, f->region + i + 1);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "regions");
}

/* The parse result lives in a box whose __gc frees it, so a memory error
 * while the tables are built leaks nothing (STYLE.md rule 6). */
#define BOX "kopt.ptx_box"

static int box_gc(lua_State *L)
{
	struct kopt_ptx **box = luaL_checkudata(L, 1, BOX);
	kopt_ptx_free(*box);
	*box = NULL;
	return 0;
}

static int l_parse(lua_State *L)
{
	size_t len;
	const char *text = luaL_checklstring(L, 1, &len);
	struct kopt_ptx **box = lua_newuserdatauv(L, sizeof *box, 0);
	*box = NULL;
	luaL_setmetatable(L, BOX);
	char err[256];
	if (kopt_ptx_parse(text, len, box, err, sizeof err) != 0)
		return kopt_bind_fail(L, err);
	const struct kopt_ptx *p = *box;
	lua_createtable(L, 0, 4);
	set_int(L, "lines", p->n_lines);
	set_int(L, "instructions", p->n_insts);
	lua_createtable(L, (int)p->n_functions, 0);
	for (size_t i = 0; i < p->n_functions; i++) {
		push_function(L, &p->functions[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "functions");
	lua_createtable(L, (int)p->n_regions, 0);
	for (size_t i = 0; i < p->n_regions; i++) {
		push_region(L, &p->regions[i], (int)i + 1);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "regions");
	kopt_ptx_free(*box);
	*box = NULL;
	return 1;
}

static int l_fields(lua_State *L)
{
	lua_newtable(L);
	int n = 0;
#define KOPT_PTX_X(name, doc)                                                                      \
	lua_createtable(L, 2, 0);                                                                  \
	lua_pushstring(L, #name);                                                                  \
	lua_rawseti(L, -2, 1);                                                                     \
	lua_pushstring(L, doc);                                                                    \
	lua_rawseti(L, -2, 2);                                                                     \
	lua_rawseti(L, -2, ++n);
	KOPT_PTX_WORK_FIELDS(KOPT_PTX_X)
#undef KOPT_PTX_X
	return 1;
}

static const luaL_Reg ptx_funcs[] = {
    {"parse", l_parse},
    {"fields", l_fields},
    {NULL, NULL},
};

int luaopen_kopt_ptx(lua_State *L)
{
	static const luaL_Reg box_meta[] = {{"__gc", box_gc}, {NULL, NULL}};
	kopt_bind_class(L, BOX, box_meta, NULL);
	luaL_newlib(L, ptx_funcs);
	return 1;
}
