/* The search graph store: flat arrays, one string arena, open addressing. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph.h"
#include "sys.h"

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

/* Snapshot header; written as is, so the sizes of the records are part of it
 * and a build with another layout refuses the file instead of misreading it. */
struct header {
	char magic[8];
	uint32_t version, endian;
	uint32_t node_size, edge_size;
	uint64_t n_nodes, n_edges, arena_len;
};

static const char MAGIC[8] = {'K', 'O', 'P', 'T', 'G', 'R', 'P', 'H'};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (err == NULL || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= FNV_PRIME;
	}
	return h;
}

static uint64_t mix64(uint64_t h)
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
static uint64_t key_hash(const char *key, size_t len)
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

/* Grows an array of `size`-byte records to hold at least `need`. New memory is
 * left untouched (the kernel zeroes pages on first use, so spare capacity
 * costs nothing) but for the pages just ahead of the records in use, which
 * are populated in one call instead of faulting one by one (*ready: see
 * kopt_sys_populate_ahead); callers clear each record they add, which also
 * keeps padding out of snapshots. */
static int grow(void **arr, size_t *cap, size_t need, size_t size, size_t *ready)
{
	if (need > *cap) {
		size_t n = *cap ? *cap : 16;
		while (n < need)
			n *= 2;
		void *p = realloc(*arr, n * size);
		if (p == NULL)
			return -1;
		*arr = p;
		*cap = n;
	}
	kopt_sys_populate_ahead(*arr, need * size, *cap * size, ready);
	return 0;
}

static int arena_put(struct kopt_graph *g, const char *s, size_t len, str *out)
{
	if (len > STR_MAX_LEN)
		return -1;
	if (grow((void **)&g->arena, &g->arena_cap, g->arena_len + len + 1, 1, &g->arena_ready) !=
	    0)
		return -1;
	if (len)
		memcpy(g->arena + g->arena_len, s, len);
	g->arena[g->arena_len + len] = '\0';
	*out = (uint64_t)g->arena_len << 24 | len;
	g->arena_len += len + 1;
	return 0;
}

static const char *str_at(const struct kopt_graph *g, str s)
{
	return g->arena + STR_OFF(s);
}

/* Rebuilds the key table with n_slots slots from the old table, or from the
 * nodes when `from_nodes` (after a restore). */
static int rehash(struct kopt_graph *g, size_t n_slots, int from_nodes)
{
	struct slot *slots = malloc(n_slots * sizeof *slots);
	if (slots == NULL)
		return -1;
	kopt_sys_populate(slots, n_slots * sizeof *slots);
	memset(slots, 0xff, n_slots * sizeof *slots);
	size_t mask = n_slots - 1;
	size_t n = from_nodes ? g->n_nodes : g->n_slots;
	for (size_t i = 0; i < n; i++) {
		struct slot s;
		if (from_nodes) {
			s.id = (uint32_t)i;
			const struct node *nd = &g->nodes[i];
			s.h32 = (uint32_t)key_hash(str_at(g, nd->key), STR_LEN(nd->key));
		} else {
			s = g->slots[i];
			if (s.id == KOPT_GRAPH_NONE)
				continue;
		}
		size_t j = s.h32 & mask;
		while (slots[j].id != KOPT_GRAPH_NONE)
			j = (j + 1) & mask;
		slots[j] = s;
	}
	free(g->slots);
	g->slots = slots;
	g->n_slots = n_slots;
	return 0;
}

struct kopt_graph *kopt_graph_new(size_t expected_nodes)
{
	if (expected_nodes > KOPT_GRAPH_RESERVE_MAX)
		return NULL;
	struct kopt_graph *g = calloc(1, sizeof *g);
	if (g == NULL)
		return NULL;
	size_t n = 64;
	while (n < expected_nodes * 2)
		n *= 2;
	str empty;
	if (rehash(g, n, 1) != 0 ||
	    grow((void **)&g->nodes, &g->cap_nodes, expected_nodes ? expected_nodes : 16,
		 sizeof *g->nodes, &g->nodes_ready) != 0 ||
	    arena_put(g, "", 0, &empty) != 0) {
		kopt_graph_free(g);
		return NULL;
	}
	return g;
}

