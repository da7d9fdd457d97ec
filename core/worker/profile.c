/* CUPTI counters inside the GPU worker (profile.h). Profiling
 * problems are data: they travel as profile_error and never change the
 * candidate's status; only a kernel that crashes or hangs under the profiler
 * does, exactly as it would have without it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu/cupti_prof.h"
#include "worker/profile_evict_ptx.h"
#include "worker/profile.h"
#include "worker/reply.h"

/* The probe runs once per worker; its failure is remembered. */
static int probed;
static char probe_err[700];

/* The L2 eviction kernel and its never-written buffer (profile_evict.cu):
 * 0 not tried, 1 ready, -1 unavailable (then the memset flush is used). */
static int evict_state;
static CUmodule evict_mod;
static CUfunction evict_fn;
static CUdeviceptr evict_buf;
static unsigned long long evict_n;

/* Leaves the L2 without dirty lines and without the kernel's data, so the
 * profiled launch starts as cold as under Nsight Compute's cache control.
 * A memset flush alone would fill the L2 with dirty lines that the kernel
 * then evicts, counting their write-back as its own DRAM writes. Returns 0;
 * 1 when it could not (profiling is skipped); -1 after a sticky error or a
 * hang (the context is lost; w->log set). */
static int cold_l2(struct worker *w)
{
	if (evict_state == 0) {
		evict_state = -1;
		size_t bytes = ((size_t)w->dev.l2_bytes * 2) & ~(size_t)15;
		if (bytes >= 16 &&
		    kopt_cu.cuModuleLoadData(&evict_mod, kopt_profile_evict_ptx) == CUDA_SUCCESS) {
			if (kopt_cu.cuModuleGetFunction(&evict_fn, evict_mod, "kopt_l2_evict") ==
				    CUDA_SUCCESS &&
			    kopt_cu.cuMemAlloc(&evict_buf, bytes + 16) == CUDA_SUCCESS) {
				evict_n = bytes / 16;
				evict_state = 1;
			} else {
				kopt_cu.cuModuleUnload(evict_mod);
			}
		}
	}
	CUresult r = CUDA_SUCCESS;
	if (evict_state == 1) {
		CUdeviceptr sink = evict_buf + evict_n * 16;
		void *params[] = {&evict_buf, &evict_n, &sink};
		unsigned blocks = (unsigned)(w->dev.sm_count > 0 ? w->dev.sm_count : 1) * 4;
		r = kopt_cu.cuLaunchKernel(evict_fn, blocks, 1, 1, 256, 1, 1, 0, w->stream, params, NULL);
	} else if (w->flush_bytes >= 4) {
		r = kopt_worker_flush_l2(w);
	}
	int ws = r == CUDA_SUCCESS ? kopt_worker_wait(w, w->stream, w->timeout_ms, &r) : 2;
	if (ws == 0)
		return 0;
	char buf[256];
	snprintf(w->log, sizeof w->log, "clearing the L2 before profiling: %s",
		 ws == 1 ? "timed out" : kopt_cuda_strerror(r, buf, sizeof buf));
	return ws == 1 || kopt_cuda_error_is_sticky(r) ? -1 : 1;
}

static size_t split_names(char *list, const char **names, size_t cap)
{
	size_t n = 0;
	for (char *tok = strtok(list, ","); tok != NULL && n < cap; tok = strtok(NULL, ",")) {
		while (*tok == ' ')
			tok++;
		if (*tok != '\0')
			names[n++] = tok;
	}
	return n;
}

const char *kopt_worker_profile(struct worker *w, CUfunction f, const struct launch *l,
				void **params, const struct kopt_request *req,
				struct kopt_msg *reply)
{
	char err[700] = "";
	const char *names[KOPT_CUPTI_MAX_METRICS];
	double values[KOPT_CUPTI_MAX_METRICS];
	char list[8192];
	_Static_assert(sizeof list == sizeof req->profile_metrics, "profile_metrics");
	memcpy(list, req->profile_metrics, sizeof list); /* split_names cuts it up */
	size_t n = 0;
	if (list[0] != '\0') {
		n = split_names(list, names, KOPT_CUPTI_MAX_METRICS);
	} else {
		int matrix = (int)req->profile_matrix;
		for (size_t i = 0; kopt_cupti_default_metrics[i] != NULL; i++)
			if (matrix || i < KOPT_CUPTI_DEFAULT_BASE)
				names[n++] = kopt_cupti_default_metrics[i];
	}
	if (!probed) {
		struct kopt_cupti_info info;
		probed = kopt_cupti_probe(w->ctx, w->cudev, w->dev.index, &info, probe_err,
					  sizeof probe_err) == 0 ? 1 : -1;
	}
	if (probed < 0) {
		KOPT_REPLY_STR(reply, profile_error, probe_err);
		return NULL;
	}

