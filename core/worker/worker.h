/* GPU worker processes: one per GPU, started by the main process, speaking
 * the framed protocol of wire.h over two pipes. A worker owns one CUDA
 * context; a sticky fault (illegal address, trap, misaligned access) or a
 * hung kernel ends the worker, never the main process.
 *
 * Requests (field "op"):
 *   ping                       -> {op="ready", device facts}
 *   set_ref  cubin, entry      -> {op="ok"} | {op="error", log}
 *   run      one evaluation    -> {op="result", status, ...}   (see worker.c)
 *   quit                       -> the worker exits
 * The worker announces itself with {op="ready", ...} once its context is up,
 * or {op="error", log} and exits when it cannot start. */
#ifndef KOPT_WORKER_H
#define KOPT_WORKER_H

#include <stddef.h>
#include <sys/types.h>

#define KOPT_WORKER_ARG "--kopt-worker"

/* Worker side. argv = {exe, "--kopt-worker", device, in_fd, out_fd}. Returns
 * the process exit code: 0 after "quit" or EOF, 3 after a sticky CUDA error or
 * a timeout, 1 when it could not start. */
int kopt_worker_main(int argc, char **argv);

/* Main side: one worker process. */
struct kopt_workerproc {
	pid_t pid;
	int to_fd;   /* requests to the worker */
	int from_fd; /* replies from the worker */
	int device;
};

/* Starts a worker for `device` (posix_spawn of /proc/self/exe). Does not wait
 * for its "ready" message. SIGPIPE is ignored from here on, so a write to a
 * dead worker fails with EPIPE instead of killing kopt. */
int kopt_workerproc_spawn(struct kopt_workerproc *w, int device, char *err, size_t errlen);

/* Ends the worker (SIGKILL unless it already exited), reaps it and closes the
 * pipes; describes how it ended ("exit code 3", "killed by signal 9") into
 * how. Idempotent. */
void kopt_workerproc_stop(struct kopt_workerproc *w, char *how, size_t howlen);

#endif
