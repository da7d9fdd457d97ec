/* Kernel timing in the worker: CUDA events on a harness-owned stream, an
 * nvbench-style blocking kernel so the queued samples start without launch
 * gaps, the L2 emptied (kopt_worker_flush_l2: evict_last lines swept out,
 * normal ones by a memset, then the flush buffer's lines discarded) and the outputs
 * re-poisoned before every sample, the SM clock stamped around each batch,
 * and sampling until the relative noise is under the target after a minimum
 * number of samples, or a cap on samples or wall time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cupti_timer.h"
#include "worker/bench.h"

#define BATCH_MAX 4 /* samples queued behind one blocking kernel */
#define SPIN_TIMEOUT_NS 2000000000ull


CUresult kopt_bench_gate(struct worker *w)
{
	*w->flag = 0;
	*w->spin_timed_out = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	unsigned long long timeout_ns = SPIN_TIMEOUT_NS;
	void *spin_args[] = {&w->flag_dev, &timeout_ns, &w->spin_timed_out_dev};
	return kopt_cu.cuLaunchKernel(w->spin, 1, 1, 1, 1, 1, 1, 0, w->stream, spin_args, NULL);
}

void kopt_bench_gate_open(struct worker *w)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*w->flag = 1;
}

/* Three steps: a sweep of evict_last reads replaces the lines of that
 * priority (a candidate's own evict_last input among them), a memset of
 * the L2's size the lines of normal priority (evict_last lines are capped
 * at a part of the L2: the sweep alone left the rest, and every kernel's
 * input from its last launch, in place), and a discard drops all the
 * buffer's lines, clean or dirty, so the timed kernel starts on an empty
 * L2 with nothing to write back. */
CUresult kopt_worker_flush_l2(struct worker *w)
{
	unsigned long long lines = w->flush_bytes / 128;
	void *args[] = {&w->flush, &lines};
	unsigned blocks = (unsigned)(4 * w->dev.sm_count);
	size_t l2 = ((size_t)w->dev.l2_bytes + 3) & ~(size_t)3;
	CUresult r = kopt_cu.cuLaunchKernel(w->flush_sweep, blocks, 1, 1, 256, 1, 1, 0, w->stream, args,
					    NULL);
	if (r == CUDA_SUCCESS)
		r = kopt_cu.cuMemsetD32Async(w->flush, 0, (l2 < w->flush_bytes ? l2 : w->flush_bytes) / 4,
					     w->stream);
	if (r == CUDA_SUCCESS)
		r = kopt_cu.cuLaunchKernel(w->flush_discard, blocks, 1, 1, 256, 1, 1, 0, w->stream, args,
					   NULL);
	return r;
}
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* q-quantile of sorted v (linear interpolation) */
static double quantile(const double *v, int n, double q)
{
	if (n == 0)
		return 0.0;
	double pos = q * (n - 1);
	int i = (int)pos;
	double frac = pos - i;
	return i + 1 < n ? v[i] * (1.0 - frac) + v[i + 1] * frac : v[i];
}

static void summarise(const double *samples, int n, struct timing *t)
{
	double *v = malloc((size_t)n * sizeof *v);
	if (v == NULL)
		return;
	memcpy(v, samples, (size_t)n * sizeof *v);
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	double sum = 0.0, sq = 0.0;
	for (int i = 0; i < n; i++)
		sum += v[i];
	double mean = sum / n;
	for (int i = 0; i < n; i++)
		sq += (v[i] - mean) * (v[i] - mean);
	t->samples = n;
	t->median_ms = quantile(v, n, 0.5);
	t->p10_ms = quantile(v, n, 0.1);
	t->p90_ms = quantile(v, n, 0.9);
	t->min_ms = v[0];
	t->mean_ms = mean;
	t->stdev_ms = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
	t->noise = mean > 0.0 ? t->stdev_ms / mean : 0.0;
	free(v);
}

/* Before a sample: one low bit of one word of each float input flipped (of
 * an f64, its low word's), the previous sample's flip undone (set_nudges in
 * run.c picks the arrays). */
static CUresult nudge_inputs(struct worker *w)
{
	CUresult r = CUDA_SUCCESS;
	for (int i = 0; r == CUDA_SUCCESS && i < w->nudges; i++) {
		unsigned long long n = w->nudge_words[i], stride = w->nudge_stride[i];
		unsigned long long pick = (w->nonce++ * 0x9e3779b97f4a7c15ull >> 11) % n;
		unsigned long long flip = pick * stride;
		if (flip == w->nudge_last[i])
			flip = (pick + 1) % n * stride;
		if (n == 1 && w->nudge_last[i] != ~0ull)
			continue; /* a one-word input: flipping it back and forth repeats */
		void *params[] = {&w->nudge_ptr[i], &w->nudge_last[i], &flip};
		r = kopt_cu.cuLaunchKernel(w->nudge, 1, 1, 1, 1, 1, 1, 0, w->stream, params, NULL);
		w->nudge_last[i] = flip;
	}
	return r;
}

