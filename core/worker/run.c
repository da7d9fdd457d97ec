/* One "run" request of the GPU worker (run.h), from its decoded fields to
 * its reply's fields; loop.c sends the reply. One request evaluates one
 * candidate:
 *  1. load its CUBIN (a fresh module), read its resources (registers, static
 *     and local memory, max threads) and check the launch against them and
 *     the device (threads, shared memory with the opt-in attribute above
 *     48 KB, registers, occupancy > 0): impossible launches are "invalid";
 *  2. correctness trial on input set A (the spec's distributions, seeded):
 *     outputs poisoned with NaN patterns that change every run, the
 *     candidate runs before the reference, the inputs are compared with
 *     their pristine host copy afterwards (any change = "wrong"), every
 *     output element must be written, NaN/Inf never passes, relative L2
 *     and max-abs error against the tolerance; the reference's output is
 *     computed once per input set and kept on the host;
 *  3. timing on a freshly loaded module (bench.c), outputs poisoned before
 *     every sample; the output of the last timed run is checked again, so
 *     a kernel that behaves differently on later calls is caught;
 *  4. a second correctness trial, again on a fresh module, on input set B:
 *     another seed and another distribution (kopt_dist_alternate), so a
 *     kernel right only for [0,1) inputs fails before it can become best.
 * With profile=1, hardware counters are collected between 3 and 4 by one
 * launch under CUPTI (profile.h).
 * A sticky CUDA error answers "crash" and a kernel past its deadline
 * "timeout"; the loop then ends the worker, since its context is unusable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/bench.h"
#include "worker/data.h"
#include "worker/numerics_trivial.h"
#include "worker/profile.h"
#include "worker/reply.h"
#include "worker/run.h"
#include "worker/run_compare.h"

/* Resource checks before any launch; fills the result's resources. Returns
 * 0 when the launch is possible, else 1 with w->log set (status invalid). */
static int check_resources(struct worker *w, CUfunction f, const struct launch *l,
			   struct kopt_msg *res)
{
	int regs = 0, smem_static = 0, local = 0, max_threads = 0, cbytes = 0;
	kopt_cu.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
	kopt_cu.cuFuncGetAttribute(&smem_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
	kopt_cu.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f);
	kopt_cu.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
	kopt_cu.cuFuncGetAttribute(&cbytes, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, f);
	KOPT_REPLY_INT(res, regs, regs);
	KOPT_REPLY_INT(res, smem_static, smem_static);
	KOPT_REPLY_INT(res, smem_dynamic, l->smem);
	KOPT_REPLY_INT(res, local_bytes, local);
	KOPT_REPLY_INT(res, const_bytes, cbytes);
	KOPT_REPLY_INT(res, max_threads, max_threads);
	int blocks = -1;
	int impossible = kopt_worker_launch_fits(w, f, l, &blocks);
	if (blocks >= 0) { /* known once the earlier limits passed */
		const struct kopt_cuda_device *d = &w->dev;
		double threads = (double)l->block[0] * l->block[1] * l->block[2];
		KOPT_REPLY_INT(res, blocks_per_sm, blocks);
		KOPT_REPLY_NUM(res, occupancy,
			       d->max_threads_sm > 0 ? blocks * threads / d->max_threads_sm : 0.0);
	}
	return impossible;
}

