/* The fields of a "run" request, the one list both sides follow: the worker
 * decodes a request with it (request.c, once, into struct kopt_request) and
 * the Lua side checks every request it sends against it
 * (kopt.gpu.request_fields(), used by lua/kopt/backends/cuda.lua), so a
 * field added here and not sent, or sent and not listed, fails a test
 * (tests/lua/test_cuda_offline.lua).
 *
 *   X(name, type, need, default, doc)
 *
 * type: INT (i64), FLAG (i64; Lua may send a boolean), NUM (f64; an integer
 * is converted), BYTES (borrowed from the message, with name##_len), STR_<n>
 * (copied into char[n], truncated). need: REQ when cuda.lua always sends it,
 * OPT when the default applies when absent. The default is the value the
 * worker uses when the field is absent.
 *
 * Besides these, a request carries "op" (the loop's dispatch key) and, per
 * kernel argument i (1-based, up to nargs), the fields of
 * KOPT_REQUEST_ARG_FIELDS under the key "a<i>.<name>". */
#ifndef KOPT_WORKER_REQUEST_FIELDS_H
#define KOPT_WORKER_REQUEST_FIELDS_H

#define KOPT_REQUEST_FIELDS(X)                                                                  \
	X(id, INT, REQ, 0, "the caller's number for this candidate, echoed in the reply")      \
	X(cubin, BYTES, REQ, NULL, "the candidate's CUBIN")                                     \
	X(entry, STR_1024, REQ, "", "the kernel's (lowered) name")                               \
	X(state, STR_1024, REQ, "",                                                             \
	  "comma-separated module globals the kernel declares as state (reset before launches)") \
	X(seed, INT, REQ, 1, "input set A's seed (set B's is derived from it)")                 \
	X(time, FLAG, REQ, 1, "time the candidate (then check 2 runs on the timed module)")     \
	X(verify2, FLAG, REQ, 1, "the second correctness trial (other inputs, distribution)")  \
	X(timeout_ms, INT, REQ, 10000, "per-launch watchdog")                                   \
	X(nudge, FLAG, REQ, 1, "flip a low mantissa bit of a float input per timed sample")     \
	X(nargs, INT, REQ, 0, "kernel arguments that follow as a<i>.* fields")                  \
	X(grid_x, INT, REQ, 1, "candidate launch")                                              \
	X(grid_y, INT, REQ, 1, "candidate launch")                                              \
	X(grid_z, INT, REQ, 1, "candidate launch")                                              \
	X(block_x, INT, REQ, 1, "candidate launch")                                             \
	X(block_y, INT, REQ, 1, "candidate launch")                                             \
	X(block_z, INT, REQ, 1, "candidate launch")                                             \
	X(smem, INT, REQ, 0, "candidate launch: dynamic shared memory bytes")                   \
	X(cluster_x, INT, OPT, 1, "candidate launch: thread-block cluster (1,1,1: none)")        \
	X(cluster_y, INT, OPT, 1, "candidate launch: thread-block cluster")                      \
	X(cluster_z, INT, OPT, 1, "candidate launch: thread-block cluster")                      \
	X(cooperative, INT, OPT, 0, "candidate launch: 1 = cooperative (all blocks resident)")   \
	X(ref_grid_x, INT, REQ, 1, "reference launch")                                          \
	X(ref_grid_y, INT, REQ, 1, "reference launch")                                          \
	X(ref_grid_z, INT, REQ, 1, "reference launch")                                          \
	X(ref_block_x, INT, REQ, 1, "reference launch")                                         \
	X(ref_block_y, INT, REQ, 1, "reference launch")                                         \
	X(ref_block_z, INT, REQ, 1, "reference launch")                                         \
	X(ref_smem, INT, REQ, 0, "reference launch: dynamic shared memory bytes")               \
	X(tol_rel_l2, NUM, OPT, -1.0, "relative L2 tolerance (< 0: the output type's default)") \
	X(tol_max_abs, NUM, OPT, -1.0, "max-abs tolerance (< 0: none)")                         \
	X(min_samples, INT, REQ, 10, "timing: samples before the noise rule may stop")          \
	X(max_samples, INT, REQ, 200, "timing: most samples")                                   \
	X(max_time_s, NUM, REQ, 1.0, "timing: most wall time")                                  \
	X(max_noise, NUM, REQ, 0.005, "timing: relative noise to stop at")                      \
	X(min_gpu_s, NUM, OPT, 0.0, "timing: least summed kernel time")                         \
	X(profile, FLAG, OPT, 0, "hardware counters after timing (profile.h)")                  \
	X(profile_metrics, STR_8192, OPT, "", "metric names, comma-separated (empty: defaults)") \
	X(profile_matrix, FLAG, OPT, 0, "with the default metrics: also the tensor pipe")         \
	X(dump, STR_1024, OPT, "",                                                              \
	  "folder for host copies of the checks' inputs, outputs and reference outputs")     \
	X(args1, STR_256, OPT, "", "pipelines: the first kernel's arguments, 1-based (\"\": all)")  \
	X(ref_args, STR_256, OPT, "", "pipelines: the reference's arguments (\"\": all)")        \
	X(stages, STR_8192, OPT, "",                                                            \
	  "pipelines: the kernels after the first, ';'-separated "                              \
	  "entry:gx,gy,gz:bx,by,bz:smem:args (same module, launched in order, timed as one)")

