/* Kernel durations from CUPTI activity records (CONCURRENT_KERNEL): GPU start
 * and end timestamps of each launch, without the launch gap and event
 * overhead that per-launch CUDA events carry for kernels of a few
 * microseconds. The worker's timer of choice when libcupti.so.13 loads;
 * events stay as the cross-check and the fallback (bench.c).
 *
 * Use from one thread (the worker's):
 *   kopt_cupti_timer_open() once; then per timed candidate
 *   kopt_cupti_timer_begin(name) ... launches, stream synchronised ...
 *   kopt_cupti_timer_take(out, max) after each batch, and
 *   kopt_cupti_timer_end() (tracing off, so other CUPTI users are undisturbed). */
#ifndef KOPT_CUPTI_TIMER_H
#define KOPT_CUPTI_TIMER_H

#include <stddef.h>

/* Loads libcupti (through kopt_cupti_load's search) and registers the
 * activity buffers. 0 on success, -1 with one sentence in err. Idempotent. */
int kopt_cupti_timer_open(char *err, size_t errlen);

/* Starts recording launches of the kernel named `name` (the lowered name the
 * module exports). Returns -1 when tracing cannot be enabled. */
int kopt_cupti_timer_begin(const char *name);

/* Flushes the records and moves the durations (ms) of the named kernel's
 * launches since the last take, in launch order, into out (at most max).
 * Returns their number, or -1 on a CUPTI error. */
int kopt_cupti_timer_take(double *out, int max);

void kopt_cupti_timer_end(void);

#endif
