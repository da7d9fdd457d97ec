/* The search graph store: flat arrays, one string arena, open addressing.
 * Snapshots (save, load, digest) are in graph_snapshot.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_impl.h"
#include "sys.h"

void kopt_graph_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (err == NULL || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Grows an array of `size`-byte records to hold at least `need`. New memory is
 * left untouched (the kernel zeroes pages on first use, so spare capacity
 * costs nothing) but for the pages just ahead of the records in use, which
 * are populated in one call instead of faulting one by one (*ready: see
 * kopt_sys_populate_ahead); callers clear each record they add, which also
 * keeps padding out of snapshots. */
int kopt_graph_grow(void **arr, size_t *cap, size_t need, size_t size, size_t *ready)
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
	if (kopt_graph_grow((void **)&g->arena, &g->arena_cap, g->arena_len + len + 1, 1,
			    &g->arena_ready) != 0)
		return -1;
	if (len)
		memcpy(g->arena + g->arena_len, s, len);
	g->arena[g->arena_len + len] = '\0';
	*out = (uint64_t)g->arena_len << 24 | len;
	g->arena_len += len + 1;
	return 0;
}

/* Rebuilds the key table with n_slots slots from the old table, or from the
 * nodes when `from_nodes` (after a restore). */
int kopt_graph_rehash(struct kopt_graph *g, size_t n_slots, int from_nodes)
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
	if (kopt_graph_rehash(g, n, 1) != 0 ||
	    kopt_graph_grow((void **)&g->nodes, &g->cap_nodes, expected_nodes ? expected_nodes : 16,
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
		kopt_graph_set_err(err, errlen, "graph is full (%zu nodes)", g->n_nodes);
		return -1;
	}
	/* keep the load factor at or below 1/2 */
	if ((g->n_nodes + 1) * 2 > g->n_slots) {
		if (kopt_graph_rehash(g, g->n_slots * 2, 0) != 0)
			goto oom;
		find_hashed(g, key, len, h, &slot);
	}
	if (kopt_graph_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes,
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
	kopt_graph_set_err(err, errlen, "out of memory growing the graph (%zu nodes)", g->n_nodes);
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
		kopt_graph_set_err(err, errlen, "graph is full (%zu edges)", g->n_edges);
		return -1;
	}
	if (kopt_graph_grow((void **)&g->edges, &g->cap_edges, g->n_edges + 1, sizeof *g->edges,
		 &g->edges_ready) != 0) {
		kopt_graph_set_err(err, errlen, "out of memory growing the graph (%zu edges)", g->n_edges);
		return -1;
	}
	struct edge *ed = &g->edges[g->n_edges];
	memset(ed, 0, sizeof *ed);
	if (arena_put(g, action, len, &ed->action) != 0) {
		kopt_graph_set_err(err, errlen, "out of memory growing the graph arena");
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
