/* kopt.http: concurrent POST requests for Lua.
 *
 *   http.request_many({ {url=, headers={...}, body=, timeout_s=}, ... } [, opts])
 *     -> { {status=, body=, headers={name=value}, attempts=, elapsed_s=, err=}, ... }
 *     or nil, msg when the batch could not run (interrupted, libcurl failure)
 *
 * headers may be a list of "Name: value" strings or a map name -> value.
 * opts: connect_timeout_s, timeout_s, max_retries, backoff_initial_s,
 * backoff_max_s, retry_after_max_s, max_body, seed, ca_file. */
#include <ctype.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "http.h"
#include "sys.h"

/* The responses live in a userdata so that an error while pushing them to Lua
 * (out of memory) still frees the bodies, through __gc. */
#define BATCH_MT "kopt.HttpBatch"

struct batch {
	size_t n;
	struct kopt_http_response resps[];
};

static int batch_gc(lua_State *L)
{
	struct batch *b = luaL_checkudata(L, 1, BATCH_MT);
	for (size_t i = 0; i < b->n; i++)
		kopt_http_response_release(&b->resps[i]);
	return 0;
}

static int abort_on_interrupt(void *arg)
{
	(void)arg;
	return kopt_sys_interrupted();
}

static double opt_number(lua_State *L, int t, const char *k, double def)
{
	lua_getfield(L, t, k);
	double v = luaL_opt(L, luaL_checknumber, -1, def);
	lua_pop(L, 1);
	return v;
}

static void read_options(lua_State *L, int t, struct kopt_http_options *o)
{
	kopt_http_options_init(o);
	o->should_abort = abort_on_interrupt;
	if (lua_isnoneornil(L, t))
		return;
	luaL_checktype(L, t, LUA_TTABLE);
	o->connect_timeout_s = opt_number(L, t, "connect_timeout_s", o->connect_timeout_s);
	o->timeout_s = opt_number(L, t, "timeout_s", o->timeout_s);
	double retries = opt_number(L, t, "max_retries", o->max_retries);
	o->backoff_initial_s = opt_number(L, t, "backoff_initial_s", o->backoff_initial_s);
	o->backoff_max_s = opt_number(L, t, "backoff_max_s", o->backoff_max_s);
	o->retry_after_max_s = opt_number(L, t, "retry_after_max_s", o->retry_after_max_s);
	o->deadline_s = opt_number(L, t, "deadline_s", o->deadline_s);
	double max_body = opt_number(L, t, "max_body", (double)o->max_body);
	double seed = opt_number(L, t, "seed", 0);
	/* Range checks before the conversions, which are undefined outside them. */
	luaL_argcheck(L, retries >= 0 && retries <= 100, t, "max_retries must be in [0, 100]");
	luaL_argcheck(L, max_body >= 1 && max_body <= 1e12, t, "max_body must be in [1, 1e12]");
	luaL_argcheck(L, seed >= 0 && seed < 1.8e19, t, "seed must be a non-negative integer");
	luaL_argcheck(L, o->timeout_s > 0 && o->connect_timeout_s > 0, t,
		      "timeouts must be positive");
	o->max_retries = (int)retries;
	o->max_body = (size_t)max_body;
	o->seed = (unsigned long)seed;
	/* (ca_file: read where the strings are anchored, l_request_many) */
}

/* Pushes the string field `name` of table t (nil when absent) into the
 * anchor table at index a, under key *k, and returns it: a number's
 * conversion, or a string an __index made, lives only as long as a stack
 * slot, which would be gone while curl reads it. */
static const char *anchored_string(lua_State *L, int t, const char *name, int a, lua_Integer *k,
				   size_t *len, const char *what, size_t idx)
{
	lua_getfield(L, t, name);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		return NULL;
	}
	if (lua_type(L, -1) != LUA_TSTRING) {
		if (idx > 0)
			luaL_error(L, "request %d: %s must be a string", (int)idx, what);
		luaL_error(L, "%s must be a string", what);
	}
	const char *s = lua_tolstring(L, -1, len);
	lua_rawseti(L, a, ++*k);
	return s;
}

/* Pushes the header lines of request table at index r as a Lua list of
 * "Name: value" strings (the list anchors the strings). */
static void header_lines(lua_State *L, int r, size_t idx)
{
	lua_newtable(L);
	int out = lua_gettop(L);
	lua_getfield(L, r, "headers");
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		return;
	}
	if (!lua_istable(L, -1))
		luaL_error(L, "request %d: headers must be a table", (int)idx);
	lua_Integer k = 1;
	lua_pushnil(L);
	while (lua_next(L, -2)) {
		if (lua_type(L, -2) == LUA_TNUMBER) {
			if (!lua_isstring(L, -1))
				luaL_error(L, "request %d: header lines must be strings", (int)idx);
			lua_pushstring(
			    L, lua_tostring(L, -1)); /* (a number: its text, kept by the list) */
		} else {
			if (!lua_isstring(L, -2) || !lua_isstring(L, -1))
				luaL_error(L, "request %d: header names and values must be strings",
					   (int)idx);
			lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), lua_tostring(L, -1));
		}
		lua_rawseti(L, out, k++);
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
}

