/* The worker's guard bands (part of data.c's module, data.h): every buffer a
 * candidate can reach sits between two guard regions armed with a word that
 * changes every run and scanned on the device after the kernel ran (with
 * kopt_worker_scan_runs, also used for module variables and the reference's
 * idle buffers); and the timing copy of an input set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/data.h"

static size_t guarded_size(size_t bytes)
{
	size_t data = (bytes + 3) & ~(size_t)3;
	size_t total = KOPT_GUARD_FRONT + data + KOPT_GUARD_BACK_MIN;
	return (total + KOPT_GUARD_GRANULE - 1) / KOPT_GUARD_GRANULE * KOPT_GUARD_GRANULE;
}

static int bandless;

void kopt_worker_set_bandless(void)
{
	bandless = 1;
}

CUresult kopt_worker_alloc_guarded(CUdeviceptr *data, size_t bytes)
{
	if (bandless) { /* whole words: kopt's own kernels read them so */
		CUresult r = kopt_cu.cuMemAlloc(data, bytes ? (bytes + 3) & ~(size_t)3 : 4);
		if (r != CUDA_SUCCESS)
			*data = 0;
		return r;
	}
	CUdeviceptr base;
	CUresult r = kopt_cu.cuMemAlloc(&base, guarded_size(bytes));
	*data = r == CUDA_SUCCESS ? base + KOPT_GUARD_FRONT : 0;
	return r;
}

void kopt_worker_free_guarded(CUdeviceptr data)
{
	if (data != 0)
		kopt_cu.cuMemFree(bandless ? data : data - KOPT_GUARD_FRONT);
}

CUresult kopt_worker_scan_runs(struct worker *w, struct scan *runs, int n,
			       unsigned long long *found)
{
	CUresult r = kopt_cu.cuMemsetD8Async(w->guard_dev, 0, 16 * (size_t)n, w->stream);
	for (int i = 0; r == CUDA_SUCCESS && i < n; i++) {
		CUdeviceptr out = w->guard_dev + 16 * (CUdeviceptr)i;
		void *params[] = {&runs[i].ptr, &runs[i].words, &runs[i].word, &out};
		r = kopt_cu.cuLaunchKernel(w->guard_scan, (unsigned)(2 * w->dev.sm_count), 1, 1, 256,
					   1, 1, 0, w->stream, params, NULL);
	}
	if (r == CUDA_SUCCESS && kopt_worker_wait(w, w->stream, 60000, &r) != 0 && r == CUDA_SUCCESS)
		r = CUDA_ERROR_LAUNCH_TIMEOUT;
	if (r == CUDA_SUCCESS && n > 0)
		r = kopt_worker_download(w, found, w->guard_dev, 16 * (size_t)n);
	return r;
}

/* The buffers a candidate reaches with set s: (pointer, bytes, name). */
struct reach {
	CUdeviceptr ptr;
	size_t bytes;
	const char *name;
};

static int reachable(const struct worker *w, const struct inputset *s, struct reach *out)
{
	int n = 0;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_ARRAY)
			continue;
		CUdeviceptr p = a->output ? w->out_dev[i] : s->dev[i];
		if (p == 0)
			continue;
		out[n].ptr = p;
		out[n].bytes = kopt_worker_arg_bytes(a);
		out[n].name = a->name;
		n++;
	}
	return n;
}

CUresult kopt_worker_guard_arm(struct worker *w, const struct inputset *s)
{
	struct reach b[256];
	int n = w->check_guards ? reachable(w, s, b) : 0;
	w->guard_word = (uint32_t)(w->nonce++ * 0x9e3779b97f4a7c15ull >> 32) | 1u;
	CUresult r = CUDA_SUCCESS;
	for (int i = 0; r == CUDA_SUCCESS && i < n; i++) {
		size_t back = guarded_size(b[i].bytes) - KOPT_GUARD_FRONT - b[i].bytes;
		r = kopt_cu.cuMemsetD32Async(b[i].ptr - KOPT_GUARD_FRONT, w->guard_word,
					     KOPT_GUARD_FRONT / 4, w->stream);
		if (r == CUDA_SUCCESS)
			r = kopt_cu.cuMemsetD32Async(b[i].ptr + b[i].bytes, w->guard_word, back / 4,
						     w->stream);
	}
	return r;
}

