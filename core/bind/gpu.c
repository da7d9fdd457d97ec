/* kopt.gpu: the driver (devices) and GPU worker processes for Lua.
 *
 *   gpu.load() -> true | nil, sentence          (no driver: the sentence says so)
 *   gpu.devices() -> { {index=, name=, cc_major=, ...}, ... } | nil, sentence
 *   gpu.spawn(device [, wrap]) -> Worker | nil, msg   (wrap: {program, options...}
 *       that runs the worker, e.g. the sanitizer)
 *   gpu.wait_any({w1, w2, ...}, timeout_s) -> index of a worker with a reply | nil
 *   gpu.request_fields() -> run_fields, arg_fields: the fields of a "run"
 *       request (core/worker/request_fields.h), each list of
 *       {name=, type=, required=, default=, doc=, max_len=}; type is "int",
 *       "flag", "number", "bytes" or "string"; max_len: a string's most
 *       bytes (the worker's buffer less its NUL); arg_fields are sent as "a<i>.<name>"
 *   gpu.reply_fields() -> fields, prefixes: the fields of a "run" reply
 *       (core/worker/reply_fields.h), {name=, type=, doc=} with type "int",
 *       "number" or "string"; prefixes: families {name=, prefix=, type=, doc=}
 *       of fields named prefix .. a name ("m.<metric>")
 *   Worker:send(t)            t: flat table, string keys -> integer/number/string/boolean
 *   Worker:recv(timeout_s)    -> table | nil, "timeout" | nil, "exited: ..."
 *   Worker:stop([grace_s]) -> how it ended (grace_s: wait that long for it to
 *       exit on its own before SIGKILL); Worker.pid, Worker.device (fields via methods)
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "gpu/cuda_driver.h"
#include "wire.h"
#include "worker/reply_fields.h"
#include "worker/request_fields.h"
#include "worker/spawn.h"

#define WORKER_MT "kopt.Worker"

static int l_load(lua_State *L)
{
	char err[512];
	if (kopt_cuda_load(err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	return kopt_bind_ok(L);
}

#define SETI(k, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, k))

static void push_device(lua_State *L, const struct kopt_cuda_device *d)
{
	lua_createtable(L, 0, 24);
	SETI("index", d->index);
	lua_pushstring(L, d->name);
	lua_setfield(L, -2, "name");
	lua_pushstring(L, d->pci_bus_id);
	lua_setfield(L, -2, "pci_bus_id");
	SETI("cc_major", d->cc_major);
	SETI("cc_minor", d->cc_minor);
	lua_pushfstring(L, "sm_%d%d", d->cc_major, d->cc_minor);
	lua_setfield(L, -2, "arch");
	SETI("sm_count", d->sm_count);
	SETI("mem_bytes", d->mem_bytes);
	SETI("l2_bytes", d->l2_bytes);
	SETI("clock_khz", d->clock_khz);
	SETI("mem_clock_khz", d->mem_clock_khz);
	SETI("mem_bus_width", d->mem_bus_width);
	SETI("max_threads_block", d->max_threads_block);
	SETI("max_threads_sm", d->max_threads_sm);
	SETI("max_smem_block", d->max_smem_block);
	SETI("max_smem_optin", d->max_smem_optin);
	SETI("max_smem_sm", d->max_smem_sm);
	SETI("max_regs_block", d->max_regs_block);
	SETI("max_regs_sm", d->max_regs_sm);
	SETI("max_blocks_sm", d->max_blocks_sm);
	SETI("warp_size", d->warp_size);
	SETI("driver_version", d->driver_version);
}

static int l_devices(lua_State *L)
{
	char err[512];
	int n = 0;
	if (kopt_cuda_device_count(&n, err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		struct kopt_cuda_device d;
		if (kopt_cuda_device_info(i, &d, err, sizeof err) != 0) {
			return kopt_bind_fail(L, err);
		}
		push_device(L, &d);
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

/* --- Worker ------------------------------------------------------------------- */

struct lworker {
	struct kopt_workerproc p;
	int open;
};

static struct lworker *check_worker(lua_State *L, int i)
{
	struct lworker *w = luaL_checkudata(L, i, WORKER_MT);
	if (!w->open)
		luaL_argerror(L, i, "worker is stopped");
	return w;
}

