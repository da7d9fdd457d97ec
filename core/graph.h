#ifndef KOPT_GRAPH_H
#define KOPT_GRAPH_H
#include <stddef.h>
#include <stdint.h>

/* The search graph: nodes are search states keyed by their state hash, so a
 * state reached along two paths is one node (transpositions); edges are moves
 * (an action id from a parent to a child) and carry the statistics of Monte
 * Carlo Graph Search: visit count N, value sum W (mean Q = W/N), the largest
 * value backed up through the edge, the prior P, a failure count and a virtual
 * loss for batch selection.
 *
 * Storage is flat: nodes and edges live in two growing arrays, strings (keys,
 * configs, source hashes, statuses, action ids) in one append-only arena, and
 * keys are found through an open-addressing table of node ids. Ids are dense,
 * assigned in insertion order and never reused, so a deterministic search
 * builds an identical graph, and a snapshot restores it byte for byte.
 *
 * Not thread-safe: one graph belongs to one thread. */

#define KOPT_GRAPH_NONE UINT32_MAX
/* The longest key, action or node string a graph stores (16 MiB - 1). */
#define KOPT_GRAPH_STR_MAX ((1u << 24) - 1)
/* The most nodes kopt_graph_new reserves room for: ids are 32-bit. */
#define KOPT_GRAPH_RESERVE_MAX (1u << 30)
#define KOPT_GRAPH_VERSION 1u

struct kopt_graph;

/* A read-only view of a node; strings are borrowed until the next call that
 * adds to the graph (the arena may move). Lengths exclude the NUL, which is
 * always present. */
struct kopt_graph_node_view {
	const char *key, *config, *source, *status;
	size_t key_len, config_len, source_len, status_len;
	double time_ms, reward;
	uint32_t visits, flags, n_edges, n_in;
	uint64_t edge_visits; /* sum of N over the outgoing edges */
};

/* Edge flag: eligible for selection whatever the widening limit (moves from
 * generators called after the node's first expansion, which sit at the end
 * of the insertion order). */
#define KOPT_GRAPH_EDGE_ALWAYS 1u

struct kopt_graph_edge_view {
	const char *action;
	size_t action_len;
	uint32_t parent, child;
	uint32_t n, fails, vloss, flags;
	double w, max, prior;
};

/* Selection parameters for kopt_graph_select (PUCT over the edges of a node):
 *   score = Qsel + c_puct * P * sqrt(sumN + VL + 1) / (1 + N + vl)
 * where Qsel = (1 - beta_max) * mean + beta_max * max for visited edges
 * (virtual losses count as visits of value vl_value in the mean) and fpu for
 * unvisited ones. Only the first `limit` edges in insertion order, and edges
 * flagged KOPT_GRAPH_EDGE_ALWAYS, are candidates (progressive widening);
 * edges whose child has a flag in
 * skip_mask, or whose parent-side failures reach max_fails (0 = no limit), are
 * skipped. Ties go to the earliest edge, so selection is deterministic. */
struct kopt_graph_puct {
	double c_puct, fpu, beta_max, vl_value;
	uint32_t limit, skip_mask, max_fails;
};

/* New empty graph sized for about `expected_nodes` (0 = small default).
 * Returns NULL when out of memory. Caller frees with kopt_graph_free. */
struct kopt_graph *kopt_graph_new(size_t expected_nodes);
void kopt_graph_free(struct kopt_graph *g);

size_t kopt_graph_node_count(const struct kopt_graph *g);
size_t kopt_graph_edge_count(const struct kopt_graph *g);

/* Finds a node by key: its id, or KOPT_GRAPH_NONE. */
uint32_t kopt_graph_find(const struct kopt_graph *g, const char *key, size_t len);

/* Finds or inserts the node for key. Returns 0 with *id set (and *created
 * set to 1 when the node is new), or -1 when out of memory or full (2^32-2
 * nodes), with a message in err. */
int kopt_graph_add(struct kopt_graph *g, const char *key, size_t len, uint32_t *id, int *created,
		   char *err, size_t errlen);

/* Node payload setters; strings are copied. Return 0, or -1 when out of
 * memory. `which` is one of the KOPT_GRAPH_STR_* fields. */
enum { KOPT_GRAPH_STR_CONFIG, KOPT_GRAPH_STR_SOURCE, KOPT_GRAPH_STR_STATUS };
int kopt_graph_set_str(struct kopt_graph *g, uint32_t id, int which, const char *s, size_t len);
void kopt_graph_set_result(struct kopt_graph *g, uint32_t id, double time_ms, double reward);
void kopt_graph_set_flags(struct kopt_graph *g, uint32_t id, uint32_t flags);
void kopt_graph_visit(struct kopt_graph *g, uint32_t id, uint32_t k);

