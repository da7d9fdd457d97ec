#ifndef KOPT_BIND_COMMON_H
#define KOPT_BIND_COMMON_H
/* What every binding in core/bind/ shares: the two result shapes of an
 * expected outcome and the setup of a "kopt.<Type>" class. Only core/bind/
 * includes this header (and lua.h). */
#include <lauxlib.h>
#include <lua.h>

#include "wire.h"

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

/* The string argument at arg (luaL_checkstring's), refused with an
 * argument error when it holds a NUL byte: C reads it up to the first one,
 * so "a\0b" would name the file a, or run the first SQL statement alone. */
const char *kopt_bind_check_text(lua_State *L, int arg);

/* Registers the metatable `name` ("kopt.Graph"): the metamethods in meta
 * (__gc, __close, __tostring, ...) and, when methods is not NULL, a table of
 * methods as __index. Leaves the stack as it found it; run it once from the
 * module's luaopen. Objects get it with luaL_setmetatable(L, name). */
void kopt_bind_class(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods);

/* A flat Lua table (string keys; integer, number, string or boolean values,
 * a boolean as the integer 0 or 1) at stack index idx, put into m (the
 * caller releases it). Raises on a key or a value of another type, after
 * releasing m; `what` names the message in that error ("worker message"). */
void kopt_bind_table_to_msg(lua_State *L, int idx, struct kopt_msg *m, const char *what);

/* Sends the flat table at idx (see kopt_bind_table_to_msg; `what` names it
 * in errors) through send(ctx, payload, len, err, errlen), which returns 0 or
 * -1 with err set. Returns what a Lua binding returns: true, or nil and the
 * reason (a message too large for memory included). */
int kopt_bind_send_table(lua_State *L, int idx, const char *what,
			 int (*send)(void *ctx, const void *buf, size_t len, char *err,
				     size_t errlen),
			 void *ctx);

/* Pushes the fields of a wire payload as a flat table (returns 0), or
 * pushes nothing and returns -1 with the reason in err. Takes buf (a
 * malloc'd payload) and frees it on every path, a Lua memory error while
 * building the table included (raised again once buf is freed). */
int kopt_bind_push_msg(lua_State *L, void *buf, size_t len, char *err, size_t errlen);

#endif