/* (run_compare.h) */
const char *kopt_worker_launch_and_wait(struct worker *w, CUfunction f, const struct launch *l,
					void **params, const char *who, int rest, float *ms)
{
	CUevent ev[2] = {NULL, NULL};
	int gated = 0;
	if (ms != NULL) {
		/* a timed check launch (check 2's, whose time may be charged)
		 * starts behind the gate: a host delay between the first event
		 * and the launch made an honest microsecond kernel look slow */
		*ms = -1.0f;
		gated = kopt_bench_gate(w) == CUDA_SUCCESS;
		if (kopt_cu.cuEventCreate(&ev[0], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
		    kopt_cu.cuEventCreate(&ev[1], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
		    kopt_cu.cuEventRecord(ev[0], w->stream) != CUDA_SUCCESS)
			ms = NULL;
	}
	CUresult r = kopt_worker_launch(w, f, l, params);
	if (r == CUDA_SUCCESS && rest)
		r = kopt_worker_launch_rest(w); /* a pipeline's later kernels */
	if (r == CUDA_SUCCESS && ms != NULL &&
	    kopt_cu.cuEventRecord(ev[1], w->stream) != CUDA_SUCCESS)
		ms = NULL;
	if (gated)
		kopt_bench_gate_open(w); /* (on every path: the stream waits for it) */
	const char *st = NULL;
	char buf[256];
	if (r != CUDA_SUCCESS) {
		snprintf(w->log, sizeof w->log, "%s launch: %s", who,
			 kopt_cuda_strerror(r, buf, sizeof buf));
		st = kopt_cuda_error_is_sticky(r) ? "crash" : "launch_error";
	} else {
		int ws = kopt_worker_wait(w, w->stream, w->timeout_ms, &r);
		if (ws == 1) {
			snprintf(w->log, sizeof w->log, "%s still running after %lld ms", who,
				 (long long)w->timeout_ms);
			st = "timeout";
		} else if (ws != 0) {
			snprintf(w->log, sizeof w->log, "%s run: %s", who,
				 kopt_cuda_strerror(r, buf, sizeof buf));
			st = "crash";
		} else if (ms != NULL) {
			kopt_cu.cuEventElapsedTime(ms, ev[0], ev[1]);
		}
	}
	/* (after a sticky error the context is gone, and so are its events) */
	for (int i = 0; i < 2 && (st == NULL || strcmp(st, "crash") != 0); i++)
		if (ev[i] != NULL)
			kopt_cu.cuEventDestroy(ev[i]);
	return st;
}

/* One launch of the candidate: outputs poisoned and declared state reset
 * first (kopt_worker_before_launch). */
static const char *run_once(struct worker *w, CUfunction f, const struct launch *l, void **params,
			    const char *who, float *ms)
{
	CUresult r = kopt_worker_before_launch(w);
	if (r != CUDA_SUCCESS) {
		char buf[256];
		snprintf(w->log, sizeof w->log, "preparing the launch: %s",
			 kopt_cuda_strerror(r, buf, sizeof buf));
		return "crash";
	}
	return kopt_worker_launch_and_wait(w, f, l, params, who, 1, ms);
}

/* One launch of the prepared candidate on set s (s may be a view over the
 * timing copy), then every check: nothing written outside its buffers, the
 * outputs against the reference's, the inputs unchanged, no module variable
 * changed. */
static const char *check_run(struct worker *w, struct prepared *pr, struct inputset *s,
			     const struct job *j, const char *what, struct trial_out *to,
			     float *launch_ms)
{
	memset(to, 0, sizeof *to);
	char buf[256];
	w->cur_set = s;
	CUresult r = kopt_worker_guard_arm(w, s);
	if (r != CUDA_SUCCESS) {
		snprintf(w->log, sizeof w->log, "arming the guard bands: %s",
			 kopt_cuda_strerror(r, buf, sizeof buf));
		return "crash";
	}
	const char *st = run_once(w, pr->m.fn, &j->launch, pr->p.ptrs, "kernel", launch_ms);
	if (st == NULL)
		st = kopt_worker_guard_check(w, s, what);
	if (st == NULL)
		st = kopt_worker_compare_outputs(w, s, j, what, to);
	if (st == NULL)
		st = kopt_worker_check_globals(w, &pr->m, what);
	return st;
}

/* Whether the timed launches (median_ms) ran much faster than check 2's
 * one launch, in the same module and buffers on new inputs (check2_ms): a
 * kernel that keeps an answer across launches, keyed where kopt cannot see
 * it (its input's address and a few of its words, with the nudged bits
 * masked out), replays it on every timed launch, within the tolerance of
 * the nudged inputs, and computes only on inputs new to it. Check 2's inputs
 * were just copied in (a warm L2, which only favours check 2), so an honest
 * kernel's launch there is not slower than its timed median but for a
 * data-dependent kernel on other data, or a host delay of a few microseconds
 * before the launch: hence a factor of 2 and 4 microseconds of slack, after
 * the event pair's own floor is taken off (event_floor_ms, below; a
 * factor of 3 and 20 microseconds let a replay paced to a third of its
 * compute through: tests/cheats/replay_paced). An honest kernel charged
 * keeps its status, timed at check 2's one launch. */
#define TIMED_CHECKED_RATIO 2.0
#define TIMED_CHECKED_SLACK_MS 0.004

/* What an event pair reads around an almost empty launch (the stamp
 * kernel, one block), the least of 7: check 2's and 3's launches are timed
 * by events, the median by CUPTI's kernel times, and that floor (about 2
 * microseconds on an H200) counted as the kernel's let a whole replay of a
 * 12-microsecond kernel pass under a slack of 10 (tests/cheats
 * slack_replay). Measured once per worker. */
static double event_floor_ms(struct worker *w)
{
	if (w->event_floor_ms > 0.0)
		return w->event_floor_ms;
	double best = -1.0;
	struct launch l = {{1, 1, 1}, {32, 1, 1}, 0, {0, 0, 0}, 0};
	void *params[] = {&w->stamps_dev};
	for (int i = 0; i < 7; i++) {
		float ms = -1.0f;
		if (kopt_worker_launch_and_wait(w, w->stamp, &l, params, "event calibration", 0,
						&ms) != NULL)
			break;
		if (ms > 0.0f && (best < 0.0 || ms < best))
			best = ms;
	}
	w->event_floor_ms = best > 0.0 ? best : 1e-9;
	return w->event_floor_ms;
}

static int timed_faster_than_checked(struct worker *w, double median_ms, double check2_ms)
{
	double kernel_ms = check2_ms - event_floor_ms(w);
	return median_ms > 0.0 &&
	       kernel_ms > TIMED_CHECKED_RATIO * median_ms + TIMED_CHECKED_SLACK_MS;
}

/* NULL when set s's inputs on the device are as drawn; else "wrong" (and
 * the inputs restored) or "crash". */
static const char *inputs_kept(struct worker *w, struct inputset *s, const char *whose)
{
	char which[160];
	int mod = kopt_worker_check_inputs(w, s, which, sizeof which);
	if (mod < 0)
		return "crash";
	if (mod == 0)
		return NULL;
	snprintf(w->log, sizeof w->log,
		 "after its checks and timing, %s input '%s' was modified: a launch wrote to a "
		 "buffer it was not given (its address kept from an earlier launch)",
		 whose, which);
	return "wrong";
}

/* A candidate that failed after check 1 may still have written into set
 * A's inputs (their address kept from check 1): they are restored, so the
 * next candidate is not blamed for it; its own status stands. After a crash
 * or a timeout the worker ends, and the sets with it. */
static const char *with_inputs_restored(struct worker *w, struct inputset *a, const char *st)
{
	if (strcmp(st, "crash") == 0 || strcmp(st, "timeout") == 0)
		return st;
	char which[160];
	return kopt_worker_check_inputs(w, a, which, sizeof which) < 0 ? "crash" : st;
}

/* One correctness trial of the candidate on set s with a freshly loaded module. */
static const char *trial(struct worker *w, struct inputset *s, const struct job *j,
			 const char *what, struct trial_out *to)
{
	memset(to, 0, sizeof *to);
	struct prepared pr;
	const char *st = kopt_worker_prepare(w, j, s, &pr);
	if (st == NULL)
		st = check_run(w, &pr, s, j, what, to, NULL);
	kopt_worker_release(w, &pr);
	return st;
}

static void set_launch(struct launch *l, int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by,
		       int64_t bz, int64_t smem)
{
	l->cluster[0] = l->cluster[1] = l->cluster[2] = 1;
	l->cooperative = 0;
	l->grid[0] = (unsigned)gx;
	l->grid[1] = (unsigned)gy;
	l->grid[2] = (unsigned)gz;
	l->block[0] = (unsigned)bx;
	l->block[1] = (unsigned)by;
	l->block[2] = (unsigned)bz;
	l->smem = (unsigned)smem;
}

/* The error figures of a trial (check 1, or check 2 when `second`), only
 * when its outputs were compared (no number stands for a measurement that
 * did not happen). */
static void put_trial(struct kopt_msg *m, int second, const struct trial_out *t)
{
	if (!t->compared)
		return;
	if (!second) {
		KOPT_REPLY_NUM(m, err_rel_l2, t->rel_l2);
		KOPT_REPLY_NUM(m, err_max_abs, t->max_abs);
		KOPT_REPLY_INT(m, err_unwritten, t->unwritten);
		KOPT_REPLY_INT(m, err_nonfinite, t->nonfinite);
	} else {
		KOPT_REPLY_NUM(m, err2_rel_l2, t->rel_l2);
		KOPT_REPLY_NUM(m, err2_max_abs, t->max_abs);
		KOPT_REPLY_INT(m, err2_unwritten, t->unwritten);
		KOPT_REPLY_INT(m, err2_nonfinite, t->nonfinite);
	}
}

/* The seed of set B (which 1) or C (2) of a request: the request's seed
 * mixed with the worker's secret (data.h), so that set A, whose seed is
 * public, does not tell them. */
static uint64_t secret_seed(const struct worker *w, uint64_t seed, uint64_t which)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull ^ w->secret ^ which * 0xc2b2ae3d27d4eb4full;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Set B of a request: another seed and the alternate distributions. */
static struct inputset *other_set(struct worker *w, uint64_t seed)
{
	return kopt_worker_get_set(w, secret_seed(w, seed, 1), 1, w->log, sizeof w->log);
}

/* Whether sets a and b have the same reference answer, byte for byte, in
 * every output (1 too when either is missing: not known to differ). */
static int same_answer(struct worker *w, const struct inputset *a, const struct inputset *b)
{
	if (a == NULL || b == NULL || !a->have_ref || !b->have_ref)
		return 1;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *o = &w->args[i];
		if (o->kind != ARG_ARRAY || !kopt_worker_is_output(o))
			continue;
		if (a->ref_out[i] == NULL || b->ref_out[i] == NULL)
			return 1;
		if (memcmp(a->ref_out[i], b->ref_out[i], kopt_worker_arg_bytes(o)) != 0)
			return 0;
	}
	return 1;
}

/* Check 3: a fresh draw of set A's own distributions (set C), run and timed
 * once in the module and buffers just timed, when the timed median beat
 * check 2's launch by the charge's margin. Check 2 draws from other
 * distributions on purpose, and a data-dependent kernel is honestly slower
 * there (tests/honest_qa/mandelbrot_mc: 14x to 95x, every config charged);
 * a replay of set A's answer is not faster on set C's new values. So the
 * charge stands only when check 3's launch is slower too (its time is then
 * the one charged). 0 with *ms set, or -1 with the status in *st (the
 * launch failed its check), or 1 when set C would not be new (no input
 * drawn by the seed, or its reference's answer set A's) or could not be
 * made (no memory): check 2's time is charged as before. */
static int check3(struct worker *w, struct prepared *pr, uint64_t seed, struct job *j, float *ms,
		  const char **st)
{
	/* set C is new only where the seed draws: an input read from a file,
	 * generated, or a constant or arange is set A's own bytes there. One
	 * drawn input is enough: a replay of set A's answer is then wrong on
	 * set C (or computes, and is slow); with none, a replay keyed on the
	 * inputs would be as fast on set C as when timed. (Every input had to
	 * be drawn before: one constant beside a drawn input charged an honest
	 * data-dependent kernel check 2's time, tests/honest/mandelbrot_axis.) */
	int drawn = 0, kept = 0;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_ARRAY || kopt_worker_is_output(a))
			continue;
		int d = a->file[0] == '\0' &&
			(a->dist == KOPT_DIST_NORMAL || a->dist == KOPT_DIST_UNIFORM ||
			 a->dist == KOPT_DIST_UNIFORM01);
		drawn += d;
		kept += !d;
	}
	if (!drawn)
		return 1;
	char err[256];
	/* (a new draw every time: a set C that repeats across the candidates
	 * of a seed's evaluations is one a cache kept from one candidate to the
	 * next, in memory the worker does not clear, answers fast) */
	uint64_t draw = 2 + ++w->check3_draws;
	struct inputset *c = kopt_worker_get_set(w, secret_seed(w, seed, draw), 0, err, sizeof err);
	struct inputset tc;
	struct trial_out t3;
	if (c == NULL || kopt_worker_scratch_view(w, c, &tc) != 0)
		return 1;
	if (kopt_worker_fill_constants(w, pr->m.mod, &tc) != 0) {
		*st = "launch_error";
		return -1;
	}
	if (kopt_worker_scrub(w, w->scrub_reach) != 0) {
		*st = "error";
		return -1;
	}
	*st = check_run(
	    w, pr, &tc, j,
	    "check 3 (new inputs of the timed distributions, in the module and buffers just "
	    "timed)",
	    &t3, ms);
	c->have_ref = tc.have_ref;
	if (*st != NULL)
		return -1;
	/* with inputs kept, set C is new only if its answer is: where the
	 * outputs follow the kept inputs alone, a replay keyed on them is
	 * right on set C and as fast as when timed */
	return kept && same_answer(w, kopt_worker_get_set(w, seed, 0, err, sizeof err), c) ? 1 : 0;
}

