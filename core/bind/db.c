/* kopt.db: an SQLite file for Lua (see db.h); the schema lives in
 * lua/kopt/expdb.lua.
 *
 *   local db = require("kopt.db")
 *   local d = db.open(path[, { readonly = false, busy_ms = 10000, keep_journal = false }])
 *             -> Database | nil, kind, msg   (kind: busy, corrupt, full, readonly, cantopen, error)
 *   d:exec(sql) -> true | nil, kind, msg            (statements without rows)
 *   d:rows(sql, ...) -> { {col = value, ...}, ... } | nil, kind, msg  (one statement)
 *   d:run(sql, ...) -> changes, last_insert_id | nil, kind, msg     (one statement)
 *   d:close()   (also __gc and __close)
 *   db.sqlite_version -> "3.40.1"
 *
 * Parameters (`?` in sql) are nil, booleans (0/1), integers, floats and
 * strings; columns come back as integers, floats, strings or nil (absent
 * from the row table). */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "db.h"

#define DB_MT "kopt.Database"
#define STMT_MT "kopt.DatabaseStatement"

struct ldb {
	struct kopt_db *db; /* NULL once closed */
};

/* A statement while rows() or run() steps it: a userdata so that a Lua error
 * raised meanwhile (out of memory) still finalizes it from __gc. */
struct lstmt {
	struct kopt_db_stmt *st;
};

static struct kopt_db *check_db(lua_State *L, int idx)
{
	struct ldb *d = luaL_checkudata(L, idx, DB_MT);
	if (d->db == NULL)
		luaL_argerror(L, idx, "database is closed");
	return d->db;
}

static const char *kind_name(int status)
{
	switch (status) {
	case KOPT_DB_EBUSY:
		return "busy";
	case KOPT_DB_ECORRUPT:
		return "corrupt";
	case KOPT_DB_EFULL:
		return "full";
	case KOPT_DB_EREADONLY:
		return "readonly";
	case KOPT_DB_ECANTOPEN:
		return "cantopen";
	default:
		return "error";
	}
}

static int l_open(lua_State *L)
{
	const char *path = kopt_bind_check_text(L, 1);
	int flags = 0;
	lua_Integer busy_ms = 10000;
	if (!lua_isnoneornil(L, 2)) {
		luaL_checktype(L, 2, LUA_TTABLE);
		if (lua_getfield(L, 2, "readonly") != LUA_TNIL && lua_toboolean(L, -1))
			flags |= KOPT_DB_READONLY;
		if (lua_getfield(L, 2, "keep_journal") != LUA_TNIL && lua_toboolean(L, -1))
			flags |= KOPT_DB_KEEP_JOURNAL;
		if (lua_getfield(L, 2, "busy_ms") != LUA_TNIL)
			busy_ms = luaL_checkinteger(L, -1);
		lua_pop(L, 3);
	}
	luaL_argcheck(L, busy_ms >= 0 && busy_ms <= 3600000, 2, "busy_ms out of range");
	struct ldb *d = lua_newuserdatauv(L, sizeof *d, 0);
	d->db = NULL;
	luaL_setmetatable(L, DB_MT);
	char err[512];
	int status = kopt_db_open(path, flags, (int)busy_ms, &d->db, err, sizeof err);
	if (status != KOPT_DB_OK)
		return kopt_bind_fail_kind(L, kind_name(status), err);
	return 1;
}

static int l_close(lua_State *L)
{
	struct ldb *d = luaL_checkudata(L, 1, DB_MT);
	kopt_db_free(d->db);
	d->db = NULL;
	return 0;
}

static int l_tostring(lua_State *L)
{
	struct ldb *d = luaL_checkudata(L, 1, DB_MT);
	lua_pushfstring(L, "kopt.Database (%s)", d->db ? "open" : "closed");
	return 1;
}

static int l_exec(lua_State *L)
{
	struct kopt_db *db = check_db(L, 1);
	const char *sql = kopt_bind_check_text(L, 2);
	char err[512];
	int status = kopt_db_exec(db, sql, err, sizeof err);
	if (status != KOPT_DB_OK)
		return kopt_bind_fail_kind(L, kind_name(status), err);
	return kopt_bind_ok(L);
}

static int stmt_gc(lua_State *L)
{
	struct lstmt *s = luaL_checkudata(L, 1, STMT_MT);
	kopt_db_finalize(s->st);
	s->st = NULL;
	return 0;
}

/* Prepares sql (argument 2) with the parameters from argument 3 on; pushes
 * the statement's holder and returns it, or returns NULL with the failure
 * (nil, kind, msg) pushed and its count in *nret. */