void kopt_graph_free(struct kopt_graph *g)
{
	if (g == NULL)
		return;
	free(g->nodes);
	free(g->edges);
	free(g->arena);
	free(g->slots);
	free(g);
}

size_t kopt_graph_node_count(const struct kopt_graph *g)
{
	return g->n_nodes;
}

size_t kopt_graph_edge_count(const struct kopt_graph *g)
{
	return g->n_edges;
}

static uint32_t find_hashed(const struct kopt_graph *g, const char *key, size_t len, uint64_t h,
			    size_t *slot)
{
	size_t mask = g->n_slots - 1;
	uint32_t h32 = (uint32_t)h;
	size_t j = h32 & mask;
	for (;;) {
		struct slot s = g->slots[j];
		if (s.id == KOPT_GRAPH_NONE)
			break;
		if (s.h32 == h32) {
			const struct node *nd = &g->nodes[s.id];
			if (STR_LEN(nd->key) == len && memcmp(str_at(g, nd->key), key, len) == 0)
				return s.id;
		}
		j = (j + 1) & mask;
	}
	if (slot)
		*slot = j;
	return KOPT_GRAPH_NONE;
}

uint32_t kopt_graph_find(const struct kopt_graph *g, const char *key, size_t len)
{
	return find_hashed(g, key, len, key_hash(key, len), NULL);
}

int kopt_graph_add(struct kopt_graph *g, const char *key, size_t len, uint32_t *id, int *created,
		   char *err, size_t errlen)
{
	*id = KOPT_GRAPH_NONE;
	*created = 0;
	uint64_t h = key_hash(key, len);
	size_t slot;
	uint32_t found = find_hashed(g, key, len, h, &slot);
	if (found != KOPT_GRAPH_NONE) {
		*id = found;
		return 0;
	}
	if (g->n_nodes >= (size_t)UINT32_MAX - 1) {
		set_err(err, errlen, "graph is full (%zu nodes)", g->n_nodes);
		return -1;
	}
	/* keep the load factor at or below 1/2 */
	if ((g->n_nodes + 1) * 2 > g->n_slots) {
		if (rehash(g, g->n_slots * 2, 0) != 0)
			goto oom;
		find_hashed(g, key, len, h, &slot);
	}
	if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes,
		 &g->nodes_ready) != 0)
		goto oom;
	struct node *nd = &g->nodes[g->n_nodes];
	memset(nd, 0, sizeof *nd);
	if (arena_put(g, key, len, &nd->key) != 0)
		goto oom;
	nd->config = nd->source = nd->status = 0;
	nd->time_ms = NAN;
	nd->reward = NAN;
	nd->first_edge = nd->last_edge = KOPT_GRAPH_NONE;
	g->slots[slot].id = (uint32_t)g->n_nodes;
	g->slots[slot].h32 = (uint32_t)h;
	*id = (uint32_t)g->n_nodes++;
	*created = 1;
	return 0;
oom:
	set_err(err, errlen, "out of memory growing the graph (%zu nodes)", g->n_nodes);
	return -1;
}

int kopt_graph_set_str(struct kopt_graph *g, uint32_t id, int which, const char *s, size_t len)
{
	str v;
	if (arena_put(g, s, len, &v) != 0)
		return -1;
	struct node *nd = &g->nodes[id];
	if (which == KOPT_GRAPH_STR_CONFIG)
		nd->config = v;
	else if (which == KOPT_GRAPH_STR_SOURCE)
		nd->source = v;
	else
		nd->status = v;
	return 0;
}

void kopt_graph_set_result(struct kopt_graph *g, uint32_t id, double time_ms, double reward)
{
	g->nodes[id].time_ms = time_ms;
	g->nodes[id].reward = reward;
}

void kopt_graph_set_flags(struct kopt_graph *g, uint32_t id, uint32_t flags)
{
	g->nodes[id].flags = flags;
}

