/* Hardware counters of one kernel launch with CUPTI (CUDA 13 Host + Range
 * Profiler APIs, auto-range, user replay).
 *
 * libcupti.so.13 is loaded at run time: kopt starts and runs without it, and
 * everything here then reports "unavailable" with the reason (missing
 * library, unsupported device, counters restricted to administrators by the
 * driver, another profiler attached, ...). Nothing here crashes or exits.
 *
 * Use inside the process that owns the CUDA context (the GPU worker), after
 * the candidate's timing is finished — never inside a timing window: the
 * kernel runs once per pass.
 *
 * Replay is the caller's (CUPTI user replay), not CUPTI's kernel replay:
 * kernel replay restores the memory the kernel writes before every pass but
 * the first, and those copies leave the L2 full of dirty lines that the
 * profiled pass then writes back and counts as its own DRAM writes. With the
 * passes in the caller's hands, each one can start from the same cold L2, as
 * under Nsight Compute's --cache-control all. No memory is restored between
 * passes: the kernel must compute the same outputs from unchanged inputs
 * each time (kopt's candidates have passed a correctness trial that checks
 * exactly that).
 *
 *   kopt_cupti_load(err)                         once; cheap to repeat
 *   kopt_cupti_probe(ctx, dev, ordinal, &p, err) once per context
 *   kopt_cupti_session_begin(ctx, names, n, &s, err)
 *   do {
 *       ... prepare the pass (clear the L2) ...
 *       kopt_cupti_pass_begin(s, err)
 *       ... launch exactly one kernel and synchronize its stream ...
 *       kopt_cupti_pass_end(s, &done, err)
 *   } while (!done);
 *   kopt_cupti_session_end(s, values, err)       values[i] for names[i]
 * or kopt_cupti_profile(), which does all of it with a launch callback.
 *
 * Not thread-safe: one profiling client per process (CUPTI allows one
 * profiler per device anyway). The C++ implementation lives in cupti_prof.cc
 * and cupti_session.cc because cupti_profiler_host.h cannot be compiled as
 * C. */
#ifndef KOPT_CUPTI_PROF_H
#define KOPT_CUPTI_PROF_H

#include <stddef.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The default metric set (names as Nsight Compute spells them), NULL-ended.
 * The tensor-pipe metric is last so callers can drop it for non-matrix
 * kernels: KOPT_CUPTI_DEFAULT_BASE is the count without it. */
extern const char *const kopt_cupti_default_metrics[];
#define KOPT_CUPTI_DEFAULT_BASE 10
#define KOPT_CUPTI_MAX_METRICS 64

/* Loads libcupti.so.13 (or $KOPT_CUPTI_LIB; "none" disables profiling), and
 * resolves the entry points. Idempotent: a failure is remembered and repeated
 * with the same sentence. Returns 0, or -1 with the reason in err. */
int kopt_cupti_load(char *err, size_t errlen);

/* What the probe learned. */
struct kopt_cupti_info {
	char chip[64];		 /* "GH100" */
	int max_metrics_per_pass; /* 0 when unknown */
};

/* Checks that range profiling works on `dev` (ordinal `ordinal`) with `ctx`
 * current: cuptiProfilerDeviceSupported, chip name, counter availability
 * (fails when counters are restricted or another profiler is active).
 * Initializes the profiler for this context; calling it again with the same
 * context is free. Returns 0, or -1 with one sentence in err. */
int kopt_cupti_probe(CUcontext ctx, CUdevice dev, int ordinal, struct kopt_cupti_info *out,
		     char *err, size_t errlen);

/* Number of replay passes `names` need (from the cached config image). */
int kopt_cupti_num_passes(const char *const *names, size_t n, int *passes, char *err,
			  size_t errlen);

/* Marks which of names the chip accepts, each checked on its own: ok[i] = 1
 * or 0. Returns the number accepted, or -1 with err (probe missing, CUPTI
 * failure). Lets a caller drop a misspelled name and keep the others. */
int kopt_cupti_check_metrics(const char *const *names, size_t n, int *ok, char *err,
			     size_t errlen);

struct kopt_cupti_session;

/* Enables the range profiler on ctx for the metric set `names` (n at most
 * KOPT_CUPTI_MAX_METRICS; the configuration is cached per set) for an
 * auto-range, user-replay collection: the caller then runs the passes (each
 * one pass_begin, exactly one kernel launch, a synchronize, pass_end) and
 * calls kopt_cupti_session_end, which frees the session in every case. An
 * unknown metric name fails here, naming it. Requires a successful
 * kopt_cupti_probe for ctx. */
int kopt_cupti_session_begin(CUcontext ctx, const char *const *names, size_t n,
			     struct kopt_cupti_session **out, char *err, size_t errlen);

/* Opens the next pass: kernels launched from here to kopt_cupti_pass_end are
 * counted. Returns 0, or -1 with err. */
int kopt_cupti_pass_begin(struct kopt_cupti_session *s, char *err, size_t errlen);

/* Closes the pass; *done = 1 once every pass the metric set needs has run.
 * Returns 0, or -1 with err (a failed stop, or more passes than the set
 * needs without CUPTI calling it complete). */
int kopt_cupti_pass_end(struct kopt_cupti_session *s, int *done, char *err, size_t errlen);

/* Stops, decodes and evaluates: values[i] (caller-provided, n doubles) for
 * names[i]. passes receives the number of passes (may be NULL). Frees s. */
int kopt_cupti_session_end(struct kopt_cupti_session *s, double *values, int *passes, char *err,
			   size_t errlen);

/* Launch callback for kopt_cupti_profile, called once per pass: launch one
 * kernel, synchronize, return 0 or -1 with a message. */
typedef int (*kopt_cupti_launch_fn)(void *ud, char *err, size_t errlen);

/* session_begin, one pass_begin + launch(ud) + pass_end per pass,
 * session_end. */
int kopt_cupti_profile(CUcontext ctx, const char *const *names, size_t n,
		       kopt_cupti_launch_fn launch, void *ud, double *values, int *passes, char *err,
		       size_t errlen);

/* A CUPTI result code as a sentence: the privilege error explains the
 * driver's admin-only profiling setting (NVreg_RestrictProfilingToAdminUsers),
 * the environment errors (vGPU, MIG, another profiler attached, ...) say what
 * blocks profiling. Works without the library. Returns buf. */
const char *kopt_cupti_strerror(int code, char *buf, size_t len);

/* Releases cached configurations and deinitializes the profiler. The library
 * stays loaded. */
void kopt_cupti_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