	/* loads the eviction kernel (first time) before the profiler is on */
	int cold = cold_l2(w);
	if (cold < 0)
		return "crash";
	if (cold > 0) {
		KOPT_REPLY_STR(reply, profile_error, w->log);
		w->log[0] = '\0';
		return NULL;
	}
	double t0 = kopt_worker_now_ms();
	struct kopt_cupti_session *s = NULL;
	if (kopt_cupti_session_begin(w->ctx, names, n, &s, err, sizeof err) != 0) {
		/* a misspelled name costs only itself: retry with the accepted ones */
		int ok[KOPT_CUPTI_MAX_METRICS];
		char cerr[256];
		if (strstr(err, "unknown metric") == NULL ||
		    kopt_cupti_check_metrics(names, n, ok, cerr, sizeof cerr) <= 0) {
			KOPT_REPLY_STR(reply, profile_error, err);
			return NULL;
		}
		KOPT_REPLY_STR(reply, profile_warning, err);
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (ok[i])
				names[k++] = names[i];
		n = k;
		if (kopt_cupti_session_begin(w->ctx, names, n, &s, err, sizeof err) != 0) {
			KOPT_REPLY_STR(reply, profile_error, err);
			return NULL;
		}
	}
	/* One pass after another (user replay, cupti_prof.h), each from a cold
	 * L2: nothing is written between the eviction and the profiled launch. */
	const char *status = NULL;
	char buf[256];
	CUresult r = CUDA_SUCCESS;
	int done = 0, pass_failed = 0;
	while (!done && status == NULL && r == CUDA_SUCCESS && !pass_failed) {
		cold = cold_l2(w);
		if (cold != 0) {
			status = cold < 0 ? "crash" : NULL;
			r = CUDA_ERROR_UNKNOWN; /* w->log says why */
			break;
		}
		if (kopt_cupti_pass_begin(s, err, sizeof err) != 0) {
			pass_failed = 1;
			break;
		}
		r = kopt_worker_launch(w, f, l, params);
		if (r != CUDA_SUCCESS) {
			snprintf(w->log, sizeof w->log, "kernel launch under the profiler: %s",
				 kopt_cuda_strerror(r, buf, sizeof buf));
			status = kopt_cuda_error_is_sticky(r) ? "crash" : NULL;
		} else {
			int ws = kopt_worker_wait(w, w->stream, w->timeout_ms * 2, &r);
			if (ws == 1) {
				snprintf(w->log, sizeof w->log,
					 "kernel still running under the profiler after %lld ms",
					 (long long)(w->timeout_ms * 2));
				status = "timeout";
			} else if (ws != 0) {
				snprintf(w->log, sizeof w->log, "kernel under the profiler: %s",
					 kopt_cuda_strerror(r, buf, sizeof buf));
				status = "crash";
			}
		}
		if (kopt_cupti_pass_end(s, &done, err, sizeof err) != 0)
			pass_failed = 1;
	}
	int passes = 0;
	char end_err[700] = "";
	int rc = kopt_cupti_session_end(s, values, &passes, end_err, sizeof end_err);
	if (status != NULL)
		return status;
	if (r != CUDA_SUCCESS) {
		KOPT_REPLY_STR(reply, profile_error, w->log);
		w->log[0] = '\0';
		return NULL;
	}
	if (pass_failed || rc != 0) {
		KOPT_REPLY_STR(reply, profile_error, pass_failed ? err : end_err);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (isnan(values[i]))
			continue;
		kopt_reply_put_metric(reply, names[i], values[i]);
	}
	KOPT_REPLY_INT(reply, profile_passes, passes);
	KOPT_REPLY_NUM(reply, profile_s, (kopt_worker_now_ms() - t0) / 1e3);
	return NULL;
}