void kopt_graph_visit(struct kopt_graph *g, uint32_t id, uint32_t k)
{
	uint32_t v = g->nodes[id].visits; /* saturates: wrapped, it would look new */
	g->nodes[id].visits = k > UINT32_MAX - v ? UINT32_MAX : v + k;
}

void kopt_graph_node(const struct kopt_graph *g, uint32_t id, struct kopt_graph_node_view *v)
{
	const struct node *nd = &g->nodes[id];
	v->key = str_at(g, nd->key);
	v->key_len = STR_LEN(nd->key);
	v->config = str_at(g, nd->config);
	v->config_len = STR_LEN(nd->config);
	v->source = str_at(g, nd->source);
	v->source_len = STR_LEN(nd->source);
	v->status = str_at(g, nd->status);
	v->status_len = STR_LEN(nd->status);
	v->time_ms = nd->time_ms;
	v->reward = nd->reward;
	v->visits = nd->visits;
	v->flags = nd->flags;
	v->n_edges = nd->n_edges;
	v->n_in = nd->n_in;
	v->edge_visits = nd->edge_visits;
}

uint32_t kopt_graph_flags(const struct kopt_graph *g, uint32_t id)
{
	return g->nodes[id].flags;
}

double kopt_graph_reward(const struct kopt_graph *g, uint32_t id)
{
	return g->nodes[id].reward;
}

static uint32_t find_edge_hashed(const struct kopt_graph *g, uint32_t parent, const char *action,
				 size_t len, uint32_t ahash)
{
	for (uint32_t e = g->nodes[parent].first_edge; e != KOPT_GRAPH_NONE; e = g->edges[e].next) {
		const struct edge *ed = &g->edges[e];
		if (ed->ahash == ahash && STR_LEN(ed->action) == len &&
		    memcmp(str_at(g, ed->action), action, len) == 0)
			return e;
	}
	return KOPT_GRAPH_NONE;
}

uint32_t kopt_graph_find_edge(const struct kopt_graph *g, uint32_t parent, const char *action,
			      size_t len)
{
	return find_edge_hashed(g, parent, action, len, (uint32_t)key_hash(action, len));
}

/* Appends the edge parent --action--> child (known to be absent). */
static int new_edge(struct kopt_graph *g, uint32_t parent, const char *action, size_t len,
		    uint32_t ahash, uint32_t child, double prior, uint32_t *eid, char *err,
		    size_t errlen)
{
	if (g->n_edges >= (size_t)UINT32_MAX - 1) {
		set_err(err, errlen, "graph is full (%zu edges)", g->n_edges);
		return -1;
	}
	if (grow((void **)&g->edges, &g->cap_edges, g->n_edges + 1, sizeof *g->edges,
		 &g->edges_ready) != 0) {
		set_err(err, errlen, "out of memory growing the graph (%zu edges)", g->n_edges);
		return -1;
	}
	struct edge *ed = &g->edges[g->n_edges];
	memset(ed, 0, sizeof *ed);
	if (arena_put(g, action, len, &ed->action) != 0) {
		set_err(err, errlen, "out of memory growing the graph arena");
		return -1;
	}
	ed->ahash = ahash;
	ed->parent = parent;
	ed->child = child;
	ed->prior = prior;
	ed->next = KOPT_GRAPH_NONE;
	uint32_t e = (uint32_t)g->n_edges++;
	struct node *p = &g->nodes[parent];
	if (p->last_edge == KOPT_GRAPH_NONE)
		p->first_edge = e;
	else
		g->edges[p->last_edge].next = e;
	p->last_edge = e;
	p->n_edges++;
	g->nodes[child].n_in++;
	*eid = e;
	return 0;
}

/* The filter's bit of an action hash: its top bits (the low ones pick slots). */
static void linker_mark(struct kopt_graph_linker *lk, uint32_t ahash)
{
	uint32_t bit = ahash >> 22;
	lk->seen[bit >> 6] |= (uint64_t)1 << (bit & 63);
}

