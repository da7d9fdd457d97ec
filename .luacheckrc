-- luacheck configuration: Lua 5.4, no globals anywhere (strategies return
-- tables), unused `self` arguments allowed (method tables).
std = "lua54"
max_line_length = false
self = false
-- package.builtin is kopt's table of built-in Lua sources (core/bind/modules.c).
read_globals = { package = { fields = { builtin = { fields = { "read", "list", "dev" } } } } }
