/* kopt.mpi: messages between the ranks of an MPI job (core/mpi.c), for the
 * distributed evaluation of lua/kopt/backends/mpi.lua and lua/kopt/cluster.lua.
 *
 *   mpi.built() -> bool              this kopt has MPI
 *   mpi.launched() -> bool           started by mpirun / srun (nothing initialised)
 *   mpi.init([init_timeout_s]) -> rank, size | nil, msg (exits 1 when MPI_Init outlasts the bound)
 *   mpi.send(dest, t) -> true | nil, msg
 *       t: a flat table (string keys; integer, number, string, boolean),
 *       framed as a core/wire.h payload; the call does not wait for dest
 *   mpi.recv(timeout_s) -> src, t | nil, "timeout" | nil, "error", msg
 *       timeout_s nil or < 0: wait for ever
 *   mpi.pending() -> number of sends not yet received
 *   mpi.finalize()                   the orderly end (every rank takes part)
 *   mpi.abort(code)                  ends the whole job (a rank was lost)
 *   mpi.alive(pid) -> bool           whether a process of this host exists
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>

#include <lauxlib.h>
#include <lua.h>

#include "bind/common.h"
#include "bind/modules.h"
#include "mpi.h"
#include "wire.h"

static int l_built(lua_State *L)
{
	lua_pushboolean(L, kopt_mpi_built());
	return 1;
}

static int l_launched(lua_State *L)
{
	lua_pushboolean(L, kopt_mpi_launched());
	return 1;
}

static int l_init(lua_State *L)
{
	int rank = 0, size = 0;
	char err[512];
	double init_timeout_s = luaL_optnumber(L, 1, 0);
	if (kopt_mpi_init(&rank, &size, init_timeout_s, err, sizeof err) != 0) {
		return kopt_bind_fail(L, err);
	}
	lua_pushinteger(L, rank);
	lua_pushinteger(L, size);
	return 2;
}

static int send_to_rank(void *ctx, const void *buf, size_t len, char *err, size_t errlen)
{
	return kopt_mpi_send(*(const int *)ctx, buf, len, err, errlen);
}

static int l_send(lua_State *L)
{
	lua_Integer dest = luaL_checkinteger(L, 1);
	luaL_argcheck(L, dest >= 0 && dest <= 0x7fffffff, 1, "not a rank");
	int rank = (int)dest;
	return kopt_bind_send_table(L, 2, "MPI message", send_to_rank, &rank);
}

static int l_recv(lua_State *L)
{
	int ms = -1;
	if (!lua_isnoneornil(L, 1)) {
		double s = luaL_checknumber(L, 1);
		luaL_argcheck(L, s == s, 1, "timeout is NaN"); /* (int)NaN is undefined */
		ms = s < 0 ? -1 : s > 2e6 ? 2000000000 : (int)(s * 1000.0);
	}
	int src = -1;
	unsigned char *buf = NULL;
	size_t len = 0;
	char err[512];
	int rc = kopt_mpi_recv(&src, &buf, &len, ms, err, sizeof err);
	if (rc > 0) {
		luaL_pushfail(L);
		lua_pushliteral(L, "timeout");
		return 2;
	}
	if (rc < 0) {
		return kopt_bind_fail_kind(L, "error", err);
	}
	lua_pushinteger(L, src);
	if (kopt_bind_push_msg(L, buf, len, err, sizeof err) != 0)
		return kopt_bind_fail_kind(L, "error", err);
	return 2;
}

static int l_pending(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)kopt_mpi_pending());
	return 1;
}

static int l_finalize(lua_State *L)
{
	kopt_mpi_finalize();
	return 0;
}

static int l_abort(lua_State *L)
{
	int code = (int)luaL_optinteger(L, 1, 1);
	kopt_mpi_abort(code);
	return 0;
}

static int l_alive(lua_State *L)
{
	lua_Integer pid = luaL_checkinteger(L, 1);
	luaL_argcheck(L, pid > 0 && pid <= 0x7fffffff, 1, "not a process id");
	lua_pushboolean(L, kill((pid_t)pid, 0) == 0 || errno != ESRCH);
	return 1;
}

static const luaL_Reg mpi_funcs[] = {
    {"built", l_built},	      {"launched", l_launched}, {"init", l_init},
    {"send", l_send},	      {"recv", l_recv},		{"pending", l_pending},
    {"finalize", l_finalize}, {"abort", l_abort},	{"alive", l_alive},
    {NULL, NULL},
};

int luaopen_kopt_mpi(lua_State *L)
{
	luaL_newlib(L, mpi_funcs);
	return 1;
}
