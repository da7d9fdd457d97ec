/* Helpers shared by the bindings: result shapes and class setup (common.h). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bind/common.h"

int kopt_bind_fail(lua_State *L, const char *msg)
{
	luaL_pushfail(L);
	lua_pushstring(L, msg);
	return 2;
}

int kopt_bind_failf(lua_State *L, const char *fmt, ...)
{
	luaL_pushfail(L);
	va_list ap;
	va_start(ap, fmt);
	lua_pushvfstring(L, fmt, ap);
	va_end(ap);
	return 2;
}

int kopt_bind_fail_kind(lua_State *L, const char *kind, const char *msg)
{
	luaL_pushfail(L);
	lua_pushstring(L, kind);
	lua_pushstring(L, msg);
	return 3;
}

int kopt_bind_ok(lua_State *L)
{
	lua_pushboolean(L, 1);
	return 1;
}

void kopt_bind_class(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods)
{
	luaL_newmetatable(L, name);
	luaL_setfuncs(L, meta, 0);
	if (methods != NULL) {
		lua_newtable(L);
		luaL_setfuncs(L, methods, 0);
		lua_setfield(L, -2, "__index");
	}
	lua_pop(L, 1);
}

void kopt_bind_table_to_msg(lua_State *L, int idx, struct kopt_msg *m, const char *what)
{
	idx = lua_absindex(L, idx);
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		if (lua_type(L, -2) != LUA_TSTRING) {
			kopt_msg_release(m);
			luaL_error(L, "%s keys must be strings", what);
			return;
		}
		const char *k = lua_tostring(L, -2);
		switch (lua_type(L, -1)) {
		case LUA_TNUMBER:
			if (lua_isinteger(L, -1))
				kopt_msg_put_int(m, k, (int64_t)lua_tointeger(L, -1));
			else
				kopt_msg_put_num(m, k, lua_tonumber(L, -1));
			break;
		case LUA_TBOOLEAN:
			kopt_msg_put_int(m, k, lua_toboolean(L, -1));
			break;
		case LUA_TSTRING: {
			size_t len;
			const char *s = lua_tolstring(L, -1, &len);
			kopt_msg_put_str(m, k, s, len);
			break;
		}
		default:
			kopt_msg_release(m);
			luaL_error(L, "%s field '%s' is a %s", what, k, luaL_typename(L, -1));
			return;
		}
		lua_pop(L, 1);
	}
}

int kopt_bind_send_table(lua_State *L, int idx, const char *what,
			 int (*send)(void *ctx, const void *buf, size_t len, char *err,
				     size_t errlen),
			 void *ctx)
{
	luaL_checktype(L, idx, LUA_TTABLE);
	struct kopt_msg m = {0};
	kopt_bind_table_to_msg(L, idx, &m, what);
	char err[512] = "message too large or out of memory";
	int rc = m.failed ? -1 : send(ctx, m.buf, m.len, err, sizeof err);
	kopt_msg_release(&m);
	return rc != 0 ? kopt_bind_fail(L, err) : kopt_bind_ok(L);
}

/* The table of a parsed view (argument 1, a light userdata); run protected,
 * so a memory error cannot skip the view's and the payload's release. */
static int build_msg_table(lua_State *L)
{
	const struct kopt_msgview *vp = lua_touserdata(L, 1);
	const struct kopt_msgview v = *vp;
	lua_createtable(L, 0, (int)v.count);
	for (size_t i = 0; i < v.count; i++) {
		const struct kopt_field *f = &v.fields[i];
		lua_pushlstring(L, f->key, f->keylen);
		if (f->type == 'i')
			lua_pushinteger(L, (lua_Integer)f->i);
		else if (f->type == 'd')
			lua_pushnumber(L, f->d);
		else
			lua_pushlstring(L, f->s, f->slen);
		lua_rawset(L, -3);
	}
	return 1;
}

int kopt_bind_push_msg(lua_State *L, void *buf, size_t len, char *err, size_t errlen)
{
	struct kopt_msgview v;
	if (kopt_msgview_parse(&v, buf, len, err, errlen) != 0) {
		free(buf);
		return -1;
	}
	/* neither push allocates, so nothing can raise before the pcall */
	lua_pushcfunction(L, build_msg_table);
	lua_pushlightuserdata(L, &v);
	int rc = lua_pcall(L, 1, 1, 0);
	kopt_msgview_release(&v);
	free(buf);
	if (rc != LUA_OK)
		return lua_error(L);
	return 0;
}

const char *kopt_bind_check_text(lua_State *L, int arg)
{
	size_t len;
	const char *s = luaL_checklstring(L, arg, &len);
	if (strlen(s) != len)
		luaL_argerror(L, arg, "holds a NUL byte");
	return s;
}
