/* Check suite for core/graph.c: keys and transpositions, edges and their
 * statistics, PUCT selection, snapshots (round trip, corruption, truncation).
 *
 * With KOPT_BENCH=1 it also prints the timing of 10^6 insertions and lookups
 * (docs/PERFORMANCE.md); the test itself asserts a generous bound so that a
 * pathological slowdown (a broken hash, quadratic growth) fails CI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "graph.h"

/* KOPT_TIME_SCALE stretches timing bounds for slow builds (the sanitizer run
 * in CI sets 10). */
static double kopt_test_time_scale(void)
{
	const char *s = getenv("KOPT_TIME_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t add(struct kopt_graph *g, const char *key, int *created)
{
	uint32_t id;
	int c;
	char err[128];
	ck_assert_int_eq(kopt_graph_add(g, key, strlen(key), &id, &c, err, sizeof err), 0);
	if (created)
		*created = c;
	return id;
}

static uint32_t edge_to(struct kopt_graph *g, uint32_t p, const char *action, uint32_t c, double prior)
{
	uint32_t e;
	int created;
	char err[128];
	ck_assert_int_eq(kopt_graph_link(g, p, action, strlen(action), c, prior, &e, &created, err,
					 sizeof err),
			 0);
	return e;
}

static void tmp_path(char *buf, size_t n, const char *name)
{
	const char *dir = getenv("TMPDIR");
	snprintf(buf, n, "%s/kopt_check_graph_%ld_%s", dir ? dir : "/tmp", (long)getpid(), name);
}

START_TEST(test_add_find_transpositions)
{
	struct kopt_graph *g = kopt_graph_new(0);
	ck_assert_ptr_nonnull(g);
	int created;
	uint32_t a = add(g, "state-a", &created);
	ck_assert_int_eq(created, 1);
	uint32_t b = add(g, "state-b", &created);
	ck_assert_int_eq(created, 1);
	ck_assert_uint_ne(a, b);
	/* the same state reached again is the same node */
	ck_assert_uint_eq(add(g, "state-a", &created), a);
	ck_assert_int_eq(created, 0);
	ck_assert_uint_eq(kopt_graph_find(g, "state-b", 7), b);
	ck_assert_uint_eq(kopt_graph_find(g, "state-c", 7), KOPT_GRAPH_NONE);
	/* keys are byte strings: a prefix or an embedded NUL is another key */
	ck_assert_uint_eq(kopt_graph_find(g, "state-a", 6), KOPT_GRAPH_NONE);
	uint32_t z;
	int c;
	ck_assert_int_eq(kopt_graph_add(g, "x\0y", 3, &z, &c, NULL, 0), 0);
	ck_assert_uint_eq(kopt_graph_find(g, "x\0y", 3), z);
	ck_assert_uint_eq(kopt_graph_find(g, "x", 1), KOPT_GRAPH_NONE);
	ck_assert_uint_eq(kopt_graph_node_count(g), 3);
	kopt_graph_free(g);
}
END_TEST

START_TEST(test_growth_many_keys)
{
	struct kopt_graph *g = kopt_graph_new(0);
	char key[64];
	const uint32_t n = 200000;
	for (uint32_t i = 0; i < n; i++) {
		snprintf(key, sizeof key, "%08x-key", i * 2654435761u);
		ck_assert_uint_eq(add(g, key, NULL), i);
	}
	for (uint32_t i = 0; i < n; i++) {
		snprintf(key, sizeof key, "%08x-key", i * 2654435761u);
		ck_assert_uint_eq(kopt_graph_find(g, key, strlen(key)), i);
		snprintf(key, sizeof key, "%08x-nope", i);
		ck_assert_uint_eq(kopt_graph_find(g, key, strlen(key)), KOPT_GRAPH_NONE);
	}
	struct kopt_graph_node_view v;
	kopt_graph_node(g, 12345, &v);
	snprintf(key, sizeof key, "%08x-key", 12345u * 2654435761u);
	ck_assert_str_eq(v.key, key);
	ck_assert(isnan(v.reward) && isnan(v.time_ms));
	ck_assert_uint_eq(v.key_len, strlen(key));
	kopt_graph_free(g);
}
END_TEST

START_TEST(test_payload)
{
	struct kopt_graph *g = kopt_graph_new(4);
	uint32_t a = add(g, "a", NULL);
	ck_assert_int_eq(kopt_graph_set_str(g, a, KOPT_GRAPH_STR_CONFIG, "{\"BM\":64}", 9), 0);
	ck_assert_int_eq(kopt_graph_set_str(g, a, KOPT_GRAPH_STR_SOURCE, "abc123", 6), 0);
	ck_assert_int_eq(kopt_graph_set_str(g, a, KOPT_GRAPH_STR_STATUS, "ok", 2), 0);
	kopt_graph_set_result(g, a, 1.25, 0.5);
	kopt_graph_set_flags(g, a, 5);
	kopt_graph_visit(g, a, 3);
	/* later growth of the arena must not disturb the payload */
	char key[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof key, "filler-%d", i);
		add(g, key, NULL);
	}
	struct kopt_graph_node_view v;
	kopt_graph_node(g, a, &v);
	ck_assert_str_eq(v.config, "{\"BM\":64}");
	ck_assert_str_eq(v.source, "abc123");
	ck_assert_str_eq(v.status, "ok");
	ck_assert_double_eq(v.time_ms, 1.25);
	ck_assert_double_eq(v.reward, 0.5);
	ck_assert_uint_eq(v.flags, 5);
	ck_assert_uint_eq(v.visits, 3);
	ck_assert_double_eq(kopt_graph_reward(g, a), 0.5);
	ck_assert_uint_eq(kopt_graph_flags(g, a), 5);
	kopt_graph_free(g);
}
END_TEST

START_TEST(test_edges_and_backup)
{
	struct kopt_graph *g = kopt_graph_new(0);
	uint32_t r = add(g, "root", NULL), a = add(g, "a", NULL), b = add(g, "b", NULL);
	uint32_t ea = edge_to(g, r, "tile_m_up", a, 0.7);
	uint32_t eb = edge_to(g, r, "warps_down", b, 0.3);
	/* transposition: a reached from b too; one node, two parents */
	uint32_t eba = edge_to(g, b, "tile_m_up", a, 1.0);
	ck_assert_uint_eq(edge_to(g, r, "tile_m_up", b, 0.1), ea); /* same action: same edge */
	ck_assert_uint_eq(kopt_graph_find_edge(g, r, "warps_down", 10), eb);
	ck_assert_uint_eq(kopt_graph_find_edge(g, r, "nope", 4), KOPT_GRAPH_NONE);
	ck_assert_uint_eq(kopt_graph_find_edge(g, r, "tile_m_u", 8), KOPT_GRAPH_NONE);
	/* the first edge whose child carries no masked flag */
	ck_assert_uint_eq(kopt_graph_first_eligible(g, r, 4), ea);
	kopt_graph_set_flags(g, a, 4);
	ck_assert_uint_eq(kopt_graph_first_eligible(g, r, 4), eb);
	ck_assert_uint_eq(kopt_graph_first_eligible(g, r, 2), ea);
	kopt_graph_set_flags(g, b, 6);
	ck_assert_uint_eq(kopt_graph_first_eligible(g, r, 4), KOPT_GRAPH_NONE);
	kopt_graph_set_flags(g, a, 0);
	kopt_graph_set_flags(g, b, 0);
	ck_assert_uint_eq(kopt_graph_first_edge(g, r), ea);
	ck_assert_uint_eq(kopt_graph_next_edge(g, ea), eb);
	ck_assert_uint_eq(kopt_graph_next_edge(g, eb), KOPT_GRAPH_NONE);
	ck_assert_uint_eq(kopt_graph_first_edge(g, a), KOPT_GRAPH_NONE);

	kopt_graph_backup(g, ea, 0.5, 0);
	kopt_graph_backup(g, ea, -1.0, 1);
	kopt_graph_backup(g, ea, 0.25, 0);
	kopt_graph_backup(g, eba, -2.0, 1);
	struct kopt_graph_edge_view e;
	kopt_graph_edge(g, ea, &e);
	ck_assert_str_eq(e.action, "tile_m_up");
	ck_assert_uint_eq(e.parent, r);
	ck_assert_uint_eq(e.child, a);
	ck_assert_uint_eq(e.n, 3);
	ck_assert_uint_eq(e.fails, 1);
	ck_assert_double_eq_tol(e.w, -0.25, 1e-12);
	ck_assert_double_eq(e.max, 0.5);
	ck_assert_double_eq(e.prior, 0.7);
	kopt_graph_edge(g, eba, &e);
	ck_assert_double_eq(e.max, -2.0); /* the first value sets max even when negative */

	struct kopt_graph_node_view v;
	kopt_graph_node(g, r, &v);
	ck_assert_uint_eq(v.n_edges, 2);
	ck_assert_uint_eq(v.edge_visits, 3);
	kopt_graph_node(g, a, &v);
	ck_assert_uint_eq(v.n_in, 2);

	kopt_graph_vloss(g, eb, 2);
	kopt_graph_vloss(g, eb, -5);
	kopt_graph_edge(g, eb, &e);
	ck_assert_uint_eq(e.vloss, 0);
	kopt_graph_set_prior(g, eb, 0.9);
	kopt_graph_edge(g, eb, &e);
	ck_assert_double_eq(e.prior, 0.9);
	kopt_graph_free(g);
}
END_TEST

/* kopt_graph_linker_link makes the edges kopt_graph_link makes: the same ids
 * for new actions, the existing edge (statistics and prior kept) for an
 * action the parent has, before the linker or from it; the digests of two
 * graphs built both ways agree. */
START_TEST(test_linker_like_link)
{
	struct kopt_graph *g1 = kopt_graph_new(0), *g2 = kopt_graph_new(0);
	uint32_t eids[300];
	int made_by_link[300];
	char action[32], key[32], err[128];
	for (int k = 0; k < 2; k++) {
		struct kopt_graph *g = k ? g2 : g1;
		uint32_t p = add(g, "p", NULL);
		edge_to(g, p, "old", add(g, "o", NULL), 0.5);
		struct kopt_graph_linker lk;
		kopt_graph_linker_init(g, &lk, p);
		/* 300 links of 200 actions: more than the filter's bits, and repeats */
		for (int i = 0; i < 300; i++) {
			snprintf(action, sizeof action, "K%d=%d", (i % 200) % 7, i % 200);
			snprintf(key, sizeof key, "c%d", i);
			uint32_t c = add(g, key, NULL), e;
			int made;
			if (k == 0) {
				ck_assert_int_eq(kopt_graph_link(g, p, action, strlen(action), c, 0.1 * i,
								 &e, &made, err, sizeof err),
						 0);
				eids[i] = e;
				made_by_link[i] = made;
			} else {
				ck_assert_int_eq(kopt_graph_linker_link(g, &lk, action, strlen(action), c,
									0.1 * i, &e, &made, err,
									sizeof err),
						 0);
				ck_assert_uint_eq(e, eids[i]);
				ck_assert_int_eq(made, made_by_link[i]);
			}
		}
		uint32_t e;
		int made;
		kopt_graph_linker_init(g, &lk, p); /* (g1's edges came from kopt_graph_link) */
		ck_assert_int_eq(kopt_graph_linker_link(g, &lk, "old", 3, p, 9.0, &e, &made, NULL, 0), 0);
		ck_assert_int_eq(made, 0);
		struct kopt_graph_edge_view v;
		kopt_graph_edge(g, e, &v);
		ck_assert(v.prior == 0.5);
	}
	for (int i = 200; i < 300; i++) /* the repeats found the first edges */
		ck_assert(!made_by_link[i] && eids[i] == eids[i - 200] && made_by_link[i - 200]);
	char d1[17], d2[17];
	kopt_graph_digest(g1, d1);
	kopt_graph_digest(g2, d2);
	ck_assert_str_eq(d1, d2);
	ck_assert_uint_eq(kopt_graph_edge_count(g1), 201);
	kopt_graph_free(g1);
	kopt_graph_free(g2);
}
END_TEST

START_TEST(test_select_puct)
{
	struct kopt_graph *g = kopt_graph_new(0);
	uint32_t r = add(g, "r", NULL);
	uint32_t c[4];
	uint32_t e[4];
	const char *names[4] = {"m0", "m1", "m2", "m3"};
	double priors[4] = {0.1, 0.4, 0.4, 0.1};
	for (int i = 0; i < 4; i++) {
		c[i] = add(g, names[i], NULL);
		e[i] = edge_to(g, r, names[i], c[i], priors[i]);
	}
	struct kopt_graph_puct p = {1.0, 0.0, 0.0, -1.0, UINT32_MAX, 0, 0};
	/* all unvisited: highest prior wins, ties go to the earliest edge */
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[1]);
	/* a virtual loss on m1 moves the choice to m2 */
	kopt_graph_vloss(g, e[1], 1);
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[2]);
	kopt_graph_vloss(g, e[1], -1);
	/* value: m3 is very good, so it wins despite its low prior */
	kopt_graph_backup(g, e[3], 2.0, 0);
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[3]);
	/* progressive widening: only the first 2 edges are eligible */
	p.limit = 2;
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[1]);
	p.limit = UINT32_MAX;
	/* an edge flagged ALWAYS is eligible beyond the limit */
	p.limit = 2;
	kopt_graph_set_edge_flags(g, e[3], KOPT_GRAPH_EDGE_ALWAYS);
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[3]);
	/* ... also in a restored graph (the scan past the limit happens only
	 * while some edge is flagged, which the graph counts) */
	char path[256], err[512];
	tmp_path(path, sizeof path, "always.graph");
	ck_assert_int_eq(kopt_graph_save(g, path, err, sizeof err), 0);
	struct kopt_graph *h;
	ck_assert_msg(kopt_graph_load(path, &h, err, sizeof err) == 0, "%s", err);
	ck_assert_uint_eq(kopt_graph_select(h, r, &p), e[3]);
	kopt_graph_free(h);
	unlink(path);
	/* flagged twice and cleared once, it is cleared: the limit holds */
	kopt_graph_set_edge_flags(g, e[3], KOPT_GRAPH_EDGE_ALWAYS);
	kopt_graph_set_edge_flags(g, e[3], 0);
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[1]);
	p.limit = UINT32_MAX;
	/* skip mask on the child's flags */
	kopt_graph_set_flags(g, c[3], 2);
	p.skip_mask = 2;
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[1]);
	p.skip_mask = 0;
	/* failures prune an edge once they reach max_fails */
	kopt_graph_backup(g, e[3], -1.0, 1);
	kopt_graph_backup(g, e[3], -1.0, 1);
	p.max_fails = 2;
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[1]);
	p.max_fails = 0;
	/* max backup: beta_max = 1 ranks by the best value, mean would not */
	p.beta_max = 1.0;
	p.c_puct = 0.0;
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[3]);
	p.beta_max = 0.0;
	p.fpu = 0.5; /* mean of m3 is 0 < fpu: an unvisited edge wins */
	ck_assert_uint_eq(kopt_graph_select(g, r, &p), e[0]);
	/* a node without edges selects nothing */
	ck_assert_uint_eq(kopt_graph_select(g, c[0], &p), KOPT_GRAPH_NONE);

	/* greedy (rollouts): Q - lambda*N, fpu for unvisited, prior breaks ties */
	uint32_t eligible;
	kopt_graph_set_flags(g, c[3], 0);
	/* m3: mean 0 (2, -1, -1), max 2; others unvisited at fpu 0.1 -> m1 (prior 0.4, first) */
	ck_assert_uint_eq(kopt_graph_greedy(g, r, 0.0, 0.1, 0.0, 0, &eligible), e[1]);
	ck_assert_uint_eq(eligible, 4);
	/* with max backup m3 scores 2 */
	ck_assert_uint_eq(kopt_graph_greedy(g, r, 0.0, 0.1, 1.0, 0, &eligible), e[3]);
	/* a visit penalty of 1 per visit brings it below the unvisited ones */
	ck_assert_uint_eq(kopt_graph_greedy(g, r, 1.0, 0.1, 1.0, 0, &eligible), e[1]);
	/* skip mask */
	kopt_graph_set_flags(g, c[1], 8);
	kopt_graph_set_flags(g, c[2], 8);
	ck_assert_uint_eq(kopt_graph_greedy(g, r, 0.0, 0.1, 0.0, 8, &eligible), e[0]);
	ck_assert_uint_eq(eligible, 2);
	kopt_graph_set_flags(g, c[0], 8);
	kopt_graph_set_flags(g, c[3], 8);
	ck_assert_uint_eq(kopt_graph_greedy(g, r, 0.0, 0.1, 0.0, 8, &eligible), KOPT_GRAPH_NONE);
	ck_assert_uint_eq(eligible, 0);
	kopt_graph_free(g);
}
END_TEST

