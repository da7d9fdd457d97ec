/* Graph snapshots: a header, the node and edge arrays and the arena as they
 * are in memory, and a checksum; a load validates every index and string
 * before the graph is used. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph_impl.h"

/* Snapshot header; written as is, so the sizes of the records are part of it
 * and a build with another layout refuses the file instead of misreading it. */
struct header {
	char magic[8];
	uint32_t version, endian;
	uint32_t node_size, edge_size;
	uint64_t n_nodes, n_edges, arena_len;
};

static const char MAGIC[8] = {'K', 'O', 'P', 'T', 'G', 'R', 'P', 'H'};

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
		kopt_graph_set_err(err, errlen, "%s: path too long", path);
		return -1;
	}
	fp = fopen(tmp, "wb");
	if (fp == NULL) {
		kopt_graph_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
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
		kopt_graph_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (fclose(fp) != 0) {
		fp = NULL;
		kopt_graph_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fp = NULL;
	if (rename(tmp, path) != 0) {
		kopt_graph_set_err(err, errlen, "%s: %s", path, strerror(errno));
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
		kopt_graph_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct header h;
	uint64_t sum = FNV_OFFSET, stored;
	if (get(fp, &sum, &h, sizeof h) != 0 || memcmp(h.magic, MAGIC, sizeof MAGIC) != 0) {
		kopt_graph_set_err(err, errlen, "%s: not a kopt graph snapshot", path);
		goto out;
	}
	if (h.version != KOPT_GRAPH_VERSION || h.endian != 0x01020304u ||
	    h.node_size != sizeof(struct node) || h.edge_size != sizeof(struct edge)) {
		kopt_graph_set_err(err, errlen, "%s: snapshot version %u of another build (this one reads %u)",
			path, h.version, KOPT_GRAPH_VERSION);
		goto out;
	}
	if (h.n_nodes >= UINT32_MAX - 1 || h.n_edges >= UINT32_MAX - 1 ||
	    h.arena_len > ((uint64_t)1 << 40)) {
		kopt_graph_set_err(err, errlen, "%s: corrupt snapshot header", path);
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
		kopt_graph_set_err(err, errlen, "%s: truncated snapshot (%lld bytes; its header needs %llu)",
			path, (long long)st.st_size, (unsigned long long)want);
		goto out;
	}
	g = kopt_graph_new((size_t)h.n_nodes);
	if (g == NULL ||
	    kopt_graph_grow((void **)&g->edges, &g->cap_edges, (size_t)h.n_edges + 1,
			    sizeof *g->edges, &g->edges_ready) != 0 ||
	    kopt_graph_grow((void **)&g->arena, &g->arena_cap, (size_t)h.arena_len + 1, 1,
			    &g->arena_ready) != 0) {
		kopt_graph_set_err(err, errlen, "%s: out of memory", path);
		goto out;
	}
	g->n_nodes = (size_t)h.n_nodes;
	g->n_edges = (size_t)h.n_edges;
	g->arena_len = (size_t)h.arena_len;
	if (get(fp, &sum, g->nodes, g->n_nodes * sizeof *g->nodes) != 0 ||
	    get(fp, &sum, g->edges, g->n_edges * sizeof *g->edges) != 0 ||
	    get(fp, &sum, g->arena, g->arena_len) != 0 ||
	    fread(&stored, sizeof stored, 1, fp) != 1) {
		kopt_graph_set_err(err, errlen, "%s: truncated snapshot", path);
		goto out;
	}
	if (stored != sum || fgetc(fp) != EOF || validate(g) != 0) {
		kopt_graph_set_err(err, errlen, "%s: corrupt snapshot (checksum or index out of range)", path);
		goto out;
	}
	if (kopt_graph_rehash(g, g->n_slots, 1) != 0) {
		kopt_graph_set_err(err, errlen, "%s: out of memory", path);
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