/* The reference's own output buffers lie idle, wiped to zero, whenever a
 * candidate runs: one that wrote into them (state kept where no check of
 * its own buffers looks, a memo of answers) is wrong. */
static const char *check_idle_reference(struct worker *w, const char *what)
{
	struct scan runs[256];
	unsigned long long found[2 * 256];
	int idx[256], n = 0;
	for (int i = 0; i < w->nargs && n < 256; i++) {
		const struct warg *a = &w->args[i];
		if (!kopt_worker_is_output(a) || w->ref_dev == NULL || w->ref_dev[i] == 0)
			continue;
		runs[n] = (struct scan){w->ref_dev[i], kopt_worker_arg_bytes(a) / 4, 0u};
		idx[n++] = i;
	}
	CUresult r = kopt_worker_scan_runs(w, runs, n, found);
	if (kopt_worker_cu_check(r, "checking the reference's idle buffers", w->log, sizeof w->log))
		return "crash";
	for (int k = 0; k < n; k++)
		if (found[2 * k] != 0 || found[2 * k + 1] != 0) {
			snprintf(w->log, sizeof w->log,
				 "%s: the kernel wrote into kopt's buffer for the reference's '%s' (not "
				 "one of its own)",
				 what, w->args[idx[k]].name);
			return "wrong";
		}
	return NULL;
}

const char *kopt_worker_guard_check(struct worker *w, const struct inputset *s, const char *what)
{
	struct reach b[256];
	int n = reachable(w, s, b);
	unsigned long long found[2 * 256 * 2];
	struct scan runs[2 * 256];
	if (!w->check_guards)
		return NULL;
	const char *idle = check_idle_reference(w, what);
	if (idle != NULL)
		return idle;
	for (int i = 0; i < n; i++) { /* the front guard, then the back one */
		size_t back = guarded_size(b[i].bytes) - KOPT_GUARD_FRONT - b[i].bytes;
		runs[2 * i] = (struct scan){b[i].ptr - KOPT_GUARD_FRONT, KOPT_GUARD_FRONT / 4,
					    w->guard_word};
		runs[2 * i + 1] = (struct scan){b[i].ptr + b[i].bytes, back / 4, w->guard_word};
	}
	CUresult r = kopt_worker_scan_runs(w, runs, 2 * n, found);
	if (kopt_worker_cu_check(r, "checking the guard bands", w->log, sizeof w->log))
		return "crash";
	for (int i = 0; i < n; i++) {
		/* front: found[0] = furthest distance before the start, in words;
		 * back: found[3] = furthest word past the end, plus one */
		unsigned long long before = found[4 * i], after = found[4 * i + 3];
		if (before == 0 && after == 0)
			continue;
		if (after > 0)
			snprintf(w->log, sizeof w->log,
				 "%s: the kernel wrote outside its buffers: up to %llu bytes past "
				 "the end of '%s'",
				 what, after * 4, b[i].name);
		else
			snprintf(w->log, sizeof w->log,
				 "%s: the kernel wrote outside its buffers: up to %llu bytes before "
				 "the start of '%s'",
				 what, before * 4, b[i].name);
		return "wrong";
	}
	return NULL;
}

int kopt_worker_scratch_view(struct worker *w, const struct inputset *s, struct inputset *view)
{
	*view = *s;
	view->dev = w->scratch_dev;
	for (int i = 0; i < w->nargs; i++) {
		const struct warg *a = &w->args[i];
		if (a->kind != ARG_ARRAY || a->output)
			continue;
		if (kopt_worker_cu_check(kopt_cu.cuMemcpyDtoDAsync(w->scratch_dev[i], s->dev[i],
								   kopt_worker_arg_bytes(a),
								   w->stream),
					 "copying the inputs for timing", w->log, sizeof w->log))
			return -1;
	}
	return 0;
}