/* The float input arrays of the timing copy that bench.c nudges before each
 * sample (kopt_nudge), so that no two timed launches read the same bytes:
 * a kernel that caches results by input content gains nothing. */
static void set_nudges(struct worker *w, const struct inputset *view, int on)
{
	w->nudges = 0;
	for (int i = 0; on && i < w->nargs && w->nudges < 16; i++) {
		const struct warg *a = &w->args[i];
		int is_float = a->type == KOPT_F32 || a->type == KOPT_F64 || a->type == KOPT_F16 ||
			       a->type == KOPT_BF16;
		if (a->kind != ARG_ARRAY || a->output || !is_float || a->count == 0)
			continue;
		w->nudge_ptr[w->nudges] = view->dev[i];
		w->nudge_stride[w->nudges] = a->type == KOPT_F64 ? 2 : 1;
		w->nudge_words[w->nudges] =
		    a->count * kopt_dtype_size(a->type) / 4 / w->nudge_stride[w->nudges];
		w->nudge_last[w->nudges] = ~0ull;
		w->nudge_arg[w->nudges] = i;
		if (w->nudge_words[w->nudges] > 0)
			w->nudges++;
	}
}

/* The largest local-memory frame of the candidate's kernels: its entry and
 * a pipeline's later ones (stages: entry:... separated by ';'). */