/* id must be < node count (callers check); fills *v. */
void kopt_graph_node(const struct kopt_graph *g, uint32_t id, struct kopt_graph_node_view *v);
uint32_t kopt_graph_flags(const struct kopt_graph *g, uint32_t id);
double kopt_graph_reward(const struct kopt_graph *g, uint32_t id);

/* Finds or adds the edge parent --action--> child. An existing edge with the
 * same action keeps its child and statistics (the prior is left alone too).
 * Returns 0 with *eid (and *created), or -1 with a message. */
int kopt_graph_link(struct kopt_graph *g, uint32_t parent, const char *action, size_t len,
		    uint32_t child, double prior, uint32_t *eid, int *created, char *err,
		    size_t errlen);
uint32_t kopt_graph_find_edge(const struct kopt_graph *g, uint32_t parent, const char *action,
			      size_t len);

/* Many links from one parent (an expansion's moves): kopt_graph_link with
 * the parent's edges looked up through a filter of their actions' hashes,
 * built once by kopt_graph_linker_init, instead of a scan of all of them per
 * link (k moves scanned k^2/2 edges). The same edges, ids and results as
 * kopt_graph_link, as long as no other call adds edges to the parent in
 * between. */
struct kopt_graph_linker {
	uint32_t parent;
	uint64_t seen[16]; /* 1024-bit filter of the top bits of the action hashes */
};
void kopt_graph_linker_init(const struct kopt_graph *g, struct kopt_graph_linker *lk,
			    uint32_t parent);
int kopt_graph_linker_link(struct kopt_graph *g, struct kopt_graph_linker *lk, const char *action,
			   size_t len, uint32_t child, double prior, uint32_t *eid, int *created,
			   char *err, size_t errlen);

/* Edge iteration in insertion order: first edge of a node, next edge of the
 * same parent; KOPT_GRAPH_NONE ends. */
uint32_t kopt_graph_first_edge(const struct kopt_graph *g, uint32_t id);
uint32_t kopt_graph_next_edge(const struct kopt_graph *g, uint32_t eid);
void kopt_graph_edge(const struct kopt_graph *g, uint32_t eid, struct kopt_graph_edge_view *v);

/* Backup of one value through an edge: N += 1, W += value, max updated,
 * fails += failed, and the parent's sum of edge visits. */
void kopt_graph_backup(struct kopt_graph *g, uint32_t eid, double value, int failed);
/* Adds delta (may be negative) virtual losses; clamps at zero. */
void kopt_graph_vloss(struct kopt_graph *g, uint32_t eid, int delta);
void kopt_graph_set_prior(struct kopt_graph *g, uint32_t eid, double prior);
void kopt_graph_set_edge_flags(struct kopt_graph *g, uint32_t eid, uint32_t flags);

/* PUCT selection among the edges of node id; KOPT_GRAPH_NONE when no edge
 * qualifies. */
uint32_t kopt_graph_select(const struct kopt_graph *g, uint32_t id, const struct kopt_graph_puct *p);

/* Greedy choice for rollouts among the edges of node id whose child has no
 * flag in skip_mask: the highest
 *   Qsel - lambda * N + 1e-3 * P      (Qsel as in select; fpu when unvisited)
 * first in insertion order on ties. *eligible (may be NULL) gets the number
 * of edges that qualified. KOPT_GRAPH_NONE when none does. */
uint32_t kopt_graph_greedy(const struct kopt_graph *g, uint32_t id, double lambda, double fpu,
			   double beta_max, uint32_t skip_mask, uint32_t *eligible);

/* The first edge of node id, in insertion order, whose child has no flag in
 * skip_mask; KOPT_GRAPH_NONE when there is none. */
uint32_t kopt_graph_first_eligible(const struct kopt_graph *g, uint32_t id, uint32_t skip_mask);

/* A 64-bit FNV-1a digest of everything a snapshot restores except virtual
 * losses (which only live during a batch), as 16 hex digits + NUL. Two graphs
 * with the same digest hold the same nodes, edges and statistics. */
void kopt_graph_digest(const struct kopt_graph *g, char hex[17]);

/* Snapshot: writes path atomically (temporary file, fsync, rename). The file
 * is versioned and checksummed. Returns 0, or -1 with a message. */
int kopt_graph_save(const struct kopt_graph *g, const char *path, char *err, size_t errlen);
/* Restores a snapshot into a new graph (*out, caller frees). Returns 0, or -1
 * with a message naming the file and the problem; *out is NULL then. */
int kopt_graph_load(const char *path, struct kopt_graph **out, char *err, size_t errlen);

#endif