static struct kopt_graph *sample_graph(void)
{
	struct kopt_graph *g = kopt_graph_new(0);
	char key[32], act[32];
	for (uint32_t i = 0; i < 3000; i++) {
		snprintf(key, sizeof key, "node-%u", i);
		uint32_t id = add(g, key, NULL);
		snprintf(key, sizeof key, "{\"X\":%u}", i);
		ck_assert_int_eq(kopt_graph_set_str(g, id, KOPT_GRAPH_STR_CONFIG, key, strlen(key)), 0);
		if (i % 3 == 0) {
			kopt_graph_set_str(g, id, KOPT_GRAPH_STR_STATUS, "ok", 2);
			kopt_graph_set_result(g, id, 1.0 + i, -0.001 * i);
		}
		if (i > 0) {
			snprintf(act, sizeof act, "move-%u", i % 7);
			uint32_t e = edge_to(g, (i * 7919u) % i, act, id, 1.0 / (1 + i % 5));
			kopt_graph_backup(g, e, 0.01 * (i % 13) - 0.05, i % 11 == 0);
			kopt_graph_visit(g, id, i % 4);
		}
	}
	return g;
}

START_TEST(test_snapshot_round_trip)
{
	struct kopt_graph *g = sample_graph();
	char path[256], err[512], d1[17], d2[17];
	tmp_path(path, sizeof path, "rt.graph");
	ck_assert_int_eq(kopt_graph_save(g, path, err, sizeof err), 0);
	struct kopt_graph *h;
	ck_assert_msg(kopt_graph_load(path, &h, err, sizeof err) == 0, "%s", err);
	kopt_graph_digest(g, d1);
	kopt_graph_digest(h, d2);
	ck_assert_str_eq(d1, d2);
	ck_assert_uint_eq(kopt_graph_node_count(h), 3000);
	ck_assert_uint_eq(kopt_graph_edge_count(h), kopt_graph_edge_count(g));
	/* the restored hash table finds every key, and the graph keeps growing */
	ck_assert_uint_eq(kopt_graph_find(h, "node-2999", 9), 2999);
	int created;
	ck_assert_uint_eq(add(h, "node-1500", &created), 1500);
	ck_assert_int_eq(created, 0);
	ck_assert_uint_eq(add(h, "node-new", &created), 3000);
	ck_assert_int_eq(created, 1);
	/* the restored edges are found by action (their hashes are rebuilt on
	 * load), so linking an existing move again adds nothing */
	uint32_t e0 = kopt_graph_first_edge(h, 0);
	ck_assert_uint_ne(e0, KOPT_GRAPH_NONE);
	struct kopt_graph_edge_view ev;
	kopt_graph_edge(h, e0, &ev);
	ck_assert_uint_eq(kopt_graph_find_edge(h, 0, ev.action, ev.action_len), e0);
	size_t n_edges = kopt_graph_edge_count(h);
	char action[64];
	snprintf(action, sizeof action, "%s", ev.action);
	ck_assert_uint_eq(edge_to(h, 0, action, ev.child, 0.5), e0);
	ck_assert_uint_eq(kopt_graph_edge_count(h), n_edges);
	/* a changed statistic changes the digest */
	kopt_graph_digest(h, d1);
	kopt_graph_backup(h, 0, 0.5, 0);
	kopt_graph_digest(h, d2);
	ck_assert_str_ne(d1, d2);
	/* no temporary file is left behind */
	char tmp[300];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	ck_assert_int_ne(access(tmp, F_OK), 0);
	kopt_graph_free(g);
	kopt_graph_free(h);
	unlink(path);
}
END_TEST

