/* Hardware counters for a "run" request that asks for them (profile=1), in
 * the GPU worker, after the candidate's timing: CUPTI range profiling, one
 * launch per pass, each from a cold L2 (cupti_prof.h). Request fields:
 *   profile          1 to collect
 *   profile_metrics  metric names separated by commas (default: the
 *                    default set; with profile_matrix=1 also the tensor pipe)
 * Reply fields: "m.<metric name>" (f64) per value, profile_passes,
 * profile_s (wall time of the collection), or profile_error (one sentence;
 * the candidate's result is unaffected). */
#ifndef KOPT_WORKER_PROFILE_H
#define KOPT_WORKER_PROFILE_H

#include "wire.h"
#include "worker/data.h"
#include "worker/request.h"

/* Profiles one launch of f with params on w->stream. Returns NULL, or
 * "crash" / "timeout" when the kernel itself failed (w->log set); counters
 * or profile_error are put into reply. */
const char *kopt_worker_profile(struct worker *w, CUfunction f, const struct launch *l,
				void **params, const struct kopt_request *req,
				struct kopt_msg *reply);

#endif
