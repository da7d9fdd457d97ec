/* The main process's side of the GPU workers (spawn.c): one worker process
 * per GPU, started as `kopt --kopt-worker DEV IN OUT` (worker.h). Floor
 * "spawn": used by core/bind/gpu.c; includes only worker.h. */
#ifndef KOPT_WORKER_SPAWN_H
#define KOPT_WORKER_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* Main side: one worker process. */
struct kopt_workerproc {
	pid_t pid;
	int to_fd;   /* requests to the worker */
	int from_fd; /* replies from the worker */
	int device;
	int group; /* started under a wrapper, in a process group of its own */
};

/* Starts a worker for `device` (posix_spawn of /proc/self/exe). Does not wait
 * for its "ready" message. SIGPIPE is ignored from here on, so a write to a
 * dead worker fails with EPIPE instead of killing kopt. `wrap`, when not
 * NULL, is a NULL-terminated command (a program path and its options) that
 * runs the worker: `wrap... /path/to/kopt --kopt-worker DEV 3 4` (the
 * sanitizer; the worker's pipes stay fds 3 and 4). */
int kopt_workerproc_spawn(struct kopt_workerproc *w, int device, const char *const *wrap,
			  char *err, size_t errlen);

/* Ends the worker (SIGKILL unless it already exited), reaps it and closes the
 * pipes; describes how it ended ("exit code 3", "killed by signal 9") into
 * how. Idempotent. */
void kopt_workerproc_stop(struct kopt_workerproc *w, char *how, size_t howlen);
/* The same, but after closing the pipes it waits up to grace_ms for the
 * worker to exit on its own (a wrapper writes its report at exit) before
 * SIGKILL. */
void kopt_workerproc_stop_wait(struct kopt_workerproc *w, int grace_ms, char *how,
			       size_t howlen);

#endif