static const char *fail(struct worker *w, CUresult r, const char *what)
{
	char buf[256];
	snprintf(w->log, sizeof w->log, "%s: %s", what, kopt_cuda_strerror(r, buf, sizeof buf));
	return kopt_cuda_error_is_sticky(r) ? "crash" : "launch_error";
}

const char *kopt_bench_time(struct worker *w, CUfunction f, const struct launch *l, void **params,
			    const struct timing_opts *o, struct timing *t)
{
	memset(t, 0, sizeof *t);
	CUevent ev[2 * BATCH_MAX];
	int nev = 0;
	double *samples = NULL, *ev_samples = NULL, got[BATCH_MAX];
	const char *status = NULL;
	int cupti = 0;
	CUresult r = CUDA_SUCCESS;
	int cap = o->max_samples > 0 ? o->max_samples : 100;
	samples = malloc((size_t)cap * sizeof *samples);
	ev_samples = malloc((size_t)cap * sizeof *ev_samples);
	if (samples == NULL || ev_samples == NULL) {
		snprintf(w->log, sizeof w->log, "out of host memory for samples");
		return "launch_error";
	}
	for (; nev < 2 * BATCH_MAX; nev++)
		if ((r = kopt_cu.cuEventCreate(&ev[nev], CU_EVENT_DEFAULT)) != CUDA_SUCCESS) {
			status = fail(w, r, "cuEventCreate");
			goto out;
		}

	/* Warm-up: one launch (module load, caches, clocks), timed by events to
	 * size the batches. */
	if ((r = kopt_worker_before_launch(w)) != CUDA_SUCCESS ||
	    (r = kopt_cu.cuEventRecord(ev[0], w->stream)) != CUDA_SUCCESS ||
	    (r = kopt_worker_launch(w, f, l, params)) != CUDA_SUCCESS ||
	    (r = kopt_worker_launch_rest(w)) != CUDA_SUCCESS ||
	    (r = kopt_cu.cuEventRecord(ev[1], w->stream)) != CUDA_SUCCESS) {
		status = fail(w, r, "warm-up launch");
		goto out;
	}
	int ws = kopt_worker_wait(w, w->stream, w->timeout_ms, &r);
	if (ws == 1) {
		snprintf(w->log, sizeof w->log, "kernel still running after %lld ms (warm-up)",
			 (long long)w->timeout_ms);
		status = "timeout";
		goto out;
	}
	if (ws != 0) {
		status = fail(w, r, "warm-up run");
		goto out;
	}
	float est = 0.0f;
	kopt_cu.cuEventElapsedTime(&est, ev[0], ev[1]);
	int batch = est > 2.0f ? 1 : BATCH_MAX;
	/* CUPTI records from here on: the warm-up is not a sample */
	cupti = w->cupti && w->entry != NULL && kopt_cupti_timer_begin(w->entry) == 0;

	int n = 0;
	double clock_sum = 0.0;
	int clock_n = 0;
	double start = kopt_worker_now_ms();
	while (n < cap) {
		int b = batch < cap - n ? batch : cap - n;
		memset(w->stamps, 0, 4 * sizeof *w->stamps);
		CUdeviceptr st0 = w->stamps_dev,
			    st1 = w->stamps_dev + 2 * sizeof(unsigned long long);
		void *stamp0[] = {&st0}, *stamp1[] = {&st1};
		unsigned sms = (unsigned)(2 * w->dev.sm_count);
		if ((r = kopt_bench_gate(w)) != CUDA_SUCCESS ||
		    (r = kopt_cu.cuLaunchKernel(w->stamp, sms, 1, 1, 32, 1, 1, 0, w->stream, stamp0,
						NULL)) != CUDA_SUCCESS) {
			status = fail(w, r, "harness launch");
			goto out;
		}
		for (int i = 0; i < b; i++) {
			/* (nudged first: an in/out buffer is copied from the
			 * inputs the launch reads, as the rerun reference's is) */
			if ((r = nudge_inputs(w)) != CUDA_SUCCESS ||
			    (r = kopt_worker_before_launch(w)) != CUDA_SUCCESS ||
			    (r = kopt_worker_flush_l2(w)) != CUDA_SUCCESS ||
			    (r = kopt_cu.cuEventRecord(ev[2 * i], w->stream)) != CUDA_SUCCESS) {
				status = fail(w, r, "sample set-up");
				goto out;
			}
			if ((r = kopt_worker_launch(w, f, l, params)) != CUDA_SUCCESS ||
			    (r = kopt_worker_launch_rest(w)) != CUDA_SUCCESS) {
				kopt_bench_gate_open(w);
				status = fail(w, r, "launch");
				goto out;
			}
			if ((r = kopt_cu.cuEventRecord(ev[2 * i + 1], w->stream)) != CUDA_SUCCESS ||
			    (r = kopt_worker_samples_enqueue(w, n + i)) != CUDA_SUCCESS) {
				kopt_bench_gate_open(w);
				status = fail(w, r, "cuEventRecord");
				goto out;
			}
		}
		if ((r = kopt_cu.cuLaunchKernel(w->stamp, sms, 1, 1, 32, 1, 1, 0, w->stream, stamp1,
						NULL)) != CUDA_SUCCESS) {
			kopt_bench_gate_open(w);
			status = fail(w, r, "harness launch");
			goto out;
		}
		kopt_bench_gate_open(w);
		ws = kopt_worker_wait(w, w->stream, w->timeout_ms * b + 2000, &r);
		if (ws == 1) {
			snprintf(w->log, sizeof w->log, "kernel still running after %lld ms",
				 (long long)(w->timeout_ms * b));
			status = "timeout";
			goto out;
		}
		if (ws != 0) {
			status = fail(w, r, "timed run");
			goto out;
		}
		if (*w->spin_timed_out) {
			/* the host was descheduled while queueing: redo the batch */
			if (cupti && kopt_cupti_timer_take(got, BATCH_MAX) < 0)
				cupti = 0;
			if ((kopt_worker_now_ms() - start) / 1e3 >= o->max_time_s)
				break;
			continue;
		}
		/* a batch whose CUPTI records are missing turns CUPTI off for the
		 * whole candidate: its samples then all come from events */
		if (cupti && kopt_cupti_timer_take(got, b) != b)
			cupti = 0;
		for (int i = 0; i < b; i++) {
			float ms = 0.0f;
			if ((r = kopt_cu.cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1])) !=
			    CUDA_SUCCESS) {
				status = fail(w, r, "cuEventElapsedTime");
				goto out;
			}
			ev_samples[n] = ms;
			samples[n] = cupti ? got[i] : ms;
			n++;
			t->gpu_s += ms / 1e3;
		}
		if (!cupti)
			memcpy(samples, ev_samples, (size_t)n * sizeof *samples);
		if (w->stamps[1] != 0 && w->stamps[3] > w->stamps[1]) {
			clock_sum += (double)(w->stamps[2] - w->stamps[0]) /
				     (double)(w->stamps[3] - w->stamps[1]) * 1e3;
			clock_n++;
		}
		if (n >= o->min_samples && t->gpu_s >= o->min_gpu_s) {
			summarise(samples, n, t);
			if (t->noise <= o->max_noise)
				break;
		}
		if ((kopt_worker_now_ms() - start) / 1e3 >= o->max_time_s && n >= 3) {
			/* Past the time cap, the samples the per-launch checks need
			 * (less exact when timed: 8) are still taken while they cost
			 * little at the median: one slow launch (a spin on the clock)
			 * ended sampling at 4, the median left it out, and a kernel
			 * in TF32 on every launch but each batch's last passed
			 * (tests/cheats/short_sampling). A kernel slow on every launch
			 * still stops at 3. */
			summarise(samples, n, t);
			if (n >= KOPT_CHECKED_SAMPLES ||
			    t->median_ms * (KOPT_CHECKED_SAMPLES - n) / 1e3 > o->max_time_s)
				break;
		}
	}
	struct timing ev_t;
	memset(&ev_t, 0, sizeof ev_t);
	summarise(ev_samples, n, &ev_t);
	summarise(samples, n, t);
	t->timer = cupti ? "cupti" : "events";
	t->events_median_ms = ev_t.median_ms;
	t->clock_mhz = clock_n > 0 ? clock_sum / clock_n : 0.0;
out:
	if (cupti)
		kopt_cupti_timer_end();
	for (int i = 0; i < nev; i++)
		kopt_cu.cuEventDestroy(ev[i]);
	free(samples);
	free(ev_samples);
	return status;
}
