/* The comparisons of one run request (run_compare.c), and the launch they
 * share with run.c. Floor "run" (beside run.h): included by run; includes
 * data and numerics. */
#ifndef KOPT_WORKER_RUN_COMPARE_H
#define KOPT_WORKER_RUN_COMPARE_H

#include "worker/data.h"
#include "worker/request.h"

/* What a correctness trial compared, for the reply's check fields. */
struct trial_out {
	int compared; /* the outputs were compared: the numbers below are measured */
	double rel_l2, max_abs;
	size_t unwritten, nonfinite;
};

/* Compares the inputs on the device with their pristine copy (by hash, on
 * the device); restores them when they changed. Returns the number of
 * modified arguments (-1 on error), the first one's name in which. */
int kopt_worker_check_inputs(struct worker *w, struct inputset *s, char *which, size_t whichlen);

/* Launches f once and waits. Returns NULL on success or a status. With ms,
 * the launch is bracketed by events and *ms gets its time (-1 when the
 * events failed). With rest, a pipeline's later kernels run after it. */
const char *kopt_worker_launch_and_wait(struct worker *w, CUfunction f, const struct launch *l,
					void **params, const char *who, int rest, float *ms);

/* Reads the outputs and compares them with the set's reference outputs,
 * running the reference first when the set has none yet; the inputs must
 * be unchanged. Returns NULL when correct, "wrong" with w->log, or another
 * status. */
const char *kopt_worker_compare_outputs(struct worker *w, struct inputset *s, const struct job *j,
					const char *what, struct trial_out *to);

/* The output of the last timed launch, still in the candidate's buffers,
 * against the reference on the very inputs that launch read (set A's
 * timing copy ta, with the words the last nudge_slots nudges flipped). */
const char *kopt_worker_check_timed_output(struct worker *w, const struct inputset *ta,
					   const struct job *j, int nudge_slots, struct trial_out *to);

#endif
