#ifndef KOPT_CPOOL_H
#define KOPT_CPOOL_H
#include <stddef.h>

#include "compile/kopt_nvrtc.h"

/* A pool of compile worker processes. NVRTC scales better across processes
 * than across threads (16 processes did 11.3 matmul compiles/s on a 16-core
 * host, 16 threads 8.4/s), and a compiler crash or hang costs one worker,
 * not the run.
 *
 * The workers are forked (no exec) when the pool is made and whenever one has
 * to be replaced; each talks to the main process over its own socketpair in
 * frames of <u64 length><payload>: a job out (source, entry, arch, name, salt,
 * cache dir, options), a result back (a cached flag and kopt_nvrtc_result_pack
 * bytes). Results come back in completion order, so the caller can start on
 * the first finished candidate while others still compile.
 *
 * With a cache directory, submit answers hits at once without a worker, and
 * workers store what they compile. Make the pool before starting threads:
 * fork copies only the calling thread. */

struct kopt_cpool;

/* Starts n workers (n >= 1). cache_dir may be NULL (no cache); job_timeout_s
 * <= 0 means no per-job limit. Returns NULL with a message in err. Caller
 * frees with kopt_cpool_free. */
struct kopt_cpool *kopt_cpool_new(int n, const char *cache_dir, double job_timeout_s, char *err,
				  size_t errlen);

/* Queues a job (copied; the job's strings may go after the call). Returns its
 * id (> 0), or -1 with a message in err when memory ran out. */
long kopt_cpool_submit(struct kopt_cpool *p, const struct kopt_nvrtc_job *job, char *err,
		       size_t errlen);

/* Waits up to timeout_s (< 0: no limit) for any job to finish. Returns 1 with
 * *id, *res (release it) and *cached filled; 0 when nothing is pending or the
 * time ran out; -1 with a message in err when the pool itself failed. A job
 * whose worker died or ran past the job timeout comes back as a failed result
 * saying so, and the worker is replaced. */
int kopt_cpool_wait_any(struct kopt_cpool *p, double timeout_s, long *id,
			struct kopt_nvrtc_result *res, int *cached, char *err, size_t errlen);

/* Jobs submitted and not yet returned by wait_any. */
size_t kopt_cpool_pending(const struct kopt_cpool *p);

int kopt_cpool_size(const struct kopt_cpool *p);

/* Process id of worker i (0 <= i < size), or -1 when it is not running.
 * For tests that kill a worker on purpose. */
long kopt_cpool_worker_pid(const struct kopt_cpool *p, int i);

/* Kills and reaps the workers, drops pending jobs. NULL is fine. */
void kopt_cpool_free(struct kopt_cpool *p);

/* The worker loop on fd: read a job, compile, answer, until EOF. Exposed for
 * tests; the pool runs it in its forked children. */
void kopt_cpool_serve(int fd);

#endif