void kopt_graph_linker_init(const struct kopt_graph *g, struct kopt_graph_linker *lk,
			    uint32_t parent)
{
	memset(lk, 0, sizeof *lk);
	lk->parent = parent;
	for (uint32_t e = g->nodes[parent].first_edge; e != KOPT_GRAPH_NONE; e = g->edges[e].next)
		linker_mark(lk, g->edges[e].ahash);
}

int kopt_graph_linker_link(struct kopt_graph *g, struct kopt_graph_linker *lk, const char *action,
			   size_t len, uint32_t child, double prior, uint32_t *eid, int *created,
			   char *err, size_t errlen)
{
	*eid = KOPT_GRAPH_NONE;
	*created = 0;
	uint32_t ahash = (uint32_t)key_hash(action, len);
	uint32_t bit = ahash >> 22;
	if (lk->seen[bit >> 6] & ((uint64_t)1 << (bit & 63))) {
		uint32_t found = find_edge_hashed(g, lk->parent, action, len, ahash);
		if (found != KOPT_GRAPH_NONE) {
			*eid = found;
			return 0;
		}
	}
	if (new_edge(g, lk->parent, action, len, ahash, child, prior, eid, err, errlen) != 0)
		return -1;
	linker_mark(lk, ahash);
	*created = 1;
	return 0;
}

/* one link: a linker for it alone (its filter scans the parent's edges once,
 * as a lookup would) */
int kopt_graph_link(struct kopt_graph *g, uint32_t parent, const char *action, size_t len,
		    uint32_t child, double prior, uint32_t *eid, int *created, char *err,
		    size_t errlen)
{
	struct kopt_graph_linker lk;
	kopt_graph_linker_init(g, &lk, parent);
	return kopt_graph_linker_link(g, &lk, action, len, child, prior, eid, created, err, errlen);
}

uint32_t kopt_graph_first_edge(const struct kopt_graph *g, uint32_t id)
{
	return g->nodes[id].first_edge;
}

uint32_t kopt_graph_next_edge(const struct kopt_graph *g, uint32_t eid)
{
	return g->edges[eid].next;
}

void kopt_graph_edge(const struct kopt_graph *g, uint32_t eid, struct kopt_graph_edge_view *v)
{
	const struct edge *ed = &g->edges[eid];
	v->action = str_at(g, ed->action);
	v->action_len = STR_LEN(ed->action);
	v->parent = ed->parent;
	v->child = ed->child;
	v->n = ed->n;
	v->fails = ed->fails;
	v->vloss = ed->vloss;
	v->flags = ed->flags;
	v->w = ed->w;
	v->max = ed->max;
	v->prior = ed->prior;
}

void kopt_graph_backup(struct kopt_graph *g, uint32_t eid, double value, int failed)
{
	struct edge *ed = &g->edges[eid];
	if (ed->n == 0 || value > ed->max)
		ed->max = value;
	ed->n++;
	ed->w += value;
	if (failed)
		ed->fails++;
	g->nodes[ed->parent].edge_visits++;
}

void kopt_graph_vloss(struct kopt_graph *g, uint32_t eid, int delta)
{
	struct edge *ed = &g->edges[eid];
	long v = (long)ed->vloss + delta;
	ed->vloss = v < 0 ? 0u : (uint32_t)v;
}

void kopt_graph_set_prior(struct kopt_graph *g, uint32_t eid, double prior)
{
	g->edges[eid].prior = prior;
}

void kopt_graph_set_edge_flags(struct kopt_graph *g, uint32_t eid, uint32_t flags)
{
	g->n_always -= (g->edges[eid].flags & KOPT_GRAPH_EDGE_ALWAYS) != 0;
	g->n_always += (flags & KOPT_GRAPH_EDGE_ALWAYS) != 0;
	g->edges[eid].flags = flags;
}

