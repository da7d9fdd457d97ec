#ifndef KOPT_LUA_NVRTC_H
#define KOPT_LUA_NVRTC_H
#include <lua.h>

#include "compile/kopt_nvrtc.h"

/* Shared by the kopt.nvrtc and kopt.cpool bindings. */

/* Reads a job table {source=, entry=, arch=, name=, salt=, options={...}} at idx
 * into job. The strings and the options array are borrowed from the Lua
 * stack (the array is a userdata pushed by this call), valid while the
 * table and that userdata stay there. Raises on a malformed table. */
void kopt_lua_check_job(lua_State *L, int idx, struct kopt_nvrtc_job *job);

/* Pushes a result table: ok, cubin (string), log, lowered, regs, barriers,
 * smem_static, local_bytes, spill_stores, spill_loads, spills, const_bytes,
 * max_threads, compile_s. Unknown numbers are left out (nil). */
void kopt_lua_push_result(lua_State *L, const struct kopt_nvrtc_result *res);

#endif
