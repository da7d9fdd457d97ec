/* The graph store's private layout, shared by graph.c (the store) and
 * graph_snapshot.c (save, load, digest); nothing outside core/ sees it. */
#ifndef KOPT_GRAPH_IMPL_H
#define KOPT_GRAPH_IMPL_H

#include <stdint.h>
#include <string.h>

#include "graph.h"

/* A string in the arena, packed as offset << 24 | length (strings are capped
 * at 16 MiB; the arena keeps a NUL after each). Offset 0 is the empty string
 * every new node points at. */
typedef uint64_t str;
#define STR_MAX_LEN KOPT_GRAPH_STR_MAX
#define STR_OFF(s) ((s) >> 24)
#define STR_LEN(s) ((uint32_t)((s)&STR_MAX_LEN))

struct node {
	uint64_t edge_visits;
	str key, config, source, status;
	double time_ms, reward;
	uint32_t first_edge, last_edge;
	uint32_t n_edges, n_in;
	uint32_t visits, flags;
};

struct edge {
	str action;
	double w, max, prior;
	uint32_t parent, child, next;
	uint32_t n, fails, vloss, flags;
	uint32_t ahash; /* low bits of the action's hash: a parent's edges are told apart by it
			   before their strings are compared (recomputed on load) */
};

/* A slot of the key table: the node id and the low 32 bits of its key hash,
 * so probes and rehashing rarely touch the nodes themselves. */
struct slot {
	uint32_t id; /* KOPT_GRAPH_NONE = empty */
	uint32_t h32;
};

struct kopt_graph {
	struct node *nodes;
	size_t n_nodes, cap_nodes, nodes_ready;
	struct edge *edges;
	size_t n_edges, cap_edges, edges_ready;
	char *arena;
	size_t arena_len, arena_cap, arena_ready; /* *_ready: see grow */
	struct slot *slots;			  /* size is a power of two */
	size_t n_slots;
	size_t n_always; /* edges flagged KOPT_GRAPH_EDGE_ALWAYS: with none, select stops at the
			    limit */
};

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

static inline uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= FNV_PRIME;
	}
	return h;
}

static inline uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Key hash, eight bytes a step (keys are 64-digit state hashes, so a
 * byte-wise hash would cost more than the table probe), with a final
 * avalanche so linear probing on the low bits stays short. Not stored in
 * snapshots: only the in-memory table depends on it. */
static inline uint64_t key_hash(const char *key, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, key + i, 8);
		h = (h ^ mix64(w)) * 0x100000001b3ull;
	}
	uint64_t t = 0;
	if (i < len)
		memcpy(&t, key + i, len - i);
	return mix64(h ^ t);
}

static inline const char *str_at(const struct kopt_graph *g, str s)
{
	return g->arena + STR_OFF(s);
}

void kopt_graph_set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int kopt_graph_grow(void **arr, size_t *cap, size_t need, size_t size, size_t *ready);
int kopt_graph_rehash(struct kopt_graph *g, size_t n_slots, int from_nodes);

#endif
