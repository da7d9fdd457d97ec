/* Timing in the worker (bench.c): the stopping rule's options and what one
 * timed candidate measured. Floor "bench": included by run; includes data. */
#ifndef KOPT_WORKER_BENCH_H
#define KOPT_WORKER_BENCH_H

#include "worker/data.h"

struct timing_opts {
	int min_samples, max_samples;
	double max_time_s, max_noise, min_gpu_s;
};

struct timing {
	const char *timer;	 /* "cupti" or "events": which one gave the samples */
	double events_median_ms; /* the cross-check (equal to median_ms under "events") */
	int samples;
	double median_ms, p10_ms, p90_ms, mean_ms, stdev_ms, min_ms, noise;
	double clock_mhz; /* mean SM clock over the samples, 0 when unknown */
	double gpu_s;	  /* summed kernel time */
};

/* Times f with the launch and params given. Returns 0 with *t filled, or a
 * status string ("timeout", "crash", "launch_error") with w->log set. */
const char *kopt_bench_time(struct worker *w, CUfunction f, const struct launch *l, void **params,
			    const struct timing_opts *o, struct timing *t);

/* A gate on w->stream: a one-thread kernel that spins until the host opens
 * it (or two seconds pass), so the work queued behind it starts only once
 * all of it is queued: a host delay while queueing is not in the events'
 * time. The timed samples use it; so does a check's one timed launch. */
CUresult kopt_bench_gate(struct worker *w);
void kopt_bench_gate_open(struct worker *w);

#endif