static struct lstmt *prepare(lua_State *L, struct kopt_db *db, int *nret)
{
	const char *sql = kopt_bind_check_text(L, 2);
	int top = lua_gettop(L);
	struct kopt_db_value v;
	for (int i = 3; i <= top; i++) {
		int t = lua_type(L, i);
		if (t != LUA_TNIL && t != LUA_TBOOLEAN && t != LUA_TNUMBER && t != LUA_TSTRING)
			luaL_argerror(L, i, "expected nil, a boolean, a number or a string");
	}
	struct lstmt *s = lua_newuserdatauv(L, sizeof *s, 0);
	s->st = NULL;
	luaL_setmetatable(L, STMT_MT);
	char err[512];
	int status = kopt_db_prepare(db, sql, &s->st, err, sizeof err);
	for (int i = 3; status == KOPT_DB_OK && i <= top; i++) {
		memset(&v, 0, sizeof v);
		switch (lua_type(L, i)) {
		case LUA_TBOOLEAN:
			v.type = KOPT_DB_INT;
			v.i = lua_toboolean(L, i);
			break;
		case LUA_TNUMBER:
			if (lua_isinteger(L, i)) {
				v.type = KOPT_DB_INT;
				v.i = lua_tointeger(L, i);
			} else {
				v.type = KOPT_DB_REAL;
				v.d = lua_tonumber(L, i);
			}
			break;
		case LUA_TSTRING:
			v.type = KOPT_DB_TEXT;
			v.s = lua_tolstring(L, i, &v.len);
			break;
		default:
			v.type = KOPT_DB_NULL;
		}
		status = kopt_db_bind(s->st, i - 2, &v, err, sizeof err);
	}
	if (status != KOPT_DB_OK) {
		kopt_db_finalize(s->st);
		s->st = NULL;
		*nret = kopt_bind_fail_kind(L, kind_name(status), err);
		return NULL;
	}
	return s;
}

static void push_value(lua_State *L, const struct kopt_db_value *v)
{
	switch (v->type) {
	case KOPT_DB_INT:
		lua_pushinteger(L, (lua_Integer)v->i);
		break;
	case KOPT_DB_REAL:
		lua_pushnumber(L, v->d);
		break;
	case KOPT_DB_TEXT:
		lua_pushlstring(L, v->s, v->len);
		break;
	default:
		lua_pushnil(L);
	}
}

static int l_rows(lua_State *L)
{
	struct kopt_db *db = check_db(L, 1);
	int nret = 0;
	struct lstmt *s = prepare(L, db, &nret);
	if (s == NULL)
		return nret;
	lua_newtable(L);
	int ncol = kopt_db_columns(s->st);
	char err[512];
	struct kopt_db_value v;
	lua_Integer n = 0;
	for (;;) {
		int rc = kopt_db_step(s->st, err, sizeof err);
		if (rc == KOPT_DB_DONE)
			break;
		if (rc != KOPT_DB_ROW) {
			kopt_db_finalize(s->st);
			s->st = NULL;
			return kopt_bind_fail_kind(L, kind_name(rc), err);
		}
		lua_createtable(L, 0, ncol);
		for (int c = 0; c < ncol; c++) {
			kopt_db_column(s->st, c, &v);
			if (v.type == KOPT_DB_NULL)
				continue;
			push_value(L, &v);
			lua_setfield(L, -2, kopt_db_column_name(s->st, c));
		}
		lua_rawseti(L, -2, ++n);
	}
	kopt_db_finalize(s->st);
	s->st = NULL;
	return 1;
}

static int l_run(lua_State *L)
{
	struct kopt_db *db = check_db(L, 1);
	int nret = 0;
	struct lstmt *s = prepare(L, db, &nret);
	if (s == NULL)
		return nret;
	char err[512];
	int rc;
	do
		rc = kopt_db_step(s->st, err, sizeof err);
	while (rc == KOPT_DB_ROW);
	if (rc != KOPT_DB_DONE) {
		kopt_db_finalize(s->st);
		s->st = NULL;
		return kopt_bind_fail_kind(L, kind_name(rc), err);
	}
	lua_Integer changes = (lua_Integer)kopt_db_changes(s->st);
	lua_Integer id = (lua_Integer)kopt_db_last_id(s->st);
	kopt_db_finalize(s->st);
	s->st = NULL;
	lua_pushinteger(L, changes);
	lua_pushinteger(L, id);
	return 2;
}

static const luaL_Reg db_methods[] = {
    {"exec", l_exec}, {"rows", l_rows}, {"run", l_run}, {"close", l_close}, {NULL, NULL},
};

static const luaL_Reg db_meta[] = {
    {"__gc", l_close},
    {"__close", l_close},
    {"__tostring", l_tostring},
    {NULL, NULL},
};

static const luaL_Reg stmt_meta[] = {
    {"__gc", stmt_gc},
    {NULL, NULL},
};

static const luaL_Reg db_funcs[] = {
    {"open", l_open},
    {NULL, NULL},
};

int luaopen_kopt_db(lua_State *L)
{
	kopt_bind_class(L, DB_MT, db_meta, db_methods);
	kopt_bind_class(L, STMT_MT, stmt_meta, NULL);
	luaL_newlib(L, db_funcs);
	lua_pushstring(L, kopt_db_library_version());
	lua_setfield(L, -2, "sqlite_version");
	return 1;
}