static int l_spawn(lua_State *L)
{
	int device = (int)luaL_checkinteger(L, 1);
	const char *wrap[65] = {NULL};
	if (!lua_isnoneornil(L, 2)) {
		luaL_checktype(L, 2, LUA_TTABLE);
		lua_Integer n = luaL_len(L, 2);
		luaL_argcheck(L, n >= 1 && n <= 64, 2, "expected a command of 1 to 64 strings");
		for (lua_Integer i = 1; i <= n; i++) {
			if (lua_geti(L, 2, i) != LUA_TSTRING)
				return luaL_argerror(L, 2, "expected a list of strings");
			wrap[i - 1] = lua_tostring(L, -1);
			lua_pop(L, 1); /* the table keeps the string alive */
		}
	}
	struct lworker *w = lua_newuserdatauv(L, sizeof *w, 0);
	w->open = 0;
	luaL_setmetatable(L, WORKER_MT);
	char err[512];
	if (kopt_workerproc_spawn(&w->p, device, wrap[0] ? wrap : NULL, err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	w->open = 1;
	return 1;
}

static int write_to_worker(void *ctx, const void *buf, size_t len, char *err, size_t errlen)
{
	return kopt_wire_write(*(const int *)ctx, buf, len, err, errlen);
}

static int w_send(lua_State *L)
{
	struct lworker *w = check_worker(L, 1);
	return kopt_bind_send_table(L, 2, "worker message", write_to_worker, &w->p.to_fd);
}

static int timeout_ms(lua_State *L, int i)
{
	if (lua_isnoneornil(L, i))
		return -1;
	double s = luaL_checknumber(L, i);
	luaL_argcheck(L, !isnan(s), i, "timeout is NaN");
	if (s < 0)
		return -1;
	return s > 2e6 ? 2000000000 : (int)(s * 1000.0);
}

static int w_recv(lua_State *L)
{
	struct lworker *w = check_worker(L, 1);
	int ms = timeout_ms(L, 2);
	unsigned char *buf = NULL;
	size_t len = 0;
	char err[256];
	int rc = kopt_wire_read(w->p.from_fd, &buf, &len, ms, err, sizeof err);
	if (rc != 0) {
		return kopt_bind_fail_kind(L, rc > 0 ? "timeout" : "exited", err);
	}
	if (kopt_bind_push_msg(L, buf, len, err, sizeof err) != 0)
		return kopt_bind_fail_kind(L, "exited", err);
	return 1;
}

static int w_stop(lua_State *L)
{
	struct lworker *w = luaL_checkudata(L, 1, WORKER_MT);
	char how[64] = "";
	/* Worker:stop(grace_s): let it exit on its own first (closing its pipe
	 * ends its loop) */
	double grace = lua_isnumber(L, 2) ? lua_tonumber(L, 2) : 0;
	luaL_argcheck(L, grace >= 0 && grace <= 3600, 2, "expected a grace period of 0 to 3600 s");
	int grace_ms = (int)(grace * 1000);
	if (w->open) {
		kopt_workerproc_stop_wait(&w->p, grace_ms, how, sizeof how);
		w->open = 0;
	}
	lua_pushstring(L, how);
	return 1;
}

/* __gc and __close: stop at once (__close's second argument is the error
 * that closed the scope, no grace period) */
static int w_release(lua_State *L)
{
	lua_settop(L, 1);
	return w_stop(L);
}

static int w_pid(lua_State *L)
{
	lua_pushinteger(L, check_worker(L, 1)->p.pid);
	return 1;
}

static int w_device(lua_State *L)
{
	lua_pushinteger(L, check_worker(L, 1)->p.device);
	return 1;
}

static int w_tostring(lua_State *L)
{
	struct lworker *w = luaL_checkudata(L, 1, WORKER_MT);
	if (w->open)
		lua_pushfstring(L, "kopt.Worker (GPU %d, pid %d)", w->p.device, (int)w->p.pid);
	else
		lua_pushliteral(L, "kopt.Worker (stopped)");
	return 1;
}

static int l_wait_any(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	int ms = timeout_ms(L, 2);
	lua_Integer n = luaL_len(L, 1);
	if (n <= 0 || n > 256)
		return luaL_argerror(L, 1, "expected 1 to 256 workers");
	struct pollfd fds[256];
	for (lua_Integer i = 1; i <= n; i++) {
		lua_rawgeti(L, 1, i);
		struct lworker *w = check_worker(L, -1);
		fds[i - 1].fd = w->p.from_fd;
		fds[i - 1].events = POLLIN;
		fds[i - 1].revents = 0;
		lua_pop(L, 1);
	}
	int r;
	do
		r = poll(fds, (nfds_t)n, ms);
	while (r < 0 && errno == EINTR);
	for (lua_Integer i = 0; r > 0 && i < n; i++)
		if (fds[i].revents != 0) {
			lua_pushinteger(L, i + 1);
			return 1;
		}
	luaL_pushfail(L);
	return 1;
}

/* One row of a request field list (request_fields.h). */
static void push_field(lua_State *L, int i, const char *name, const char *type, int required,
		       const char *doc, int max_len)
{
	lua_createtable(L, 0, 6);
	if (max_len > 0) {
		/* the worker's buffer less its NUL: a longer string would be cut */
		lua_pushinteger(L, max_len);
		lua_setfield(L, -2, "max_len");
	}
	lua_pushstring(L, name);
	lua_setfield(L, -2, "name");
	lua_pushstring(L, type);
	lua_setfield(L, -2, "type");
	lua_pushboolean(L, required);
	lua_setfield(L, -2, "required");
	lua_pushstring(L, doc);
	lua_setfield(L, -2, "doc");
	lua_pushvalue(L, -2); /* the default, pushed by the caller */
	lua_setfield(L, -2, "default");
	lua_remove(L, -2);
	lua_rawseti(L, -2, i);
}

#define RF_TYPE_INT "int"
#define RF_TYPE_FLAG "flag"
#define RF_TYPE_NUM "number"
#define RF_TYPE_BYTES "bytes"
#define RF_TYPE_STR_64 "string"
#define RF_TYPE_STR_128 "string"
#define RF_TYPE_STR_256 "string"
#define RF_TYPE_STR_1024 "string"
#define RF_TYPE_STR_8192 "string"
#define RF_PUSH_INT(L, d) lua_pushinteger(L, d)
#define RF_PUSH_FLAG(L, d) lua_pushinteger(L, d)
#define RF_PUSH_NUM(L, d) lua_pushnumber(L, d)
#define RF_PUSH_BYTES(L, d) lua_pushnil(L)
#define RF_PUSH_STR_64(L, d) lua_pushstring(L, d)
#define RF_PUSH_STR_128(L, d) lua_pushstring(L, d)
#define RF_PUSH_STR_256(L, d) lua_pushstring(L, d)
#define RF_PUSH_STR_1024(L, d) lua_pushstring(L, d)
#define RF_PUSH_STR_8192(L, d) lua_pushstring(L, d)
#define RF_MAX_INT 0
#define RF_MAX_FLAG 0
#define RF_MAX_NUM 0
#define RF_MAX_BYTES 0
#define RF_MAX_STR_64 63
#define RF_MAX_STR_128 127
#define RF_MAX_STR_256 255
#define RF_MAX_STR_1024 1023
#define RF_MAX_STR_8192 8191
#define RF_REQ 1
#define RF_OPT 0

static int l_request_fields(lua_State *L)
{
	int i = 0;
	lua_newtable(L);
#define X(name, type, need, def, doc)                                                              \
	RF_PUSH_##type(L, def);                                                                    \
	push_field(L, ++i, #name, RF_TYPE_##type, RF_##need, doc, RF_MAX_##type);
	KOPT_REQUEST_FIELDS(X)
	i = 0;
	lua_newtable(L);
	KOPT_REQUEST_ARG_FIELDS(X)
#undef X
	return 2;
}

/* The reply's fields (reply_fields.h): a list of {name=, type=, doc=}, and
 * the families of fields named by a prefix, {name=, prefix=, type=, doc=}. */
static void push_reply_field(lua_State *L, int i, const char *name, const char *prefix,
			     const char *type, const char *doc)
{
	lua_createtable(L, 0, 4);
	lua_pushstring(L, name);
	lua_setfield(L, -2, "name");
	if (prefix != NULL) {
		lua_pushstring(L, prefix);
		lua_setfield(L, -2, "prefix");
	}
	lua_pushstring(L, type);
	lua_setfield(L, -2, "type");
	lua_pushstring(L, doc);
	lua_setfield(L, -2, "doc");
	lua_rawseti(L, -2, i);
}

#define RF_TYPE_STR "string"

static int l_reply_fields(lua_State *L)
{
	int i = 0;
	lua_newtable(L);
#define X(name, type, doc) push_reply_field(L, ++i, #name, NULL, RF_TYPE_##type, doc);
	KOPT_REPLY_FIELDS(X)
#undef X
	i = 0;
	lua_newtable(L);
#define X(name, prefix, type, doc) push_reply_field(L, ++i, #name, prefix, RF_TYPE_##type, doc);
	KOPT_REPLY_PREFIXES(X)
#undef X
	return 2;
}

static const luaL_Reg worker_methods[] = {
    {"send", w_send}, {"recv", w_recv},	    {"stop", w_stop}, {"close", w_stop},
    {"pid", w_pid},   {"device", w_device}, {NULL, NULL},
};

static const luaL_Reg worker_meta[] = {
    {"__gc", w_release},
    {"__close", w_release},
    {"__tostring", w_tostring},
    {NULL, NULL},
};

static const luaL_Reg gpu_funcs[] = {
    {"load", l_load},
    {"devices", l_devices},
    {"spawn", l_spawn},
    {"wait_any", l_wait_any},
    {"request_fields", l_request_fields},
    {"reply_fields", l_reply_fields},
    {NULL, NULL},
};

int luaopen_kopt_gpu(lua_State *L)
{
	kopt_bind_class(L, WORKER_MT, worker_meta, worker_methods);
	luaL_newlib(L, gpu_funcs);
	return 1;
}