uint32_t kopt_graph_select(const struct kopt_graph *g, uint32_t id, const struct kopt_graph_puct *p)
{
	const struct node *nd = &g->nodes[id];
	uint64_t vl_total = 0;
	uint32_t seen = 0;
	/* past the limit only edges flagged always count: none when no edge is */
	int past_limit = g->n_always > 0;
	for (uint32_t e = nd->first_edge; e != KOPT_GRAPH_NONE && (seen < p->limit || past_limit);
	     e = g->edges[e].next, seen++)
		if (seen < p->limit || (g->edges[e].flags & KOPT_GRAPH_EDGE_ALWAYS))
			vl_total += g->edges[e].vloss;
	double sq = sqrt((double)(nd->edge_visits + vl_total) + 1.0);
	uint32_t best = KOPT_GRAPH_NONE;
	double best_score = -INFINITY;
	seen = 0;
	for (uint32_t e = nd->first_edge; e != KOPT_GRAPH_NONE && (seen < p->limit || past_limit);
	     e = g->edges[e].next, seen++) {
		const struct edge *ed = &g->edges[e];
		if (seen >= p->limit && !(ed->flags & KOPT_GRAPH_EDGE_ALWAYS))
			continue;
		if (g->nodes[ed->child].flags & p->skip_mask)
			continue;
		if (p->max_fails && ed->fails >= p->max_fails)
			continue;
		double visits = (double)ed->n + (double)ed->vloss;
		double q;
		if (ed->n == 0 && ed->vloss == 0) {
			q = p->fpu;
		} else {
			double mean = (ed->w + p->vl_value * (double)ed->vloss) / visits;
			double mx = ed->n ? ed->max : p->vl_value;
			q = (1.0 - p->beta_max) * mean + p->beta_max * mx;
		}
		double score = q + p->c_puct * ed->prior * sq / (1.0 + visits);
		if (best == KOPT_GRAPH_NONE || score > best_score) {
			best = e;
			best_score = score;
		}
	}
	return best;
}

uint32_t kopt_graph_greedy(const struct kopt_graph *g, uint32_t id, double lambda, double fpu,
			   double beta_max, uint32_t skip_mask, uint32_t *eligible)
{
	uint32_t best = KOPT_GRAPH_NONE, count = 0;
	double best_score = -INFINITY;
	for (uint32_t e = g->nodes[id].first_edge; e != KOPT_GRAPH_NONE; e = g->edges[e].next) {
		const struct edge *ed = &g->edges[e];
		if (g->nodes[ed->child].flags & skip_mask)
			continue;
		count++;
		double q = fpu;
		if (ed->n)
			q = (1.0 - beta_max) * ed->w / ed->n + beta_max * ed->max;
		double score = q - lambda * (double)ed->n + 1e-3 * ed->prior;
		if (best == KOPT_GRAPH_NONE || score > best_score) {
			best = e;
			best_score = score;
		}
	}
	if (eligible)
		*eligible = count;
	return best;
}

uint32_t kopt_graph_first_eligible(const struct kopt_graph *g, uint32_t id, uint32_t skip_mask)
{
	for (uint32_t e = g->nodes[id].first_edge; e != KOPT_GRAPH_NONE; e = g->edges[e].next)
		if (!(g->nodes[g->edges[e].child].flags & skip_mask))
			return e;
	return KOPT_GRAPH_NONE;
}

static uint64_t digest_str(uint64_t h, const struct kopt_graph *g, str s)
{
	uint32_t len = STR_LEN(s);
	h = fnv1a(h, &len, sizeof len);
	return fnv1a(h, str_at(g, s), len);
}

void kopt_graph_digest(const struct kopt_graph *g, char hex[17])
{
	uint64_t h = FNV_OFFSET;
	for (size_t i = 0; i < g->n_nodes; i++) {
		const struct node *nd = &g->nodes[i];
		h = digest_str(h, g, nd->key);
		h = digest_str(h, g, nd->config);
		h = digest_str(h, g, nd->source);
		h = digest_str(h, g, nd->status);
		h = fnv1a(h, &nd->time_ms, sizeof nd->time_ms);
		h = fnv1a(h, &nd->reward, sizeof nd->reward);
		h = fnv1a(h, &nd->visits, sizeof nd->visits);
		h = fnv1a(h, &nd->flags, sizeof nd->flags);
		h = fnv1a(h, &nd->edge_visits, sizeof nd->edge_visits);
	}
	for (size_t i = 0; i < g->n_edges; i++) {
		const struct edge *ed = &g->edges[i];
		h = digest_str(h, g, ed->action);
		h = fnv1a(h, &ed->parent, sizeof ed->parent);
		h = fnv1a(h, &ed->child, sizeof ed->child);
		h = fnv1a(h, &ed->n, sizeof ed->n);
		h = fnv1a(h, &ed->fails, sizeof ed->fails);
		h = fnv1a(h, &ed->flags, sizeof ed->flags);
		h = fnv1a(h, &ed->w, sizeof ed->w);
		h = fnv1a(h, &ed->max, sizeof ed->max);
		h = fnv1a(h, &ed->prior, sizeof ed->prior);
	}
	snprintf(hex, 17, "%016llx", (unsigned long long)h);
}

