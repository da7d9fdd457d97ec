#ifndef KOPT_BIND_GRAPH_LISTS_H
#define KOPT_BIND_GRAPH_LISTS_H
/* The part of the kopt.graph binding (graph.c) that takes an expansion's
 * moves as Lua lists: g:add_children, graph.permutation and
 * graph.one_knob_moves (graph_lists.c). */
#include <stdint.h>

#include <lua.h>

struct kopt_graph;

/* graph.c's argument checks: the open graph at idx (raises when closed), and
 * a 1-based node id at idx as the 0-based id (raises when out of range). */
struct kopt_graph *kopt_bind_check_graph(lua_State *L, int idx);
uint32_t kopt_bind_check_node(lua_State *L, struct kopt_graph *g, int idx);

/* g:add_children(parent, lists, ranks|nil[, always]) -> created, child, edge */
int kopt_bind_graph_add_children(lua_State *L);

/* graph.permutation(s, n) -> {1..n shuffled}, s advanced in place */
int kopt_bind_graph_permutation(lua_State *L);

/* graph.one_knob_moves(out, moves, count, generator, n, fast, index, plain_state, by_code,
 * best[, derived]) -> n, next: kopt.moves.collect_lists' loop over one-knob moves */
int kopt_bind_graph_one_knob_moves(lua_State *L);

/* graph.new_lists(size, names[, t]) -> t: lists with room for size entries */
int kopt_bind_graph_new_lists(lua_State *L);

/* graph.gammas(s, n, a) -> list, sum: n Gamma(a) variates as kopt.rng draws them */
int kopt_bind_graph_gammas(lua_State *L);

/* graph.normalise(list, n): list[1..n] divided by their sum, in place */
int kopt_bind_graph_normalise(lua_State *L);

#endif