START_TEST(test_snapshot_empty)
{
	struct kopt_graph *g = kopt_graph_new(0), *h;
	char path[256], err[512], d1[17], d2[17];
	tmp_path(path, sizeof path, "empty.graph");
	ck_assert_int_eq(kopt_graph_save(g, path, err, sizeof err), 0);
	ck_assert_msg(kopt_graph_load(path, &h, err, sizeof err) == 0, "%s", err);
	kopt_graph_digest(g, d1);
	kopt_graph_digest(h, d2);
	ck_assert_str_eq(d1, d2);
	ck_assert_uint_eq(kopt_graph_node_count(h), 0);
	kopt_graph_free(g);
	kopt_graph_free(h);
	unlink(path);
}
END_TEST

static long file_size(const char *path)
{
	FILE *fp = fopen(path, "rb");
	ck_assert_ptr_nonnull(fp);
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	fclose(fp);
	return n;
}

START_TEST(test_snapshot_corruption)
{
	struct kopt_graph *g = sample_graph(), *h = NULL;
	char path[256], err[512];
	tmp_path(path, sizeof path, "bad.graph");
	ck_assert_int_eq(kopt_graph_save(g, path, err, sizeof err), 0);
	long n = file_size(path);

	/* one flipped byte in the middle */
	FILE *fp = fopen(path, "r+b");
	fseek(fp, n / 2, SEEK_SET);
	int ch = fgetc(fp);
	fseek(fp, n / 2, SEEK_SET);
	fputc(ch ^ 0x40, fp);
	fclose(fp);
	ck_assert_int_eq(kopt_graph_load(path, &h, err, sizeof err), -1);
	ck_assert_ptr_null(h);
	ck_assert_ptr_nonnull(strstr(err, "corrupt"));

	/* truncated */
	ck_assert_int_eq(kopt_graph_save(g, path, err, sizeof err), 0);
	ck_assert_int_eq(truncate(path, n - 100), 0);
	ck_assert_int_eq(kopt_graph_load(path, &h, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "truncated"));

	/* not a snapshot at all */
	fp = fopen(path, "wb");
	fputs("{\"json\": true}\n", fp);
	fclose(fp);
	ck_assert_int_eq(kopt_graph_load(path, &h, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a kopt graph"));

	/* missing file names the file */
	unlink(path);
	ck_assert_int_eq(kopt_graph_load(path, &h, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, path));

	/* unwritable destination */
	ck_assert_int_eq(kopt_graph_save(g, "/nonexistent-dir/x.graph", err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "nonexistent-dir"));
	kopt_graph_free(g);
}
END_TEST

/* 10^6 insertions then 10^6 lookups of 64-hex-digit keys (the shape of the
 * engine's state hashes). */
START_TEST(test_scale_million)
{
	const uint32_t n = 1000000;
	char *keys = malloc((size_t)n * 65);
	ck_assert_ptr_nonnull(keys);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;
		snprintf(keys + (size_t)i * 65, 65, "%016llx%016llx%016llx%016llx",
			 (unsigned long long)x, (unsigned long long)(x ^ 0xabcdef),
			 (unsigned long long)(x >> 7), (unsigned long long)i);
	}
	struct kopt_graph *g = kopt_graph_new(0);
	/* no ck_assert inside the timed loops: each one writes a mark point */
	double t0 = now();
	uint64_t added = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id;
		int c;
		added += kopt_graph_add(g, keys + (size_t)i * 65, 64, &id, &c, NULL, 0) == 0 && c;
	}
	double t1 = now();
	ck_assert_uint_eq(added, n);
	uint64_t found = 0;
	for (uint32_t i = 0; i < n; i++)
		found += kopt_graph_find(g, keys + (size_t)i * 65, 64) == i;
	double t2 = now();
	ck_assert_uint_eq(found, n);
	if (getenv("KOPT_BENCH"))
		printf("graph: %u inserts %.3f s (%.0f ns each), %u lookups %.3f s (%.0f ns each)\n",
		       n, t1 - t0, (t1 - t0) * 1e9 / n, n, t2 - t1, (t2 - t1) * 1e9 / n);
	/* generous: the budget is "well under a second" on an idle machine; a
	 * sanitizer build or a loaded CI host may take a few times longer */
	ck_assert_msg(t2 - t0 < 5.0 * kopt_test_time_scale(), "10^6 inserts + lookups took %.2f s", t2 - t0);
	kopt_graph_free(g);
	free(keys);
}
END_TEST

static Suite *graph_suite(void)
{
	Suite *s = suite_create("graph");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_add_find_transpositions);
	tcase_add_test(tc, test_growth_many_keys);
	tcase_add_test(tc, test_payload);
	tcase_add_test(tc, test_edges_and_backup);
	tcase_add_test(tc, test_linker_like_link);
	tcase_add_test(tc, test_select_puct);
	tcase_add_test(tc, test_snapshot_round_trip);
	tcase_add_test(tc, test_snapshot_empty);
	tcase_add_test(tc, test_snapshot_corruption);
	tcase_add_test(tc, test_scale_million);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(graph_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
