/* Byte strings between the ranks of an MPI job (Open MPI), for kopt's
 * distributed evaluation (docs/MPI.md). A thin layer: rank 0 and the serving
 * ranks exchange wire.h payloads; what they mean is Lua's business
 * (lua/kopt/backends/mpi.lua).
 *
 * Built without MPI (no KOPT_HAVE_MPI), built() is 0 and init() fails with
 * one sentence. */
#ifndef KOPT_MPI_H
#define KOPT_MPI_H

#include <stddef.h>

/* 1 when this kopt was built with MPI. */
int kopt_mpi_built(void);

/* 1 when an MPI launcher started this process (mpirun, mpiexec, srun with
 * PMIx or PMI-2), told by the environment; KOPT_MPI=0 says no, KOPT_MPI=1
 * yes. Nothing is initialised. Also 1 in a kopt built without MPI, so that
 * kopt_mpi_init says so rather than every rank running the search alone. */
int kopt_mpi_launched(void);

/* MPI_Init (once) and this process's place. Errors on the world
 * communicator return instead of aborting the job, so a send to a lost rank
 * is a status. MPI_Init waits for every rank of the job: one killed before
 * it got there (under mpirun --enable-recovery) kept the others waiting
 * for ever, so after init_timeout_s seconds (0: no bound) the process says
 * so on stderr and exits 1. Returns 0, or -1 with the reason in err. */
int kopt_mpi_init(int *rank, int *size, double init_timeout_s, char *err, size_t errlen);

/* Sends len bytes to rank dest without waiting for it to receive them: the
 * bytes are copied and kept until the send completes (a send to a rank that
 * died never completes; its copy stays until kopt_mpi_finalize). Returns 0,
 * or -1 with the reason in err. */
int kopt_mpi_send(int dest, const void *buf, size_t len, char *err, size_t errlen);

/* Waits up to timeout_ms (< 0: forever) for a message from any rank. Returns
 * 0 with *buf (malloc'ed, caller frees), *len and *src set; 1 on timeout;
 * -1 on an error (err). Out-parameters are cleared on entry. */
int kopt_mpi_recv(int *src, unsigned char **buf, size_t *len, int timeout_ms, char *err,
		  size_t errlen);

/* Sends still in flight (not yet received by their rank). */
size_t kopt_mpi_pending(void);

/* The orderly end: waits for the sends in flight, then MPI_Finalize. Every
 * rank must take part, so it is called only when none was lost. */
void kopt_mpi_finalize(void);

/* Ends the whole job with exit code `code` (MPI_Abort): the end of a run
 * that lost a rank, which MPI_Finalize would wait for forever. */
void kopt_mpi_abort(int code);

#endif