/* Per kernel argument, under "a<i>.<name>"; read by data.c
 * (kopt_worker_setup_args). type: a dtype (numerics.h); kind: array, scalar
 * or constant; init: a distribution (numerics.h). */
#define KOPT_REQUEST_ARG_FIELDS(X)                                                \
	X(name, STR_128, REQ, "?", "the argument's name")                         \
	X(type, STR_64, REQ, "?", "element type")                                 \
	X(kind, STR_64, REQ, "array", "array, scalar or constant")                \
	X(count, INT, OPT, 1, "arrays: element count")                            \
	X(output, FLAG, OPT, 0, "arrays: written by the kernel")                  \
	X(init, STR_64, OPT, "normal", "arrays: input distribution")              \
	X(init_value, NUM, OPT, 0.0, "arrays: the distribution's parameter")      \
	X(scale, NUM, OPT, 1.0, "arrays: normal/uniform draws times this (range probe)") \
	X(scale_every, INT, OPT, 0, "arrays: the scale on one element in this many (0: all; -1: one)") \
	X(value, NUM, OPT, 0.0, "scalars: the value (integers exactly)")                  \
	X(copy, INT, OPT, 0, "outputs: 1-based input array it starts as a copy of (0: none)") \
	X(param, FLAG, OPT, 1, "passed to the kernel (0: only the source of a copy)")          \
	X(fixed, FLAG, OPT, 0, "arrays: a constant kept in check 2 (the kernel may rely on it)") \
	X(file, STR_1024, OPT, "", "arrays: file holding the elements (raw, little-endian)")  \
	X(file_offset, INT, OPT, 0, "arrays: byte offset of the elements in file")            \
	X(file_b, STR_1024, OPT, "", "arrays: the elements of set B (check 2), whole file; \"\": file's") \
	X(dims, STR_256, OPT, "", "outputs with a region: the shape, outermost first")        \
	X(region, STR_256, OPT, "", "outputs: the box compared, lo:hi per dimension")         \
	X(compare, FLAG, OPT, 1, "outputs: compared element-wise with the reference")          \
	X(of, INT, OPT, 0, "tensor maps: the 1-based array argument mapped")                   \
	X(tmap_dims, STR_256, OPT, "", "tensor maps: the array's shape, outermost first")      \
	X(box, STR_256, OPT, "", "tensor maps: the box one copy moves, outermost first")       \
	X(swizzle, INT, OPT, 0, "tensor maps: shared-memory swizzle span in bytes (0: none)")  \
	X(tol_rel_l2, NUM, OPT, -1.0, "outputs: relative L2 tolerance (< 0: the request's)")   \
	X(tol_max_abs, NUM, OPT, -1.0, "outputs: max-abs tolerance (< 0: the request's)")

#endif