static void push_headers(lua_State *L, const char *raw)
{
	lua_newtable(L);
	for (const char *line = raw; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *colon = memchr(line, ':', len);
		if (colon && colon > line) {
			luaL_Buffer name;
			luaL_buffinit(L, &name);
			for (const char *p = line; p < colon; p++)
				luaL_addchar(&name, (char)tolower((unsigned char)*p));
			luaL_pushresult(&name);
			const char *v = colon + 1, *stop = line + len;
			while (v < stop && isspace((unsigned char)*v))
				v++;
			while (stop > v && isspace((unsigned char)stop[-1]))
				stop--;
			lua_pushlstring(L, v, (size_t)(stop - v));
			lua_settable(L, -3);
		}
		line = end ? end + 1 : NULL;
	}
}

static int l_request_many(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	struct kopt_http_options o;
	read_options(L, 2, &o);
	lua_settop(L, 2);
	/* the raw length: a __len could claim more than the list holds */
	size_t n = lua_rawlen(L, 1);
	if (n > 65536)
		return luaL_error(L, "%d requests in one call, more than 65536",
				  (int)(n > INT32_MAX ? INT32_MAX : n));

	/* Check every request and anchor its strings before any C allocation. */
	struct kopt_http_request *reqs =
	    lua_newuserdatauv(L, (n ? n : 1) * sizeof *reqs, 0); /* index 3 */
	lua_createtable(L, (int)n, 0);				 /* index 4: header line lists */
	lua_createtable(L, (int)(2 * n + 1), 0); /* index 5: the other strings curl reads */
	lua_Integer anchored = 0;
	if (lua_istable(L, 2))
		o.ca_file = anchored_string(L, 2, "ca_file", 5, &anchored, NULL, "ca_file", 0);
	for (size_t i = 0; i < n; i++) {
		lua_geti(L, 1, (lua_Integer)i + 1);
		int r = lua_gettop(L);
		if (!lua_istable(L, r))
			return luaL_error(L, "request %d is not a table", (int)i + 1);
		memset(&reqs[i], 0, sizeof reqs[i]);
		reqs[i].url = anchored_string(L, r, "url", 5, &anchored, NULL, "url", i + 1);
		if (reqs[i].url == NULL)
			return luaL_error(L, "request %d: url must be a string", (int)i + 1);
		reqs[i].body =
		    anchored_string(L, r, "body", 5, &anchored, &reqs[i].body_len, "body", i + 1);
		reqs[i].timeout_s = opt_number(L, r, "timeout_s", 0);
		header_lines(L, r, i + 1);
		size_t nh = (size_t)luaL_len(L, -1);
		const char **lines = lua_newuserdatauv(L, (nh ? nh : 1) * sizeof *lines, 1);
		for (size_t h = 0; h < nh; h++) {
			lua_geti(L, -2, (lua_Integer)h + 1);
			lines[h] = lua_tostring(L, -1);
			lua_pop(L, 1);
		}
		lua_insert(L, -2);
		lua_setiuservalue(L, -2, 1); /* the lines array keeps its strings alive */
		reqs[i].headers = lines;
		reqs[i].n_headers = nh;
		lua_rawseti(L, 4, (lua_Integer)i + 1);
		lua_pop(L, 1);
	}

	struct batch *b = lua_newuserdatauv(L, sizeof *b + n * sizeof b->resps[0], 0);
	b->n = 0;
	luaL_setmetatable(L, BATCH_MT);
	char err[512];
	int rc = kopt_http_request_many(reqs, b->resps, n, &o, err, sizeof err);
	b->n = n;
	if (rc != 0) {
		for (size_t i = 0; i < n; i++)
			kopt_http_response_release(&b->resps[i]);
		return kopt_bind_fail(L, err);
	}
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		struct kopt_http_response *resp = &b->resps[i];
		lua_createtable(L, 0, 6);
		lua_pushinteger(L, resp->status);
		lua_setfield(L, -2, "status");
		lua_pushlstring(L, resp->body ? resp->body : "", resp->body_len);
		lua_setfield(L, -2, "body");
		push_headers(L, resp->headers);
		lua_setfield(L, -2, "headers");
		lua_pushinteger(L, resp->attempts);
		lua_setfield(L, -2, "attempts");
		lua_pushnumber(L, resp->elapsed_s);
		lua_setfield(L, -2, "elapsed_s");
		if (resp->err[0]) {
			lua_pushstring(L, resp->err);
			lua_setfield(L, -2, "err");
		}
		lua_rawseti(L, -2, (lua_Integer)i + 1);
		kopt_http_response_release(resp);
	}
	return 1;
}

static int l_retry_after(lua_State *L)
{
	lua_pushnumber(L, kopt_http_retry_after(luaL_checkstring(L, 1)));
	return 1;
}

static const luaL_Reg batch_meta[] = {
    {"__gc", batch_gc},
    {NULL, NULL},
};

static const luaL_Reg http_funcs[] = {
    {"request_many", l_request_many},
    {"retry_after", l_retry_after},
    {NULL, NULL},
};

int luaopen_kopt_http(lua_State *L)
{
	kopt_bind_class(L, BATCH_MT, batch_meta, NULL);
	luaL_newlib(L, http_funcs);
	return 1;
}