static size_t largest_frame(const struct wmodule *mod, const char *stages)
{
	int local = 0;
	kopt_cu.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, mod->fn);
	size_t most = local > 0 ? (size_t)local : 0;
	for (const char *p = stages; p != NULL && *p != '\0';) {
		size_t n = strcspn(p, ":;");
		char entry[1024];
		CUfunction f;
		snprintf(entry, sizeof entry, "%.*s",
			 (int)(n < sizeof entry ? n : sizeof entry - 1), p);
		if (kopt_cu.cuModuleGetFunction(&f, mod->mod, entry) == CUDA_SUCCESS &&
		    kopt_cu.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f) ==
			CUDA_SUCCESS &&
		    local > 0 && (size_t)local > most)
			most = (size_t)local;
		p = strchr(p, ';');
		p = p != NULL ? p + 1 : NULL;
	}
	return most;
}

const char *kopt_worker_run(struct worker *w, const struct kopt_request *rq,
			    const struct kopt_msgview *v, struct kopt_msg *m)
{
	struct job j;
	memset(&j, 0, sizeof j);
	j.cubin = rq->cubin;
	j.cubin_len = rq->cubin_len;
	_Static_assert(sizeof j.entry == sizeof rq->entry, "entry");
	_Static_assert(sizeof j.state == sizeof rq->state, "state");
	memcpy(j.entry, rq->entry, sizeof j.entry);
	memcpy(j.state, rq->state, sizeof j.state);
	j.nudge = (int)rq->nudge;
	_Static_assert(sizeof j.dump == sizeof rq->dump, "dump");
	memcpy(j.dump, rq->dump, sizeof j.dump);
	_Static_assert(sizeof j.stages == sizeof rq->stages, "stages");
	memcpy(j.args1, rq->args1, sizeof j.args1);
	memcpy(j.ref_args, rq->ref_args, sizeof j.ref_args);
	memcpy(j.stages, rq->stages, sizeof j.stages);
	set_launch(&j.launch, rq->grid_x, rq->grid_y, rq->grid_z, rq->block_x, rq->block_y,
		   rq->block_z, rq->smem);
	j.launch.cluster[0] = (unsigned)rq->cluster_x;
	j.launch.cluster[1] = (unsigned)rq->cluster_y;
	j.launch.cluster[2] = (unsigned)rq->cluster_z;
	j.launch.cooperative = rq->cooperative != 0;
	set_launch(&j.ref_launch, rq->ref_grid_x, rq->ref_grid_y, rq->ref_grid_z, rq->ref_block_x,
		   rq->ref_block_y, rq->ref_block_z, rq->ref_smem);
	j.tol_rel_l2 = rq->tol_rel_l2;
	j.tol_max_abs = rq->tol_max_abs;
	uint64_t seed = (uint64_t)rq->seed;
	int do_time = (int)rq->time;
	int verify2 = (int)rq->verify2;
	w->timeout_ms = rq->timeout_ms;
	struct timing_opts o = {
	    (int)rq->min_samples, (int)rq->max_samples, rq->max_time_s,
	    rq->max_noise,	  rq->min_gpu_s,
	};
	if (j.cubin == NULL || j.cubin_len == 0 || j.entry[0] == '\0') {
		snprintf(w->log, sizeof w->log, "request without cubin or entry");
		return "error";
	}
	if (kopt_worker_setup_args(w, (int)rq->nargs, v, w->log, sizeof w->log) != 0) {
		return "error";
	}
	double t_start = kopt_worker_now_ms();

	/* 1. resources */
	struct wmodule mod;
	CUresult r = kopt_worker_load(w, &mod, &j);
	if (r != CUDA_SUCCESS) {
		char buf[256];
		if (w->log[0] == '\0')
			snprintf(w->log, sizeof w->log, "loading the kernel '%s': %s", j.entry,
				 kopt_cuda_strerror(r, buf, sizeof buf));
		return "launch_error";
	}
	int impossible = check_resources(w, mod.fn, &j.launch, m);
	size_t reach = largest_frame(&mod, j.stages);
	kopt_worker_unload(w, &mod);
	if (impossible) {
		return "invalid";
	}
	/* nothing an earlier candidate left in local or shared memory */
	w->scrub_reach = reach;
	if (kopt_worker_scrub(w, reach) != 0)
		return "error";

	/* 2. correctness on set A */
	struct inputset *a = kopt_worker_get_set(w, seed, 0, w->log, sizeof w->log);
	if (a == NULL) {
		return "error";
	}
	int had_ref = a->have_ref;
	struct trial_out to;
	const char *st = trial(w, a, &j, "check 1", &to);
	KOPT_REPLY_INT(m, ref_cached, had_ref);
	put_trial(m, 0, &to);
	KOPT_REPLY_NUM(m, t_check_s, (kopt_worker_now_ms() - t_start) / 1e3);
	if (st != NULL) {
		return st;
	}

	/* 3. timing on a fresh module over a copy of set A, then check 2 on that
	 * same module and in those same buffers with set B's inputs: any state
	 * the kernel kept across launches (a memo, a launch counter, a cache
	 * keyed on its buffers) gives B the wrong answer */
	if (do_time) {
		double t0 = kopt_worker_now_ms();
		struct prepared pr;
		struct timing t;
		struct inputset ta;
		int nudged = 0;
		memset(&pr, 0, sizeof pr); /* released below even when never prepared */
		st = kopt_worker_scratch_view(w, a, &ta) != 0
			 ? "crash"
			 : kopt_worker_prepare(w, &j, &ta, &pr);
		if (st == NULL && kopt_worker_guard_arm(w, &ta) != CUDA_SUCCESS)
			st = "crash";
		/* (nothing carried from check 1's launches into the timed ones) */
		if (st == NULL && kopt_worker_scrub(w, reach) != 0)
			st = "error";
		if (st == NULL) {
			set_nudges(w, &ta, j.nudge);
			/* CUPTI times one kernel by its name: a pipeline is timed by events */
			w->entry = j.stages[0] == '\0' ? j.entry : NULL;
			/* every timed launch's output compared, not only the last one's:
			 * a kernel that skips some of them moves the median */
			if (w->check_timed)
				kopt_worker_samples_begin(w, &ta, j.tol_rel_l2, j.tol_max_abs,
							  o.max_samples > 0 ? o.max_samples : 100);
			st = kopt_bench_time(w, pr.m.fn, &j.launch, pr.p.ptrs, &o, &t);
			const char *sst = kopt_worker_samples_check(w, st == NULL ? t.samples : 0);
			if (st == NULL)
				st = sst;
			w->entry = NULL;
			nudged = w->nudges;
			w->nudges = 0;
		}
		if (st == NULL)
			st = kopt_worker_guard_check(w, &ta, "timed runs");
		if (st == NULL)
			st = kopt_worker_check_globals(w, &pr.m, "timed runs");
		if (st == NULL && w->check_timed) {
			struct trial_out tt;
			st = kopt_worker_check_timed_output(w, &ta, &j, nudged, &tt);
		}
		int timed = st == NULL;
		double t_time_s = (kopt_worker_now_ms() - t0) / 1e3;
		float check2_ms = -1.0f;
		if (st == NULL && verify2) {
			struct inputset *b = other_set(w, seed);
			struct inputset tb;
			struct trial_out t2;
			if (b == NULL)
				st = "error";
			else if (kopt_worker_scratch_view(w, b, &tb) != 0)
				st = "crash";
			else if (kopt_worker_fill_constants(w, pr.m.mod, &tb) != 0)
				st = "launch_error";
			else if (kopt_worker_scrub(w, reach) != 0)
				st = "error"; /* (nothing carried from check 1 or timing) */
			else {
				st =
				    check_run(w, &pr, &tb, &j,
					      "check 2 (new inputs and distribution, in the module "
					      "and buffers just timed)",
					      &t2, &check2_ms);
				b->have_ref = tb.have_ref;
				put_trial(m, 1, &t2);
			}
		}
		if (timed) {
			double time_ms = t.median_ms;
			if (st == NULL && check2_ms > 0.0f) {
				KOPT_REPLY_NUM(m, check2_ms, (double)check2_ms);
				float check3_ms = -1.0f;
				int c3 = timed_faster_than_checked(w, t.median_ms, check2_ms)
					     ? check3(w, &pr, seed, &j, &check3_ms, &st)
					     : 0;
				if (c3 == 0 && check3_ms > 0.0f)
					KOPT_REPLY_NUM(m, check3_ms, (double)check3_ms);
				if (c3 == 1 ||
				    (c3 == 0 && check3_ms > 0.0f &&
				     timed_faster_than_checked(w, t.median_ms, check3_ms))) {
					/* (its kernel time: the event pair's floor taken off) */
					float charged = (c3 == 0 ? check3_ms : check2_ms) -
							(float)event_floor_ms(w);
					snprintf(
					    w->log, sizeof w->log,
					    "the timed launches (median %.4g ms) ran %.1fx faster "
					    "than check %d's launch on new inputs (%.4g ms): the "
					    "result is charged that time",
					    t.median_ms, charged / t.median_ms, c3 == 0 ? 3 : 2,
					    charged);
					time_ms = charged;
					KOPT_REPLY_INT(m, charged_check2, 1);
				}
			}
			KOPT_REPLY_NUM(m, time_ms, time_ms);
			KOPT_REPLY_NUM(m, p10_ms, t.p10_ms);
			KOPT_REPLY_NUM(m, p90_ms, t.p90_ms);
			KOPT_REPLY_NUM(m, mean_ms, t.mean_ms);
			KOPT_REPLY_NUM(m, min_ms, t.min_ms);
			KOPT_REPLY_NUM(m, stdev_ms, t.stdev_ms);
			KOPT_REPLY_NUM(m, noise, t.noise);
			KOPT_REPLY_INT(m, samples, t.samples);
			KOPT_REPLY_NUM(m, clock_mhz, t.clock_mhz);
			KOPT_REPLY_STR(m, timer, t.timer);
			KOPT_REPLY_NUM(m, events_ms, t.events_median_ms);
			KOPT_REPLY_NUM(m, t_time_s, t_time_s);
		}
		kopt_worker_release(w, &pr);
		if (st != NULL) {
			return with_inputs_restored(w, a, st);
		}
	}

	/* 3b. hardware counters on request (profile.c), after the timing
	 * window, on the same inputs */
	if (rq->profile) {
		struct prepared pr;
		st = kopt_worker_prepare(w, &j, a, &pr);
		if (st == NULL)
			st = kopt_worker_profile(w, pr.m.fn, &j.launch, pr.p.ptrs, rq, m);
		kopt_worker_release(w, &pr);
		if (st != NULL) {
			return with_inputs_restored(w, a, st);
		}
	}

	/* 4. without timing, check 2 on a fresh module */
	if (verify2 && !do_time) {
		struct inputset *b = other_set(w, seed);
		if (b == NULL) {
			return "error";
		}
		struct trial_out t2;
		memset(&t2, 0, sizeof t2);
		st = kopt_worker_scrub(w, reach) != 0
			 ? "error"
			 : trial(w, b, &j, "check 2 (other inputs and distribution)", &t2);
		put_trial(m, 1, &t2);
		if (st != NULL) {
			return with_inputs_restored(w, a, st);
		}
	}
	/* The input sets' device buffers outlive this evaluation, and check 1
	 * hashes only the set it runs on: a kernel that kept set A's address
	 * from its check and wrote there later, from launches given other
	 * buffers, would have the next candidate blamed. Hashed again here, so
	 * the blame falls on the writer. */
	st = inputs_kept(w, a, "check 1's");
	if (st == NULL && verify2) {
		struct inputset *b = other_set(w, seed);
		st = b == NULL ? "error" : inputs_kept(w, b, "check 2's");
	}
	if (st != NULL)
		return st;
	/* trivial outputs that pass in both checks: the spec cannot tell them
	 * from the problem's answer */
	if (verify2 && w->trivial_probed[0] && w->trivial_probed[1]) {
		char both[sizeof w->trivial[0]];
		memcpy(both, w->trivial[0], sizeof both);
		kopt_trivial_intersect(both, w->trivial[1]);
		if (both[0] != '\0')
			KOPT_REPLY_STR(m, trivial, both);
	}
	KOPT_REPLY_NUM(m, t_total_s, (kopt_worker_now_ms() - t_start) / 1e3);
	return "ok";
}