/* Writes n bytes and folds them into the running checksum. */
static int put(FILE *fp, uint64_t *sum, const void *p, size_t n)
{
	*sum = fnv1a(*sum, p, n);
	return n == 0 || fwrite(p, 1, n, fp) == n ? 0 : -1;
}

int kopt_graph_save(const struct kopt_graph *g, const char *path, char *err, size_t errlen)
{
	int rc = -1;
	char tmp[4096];
	FILE *fp = NULL;
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
		set_err(err, errlen, "%s: path too long", path);
		return -1;
	}
	fp = fopen(tmp, "wb");
	if (fp == NULL) {
		set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	struct header h;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, MAGIC, sizeof MAGIC);
	h.version = KOPT_GRAPH_VERSION;
	h.endian = 0x01020304u;
	h.node_size = (uint32_t)sizeof(struct node);
	h.edge_size = (uint32_t)sizeof(struct edge);
	h.n_nodes = g->n_nodes;
	h.n_edges = g->n_edges;
	h.arena_len = g->arena_len;
	uint64_t sum = FNV_OFFSET;
	if (put(fp, &sum, &h, sizeof h) || put(fp, &sum, g->nodes, g->n_nodes * sizeof *g->nodes) ||
	    put(fp, &sum, g->edges, g->n_edges * sizeof *g->edges) ||
	    put(fp, &sum, g->arena, g->arena_len) || fwrite(&sum, sizeof sum, 1, fp) != 1 ||
	    fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
		set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (fclose(fp) != 0) {
		fp = NULL;
		set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fp = NULL;
	if (rename(tmp, path) != 0) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fp)
		fclose(fp);
	if (rc != 0)
		unlink(tmp);
	return rc;
}

static int get(FILE *fp, uint64_t *sum, void *p, size_t n)
{
	if (n && fread(p, 1, n, fp) != n)
		return -1;
	*sum = fnv1a(*sum, p, n);
	return 0;
}

static int str_ok(const struct kopt_graph *g, str s)
{
	return STR_OFF(s) + STR_LEN(s) < g->arena_len && g->arena[STR_OFF(s) + STR_LEN(s)] == '\0';
}

/* Every index and string a restored graph will follow must be in range. */
static int validate(const struct kopt_graph *g)
{
	for (size_t i = 0; i < g->n_nodes; i++) {
		const struct node *nd = &g->nodes[i];
		if (!str_ok(g, nd->key) || !str_ok(g, nd->config) || !str_ok(g, nd->source) ||
		    !str_ok(g, nd->status))
			return -1;
		if ((nd->first_edge != KOPT_GRAPH_NONE && nd->first_edge >= g->n_edges) ||
		    (nd->last_edge != KOPT_GRAPH_NONE && nd->last_edge >= g->n_edges))
			return -1;
	}
	for (size_t i = 0; i < g->n_edges; i++) {
		const struct edge *ed = &g->edges[i];
		if (!str_ok(g, ed->action) || ed->parent >= g->n_nodes || ed->child >= g->n_nodes ||
		    (ed->next != KOPT_GRAPH_NONE && ed->next >= g->n_edges))
			return -1;
	}
	/* each edge in its parent's list once: a list that loops back would
	 * keep every walk over it (select, edges) going for ever */
	unsigned char *seen = calloc(g->n_edges ? g->n_edges : 1, 1);
	if (seen == NULL)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < g->n_nodes && rc == 0; i++) {
		for (uint32_t e = g->nodes[i].first_edge; e != KOPT_GRAPH_NONE;
		     e = g->edges[e].next) {
			if (seen[e] || g->edges[e].parent != i) {
				rc = -1;
				break;
			}
			seen[e] = 1;
		}
	}
	free(seen);
	return rc;
}

