/* One "run" request of the GPU worker (run.c): resources, check 1, timing,
 * check 2, counters. Floor "run": included by loop; includes bench, profile,
 * data, request and numerics. */
#ifndef KOPT_WORKER_RUN_H
#define KOPT_WORKER_RUN_H

#include "wire.h"
#include "worker/data.h"
#include "worker/request.h"

/* Evaluates the candidate of rq (its kernel arguments read from v, the
 * message rq was decoded from) and puts the reply's measured fields into m.
 * Returns the status: "ok", "invalid", "wrong", "launch_error", "error", or
 * "crash" / "timeout", after which the worker must end (w->hung, or a
 * sticky error); w->log says why when not "ok". */
const char *kopt_worker_run(struct worker *w, const struct kopt_request *rq,
			    const struct kopt_msgview *v, struct kopt_msg *m);

#endif
