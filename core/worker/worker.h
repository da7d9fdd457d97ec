/* GPU worker processes: one per GPU, started by the main process, speaking
 * the framed protocol of wire.h over two pipes. A worker owns one CUDA
 * context; a sticky fault (illegal address, trap, misaligned access) or a
 * hung kernel ends the worker, never the main process.
 *
 * Requests (field "op"):
 *   ping                       -> {op="ready", device facts}
 *   set_ref  cubin, entry      -> {op="ok"} | {op="error", log}
 *   run      one evaluation    -> {op="result", status, ...}   (run.c;
 *            its fields: request_fields.h)
 *   quit                       -> the worker exits
 * The worker announces itself with {op="ready", ...} once its context is up,
 * or {op="error", log} and exits when it cannot start.
 *
 * The worker side is loop.c (kopt_worker_main); the main side, spawning and
 * stopping workers, is spawn.h. */
#ifndef KOPT_WORKER_H
#define KOPT_WORKER_H

#define KOPT_WORKER_ARG "--kopt-worker"
/* the worker's last argument under a wrapper (the sanitizer): buffers
 * without guard bands (kopt_worker_set_bandless) */
#define KOPT_WORKER_BANDLESS "bandless"

/* Worker side. argv = {exe, "--kopt-worker", device, in_fd, out_fd}. Returns
 * the process exit code: 0 after "quit" or EOF, 3 after a sticky CUDA error or
 * a timeout, 1 when it could not start. */
int kopt_worker_main(int argc, char **argv);

#endif