int kopt_graph_load(const char *path, struct kopt_graph **out, char *err, size_t errlen)
{
	int rc = -1;
	*out = NULL;
	struct kopt_graph *g = NULL;
	FILE *fp = fopen(path, "rb");
	if (fp == NULL) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct header h;
	uint64_t sum = FNV_OFFSET, stored;
	if (get(fp, &sum, &h, sizeof h) != 0 || memcmp(h.magic, MAGIC, sizeof MAGIC) != 0) {
		set_err(err, errlen, "%s: not a kopt graph snapshot", path);
		goto out;
	}
	if (h.version != KOPT_GRAPH_VERSION || h.endian != 0x01020304u ||
	    h.node_size != sizeof(struct node) || h.edge_size != sizeof(struct edge)) {
		set_err(err, errlen, "%s: snapshot version %u of another build (this one reads %u)",
			path, h.version, KOPT_GRAPH_VERSION);
		goto out;
	}
	if (h.n_nodes >= UINT32_MAX - 1 || h.n_edges >= UINT32_MAX - 1 ||
	    h.arena_len > ((uint64_t)1 << 40)) {
		set_err(err, errlen, "%s: corrupt snapshot header", path);
		goto out;
	}
	/* the counts against the file's size before anything is allocated: a
	 * header that claims 2^30 nodes asked for 100 GB */
	struct stat st;
	uint64_t want = sizeof h + h.n_nodes * (uint64_t)sizeof(struct node) +
			h.n_edges * (uint64_t)sizeof(struct edge) + h.arena_len + sizeof stored;
	if (fstat(fileno(fp), &st) != 0)
		st.st_size = 0;
	if ((uint64_t)st.st_size != want) {
		set_err(err, errlen, "%s: truncated snapshot (%lld bytes; its header needs %llu)",
			path, (long long)st.st_size, (unsigned long long)want);
		goto out;
	}
	g = kopt_graph_new((size_t)h.n_nodes);
	if (g == NULL ||
	    grow((void **)&g->edges, &g->cap_edges, (size_t)h.n_edges + 1, sizeof *g->edges,
		 &g->edges_ready) != 0 ||
	    grow((void **)&g->arena, &g->arena_cap, (size_t)h.arena_len + 1, 1, &g->arena_ready) !=
		0) {
		set_err(err, errlen, "%s: out of memory", path);
		goto out;
	}
	g->n_nodes = (size_t)h.n_nodes;
	g->n_edges = (size_t)h.n_edges;
	g->arena_len = (size_t)h.arena_len;
	if (get(fp, &sum, g->nodes, g->n_nodes * sizeof *g->nodes) != 0 ||
	    get(fp, &sum, g->edges, g->n_edges * sizeof *g->edges) != 0 ||
	    get(fp, &sum, g->arena, g->arena_len) != 0 ||
	    fread(&stored, sizeof stored, 1, fp) != 1) {
		set_err(err, errlen, "%s: truncated snapshot", path);
		goto out;
	}
	if (stored != sum || fgetc(fp) != EOF || validate(g) != 0) {
		set_err(err, errlen, "%s: corrupt snapshot (checksum or index out of range)", path);
		goto out;
	}
	if (rehash(g, g->n_slots, 1) != 0) {
		set_err(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (size_t i = 0; i < g->n_edges; i++) {
		struct edge *ed = &g->edges[i];
		ed->ahash = (uint32_t)key_hash(str_at(g, ed->action), STR_LEN(ed->action));
		g->n_always += (ed->flags & KOPT_GRAPH_EDGE_ALWAYS) != 0;
	}
	*out = g;
	g = NULL;
	rc = 0;
out:
	kopt_graph_free(g);
	fclose(fp);
	return rc;
}
