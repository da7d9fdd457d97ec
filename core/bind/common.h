#ifndef KOPT_BIND_COMMON_H
#define KOPT_BIND_COMMON_H
/* What every binding in core/bind/ shares: the two result shapes of an
 * expected outcome and the setup of a "kopt.<Type>" class. Only core/bind/
 * includes this header (and lua.h). */
#include <lauxlib.h>
#include <lua.h>

/* An expected failure (STYLE.md rule 5): pushes nil, msg and returns 2, so a
 * binding ends with `return kopt_bind_fail(L, err);`. msg is copied. */
int kopt_bind_fail(lua_State *L, const char *msg);

/* The same with a message formatted by lua_pushfstring's rules (%s %d %I %f
 * %p %c %%). */
int kopt_bind_failf(lua_State *L, const char *fmt, ...);

/* nil, kind, msg (returns 3): a failure the caller tells apart by kind
 * ("timeout", "exited", ...) before it reads the sentence. */
int kopt_bind_fail_kind(lua_State *L, const char *kind, const char *msg);

/* Success without a value: pushes true and returns 1. */
int kopt_bind_ok(lua_State *L);

/* Registers the metatable `name` ("kopt.Graph"): the metamethods in meta
 * (__gc, __close, __tostring, ...) and, when methods is not NULL, a table of
 * methods as __index. Leaves the stack as it found it; run it once from the
 * module's luaopen. Objects get it with luaL_setmetatable(L, name). */
void kopt_bind_class(lua_State *L, const char *name, const luaL_Reg *meta,
		     const luaL_Reg *methods);

#endif
