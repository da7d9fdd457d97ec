/* The fields of the reply to a "run" request, the one list both sides
 * follow: the worker puts a reply field only through it (reply.h:
 * KOPT_REPLY_INT/NUM/STR name the field, checked at compile time), and the
 * Lua side reads a reply only through it (kopt.gpu.reply_fields(), used by
 * Cuda:result in lua/kopt/backends/cuda.lua: reading an unlisted field
 * raises), so a field put and not listed does not compile, and one read and
 * not listed fails tests/lua/test_cuda_offline.lua.
 *
 *   X(name, type, doc)
 *
 * type: INT (i64), NUM (f64), STR (a string). A field is present only when
 * its measurement happened (no number stands for one that did not); the doc
 * says who puts it. Besides these, KOPT_REPLY_PREFIXES lists the families of
 * fields named by a prefix and a name chosen at run time. */
#ifndef KOPT_WORKER_REPLY_FIELDS_H
#define KOPT_WORKER_REPLY_FIELDS_H

#define KOPT_REPLY_FIELDS(X)                                                                       \
	X(op, STR, "loop.c: \"result\"")                                                           \
	X(id, INT, "loop.c: the request's id")                                                     \
	X(status, STR, "loop.c: ok, invalid, wrong, launch_error, error, crash or timeout")        \
	X(log, STR, "loop.c: what went wrong (empty when nothing did)")                            \
	X(regs, INT, "run.c resources: registers per thread")                                      \
	X(smem_static, INT, "run.c resources: static shared memory bytes")                         \
	X(smem_dynamic, INT, "run.c resources: dynamic shared memory bytes of the launch")         \
	X(local_bytes, INT, "run.c resources: local memory bytes per thread")                      \
	X(const_bytes, INT, "run.c resources: constant memory bytes")                              \
	X(max_threads, INT, "run.c resources: most threads per block for this kernel")             \
	X(blocks_per_sm, INT, "run.c resources: resident blocks per multiprocessor")               \
	X(occupancy, NUM, "run.c resources: resident threads / the multiprocessor's most")         \
	X(scrub_ms, NUM, "loop.c: milliseconds clearing local and shared memory (every scrub)")     \
	X(ref_cached, INT, "run.c check 1: the reference output was already computed")             \
	X(err_rel_l2, NUM, "run.c check 1: relative L2 error")                                     \
	X(err_max_abs, NUM, "run.c check 1: largest absolute error")                               \
	X(err_unwritten, INT, "run.c check 1: output elements left unwritten")                     \
	X(err_nonfinite, INT, "run.c check 1: non-finite output elements")                         \
	X(t_check_s, NUM, "run.c: seconds from the request to the end of check 1")                 \
	X(time_ms, NUM, "run.c timing: median kernel time")                                        \
	X(p10_ms, NUM, "run.c timing: 10th percentile")                                            \
	X(p90_ms, NUM, "run.c timing: 90th percentile")                                            \
	X(mean_ms, NUM, "run.c timing: mean")                                                      \
	X(min_ms, NUM, "run.c timing: fastest sample")                                             \
	X(stdev_ms, NUM, "run.c timing: standard deviation")                                       \
	X(noise, NUM, "run.c timing: relative noise when sampling stopped")                        \
	X(samples, INT, "run.c timing: samples taken")                                             \
	X(clock_mhz, NUM, "run.c timing: SM clock while timing")                                   \
	X(timer, STR, "run.c timing: cupti or events")                                             \
	X(events_ms, NUM, "run.c timing: median by CUDA events (the cross-check)")                 \
	X(t_time_s, NUM, "run.c: seconds spent timing")                                            \
	X(check2_ms, NUM, "run.c check 2: its one launch's time, by events (after timing)")         \
	X(check3_ms, NUM, "run.c check 3: its one launch's time (only when check 2 was far slower)") \
	X(charged_check2, INT, "run.c: 1 when time_ms is check 3's (or 2's) launch, far slower")    \
	X(err2_rel_l2, NUM, "run.c check 2: relative L2 error")                                    \
	X(err2_max_abs, NUM, "run.c check 2: largest absolute error")                              \
	X(err2_unwritten, INT, "run.c check 2: output elements left unwritten")                    \
	X(err2_nonfinite, INT, "run.c check 2: non-finite output elements")                        \
	X(trivial, STR, "run.c: trivial outputs that pass both checks (\"y:zeros y:copy:x\")")    \
	X(profile_error, STR, "profile.c: why no counters came (CUPTI cannot work here)")          \
	X(profile_warning, STR, "profile.c: metrics left out (the others were collected)")         \
	X(profile_passes, INT, "profile.c: replay passes the counters took")                       \
	X(profile_s, NUM, "profile.c: seconds spent collecting counters")                          \
	X(t_total_s, NUM, "run.c: seconds from the request to the reply")

/* Families: X(name, prefix, type, doc); a field is prefix .. a name. */
#define KOPT_REPLY_PREFIXES(X)                                                                     \
	X(metric, "m.", NUM, "profile.c: a counter's value, by its CUPTI metric name")

#endif
