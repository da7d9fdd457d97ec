/* Byte strings between MPI ranks; see mpi.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "mpi.h"

static int env_set(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0';
}

int kopt_mpi_launched(void)
{
	const char *force = getenv("KOPT_MPI");
	if (force != NULL && force[0] != '\0') {
		/* the words kopt takes for "off" elsewhere (KOPT_DB=off) are off here
		 * too; anything else forces MPI on */
		static const char *const off[] = {"0", "off", "no", "false"};
		for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
			if (strcasecmp(force, off[i]) == 0)
				return 0;
		return 1;
	}
	/* Open MPI's mpirun, then PMIx (srun --mpi=pmix, prterun), then PMI-2 */
	return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_RANK");
}

#ifdef KOPT_HAVE_MPI

#include <mpi.h>

/* A send in flight: its request and its own copy of the bytes. */
struct pending {
	MPI_Request req;
	unsigned char *buf;
	struct pending *next;
};

static struct pending *in_flight;
static int initialised, finalised;
static int message_tag = 7;

int kopt_mpi_built(void)
{
	return 1;
}

static void mpi_message(int rc, const char *what, char *err, size_t errlen)
{
	char text[MPI_MAX_ERROR_STRING] = "";
	int n = 0;
	MPI_Error_string(rc, text, &n);
	snprintf(err, errlen, "%s: %s", what, text);
}

/* The watch over MPI_Init: a thread that ends the process unless the
 * init finishes first. */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond = PTHREAD_COND_INITIALIZER;
static int init_done;

static void *watch_init(void *arg)
{
	double limit = *(const double *)arg;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)limit;
	until.tv_nsec += (long)((limit - (double)(time_t)limit) * 1e9);
	if (until.tv_nsec >= 1000000000L)
		until.tv_sec++, until.tv_nsec -= 1000000000L;
	pthread_mutex_lock(&watch_lock);
	int rc = 0;
	while (!init_done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&watch_cond, &watch_lock, &until);
	int late = !init_done;
	pthread_mutex_unlock(&watch_lock);
	if (late) {
		char msg[256];
		int n = snprintf(msg, sizeof msg,
				 "kopt: MPI_Init did not finish within %.0f s: a rank of the job died "
				 "or never started (this rank stops; end the job)\n",
				 limit);
		if (write(2, msg, (size_t)n) < 0)
			n = 0;
		_exit(1);
	}
	return NULL;
}

int kopt_mpi_init(int *rank, int *size, double init_timeout_s, char *err, size_t errlen)
{
	*rank = 0;
	*size = 0;
	if (finalised) {
		snprintf(err, errlen, "MPI was already finalised");
		return -1;
	}
	if (!initialised) {
		static double limit;
		pthread_t watcher;
		int watching = 0;
		limit = init_timeout_s;
		if (init_timeout_s > 0)
			watching = pthread_create(&watcher, NULL, watch_init, &limit) == 0;
		int rc = MPI_Init(NULL, NULL);
		if (watching) {
			pthread_mutex_lock(&watch_lock);
			init_done = 1;
			pthread_cond_signal(&watch_cond);
			pthread_mutex_unlock(&watch_lock);
			pthread_join(watcher, NULL);
		}
		if (rc != MPI_SUCCESS) {
			mpi_message(rc, "MPI_Init", err, errlen);
			return -1;
		}
		initialised = 1;
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return 0;
}

/* Frees the sends that completed. */
static void reap(void)
{
	struct pending **p = &in_flight;
	while (*p != NULL) {
		int done = 0;
		if (MPI_Test(&(*p)->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			done = 0;
		if (done) {
			struct pending *d = *p;
			*p = d->next;
			free(d->buf);
			free(d);
		} else {
			p = &(*p)->next;
		}
	}
}

int kopt_mpi_send(int dest, const void *buf, size_t len, char *err, size_t errlen)
{
	if (!initialised || finalised) {
		snprintf(err, errlen, "MPI is not initialised");
		return -1;
	}
	if (len > (size_t)0x7fffffff) {
		snprintf(err, errlen, "message of %zu bytes is too large", len);
		return -1;
	}
	reap();
	struct pending *p = calloc(1, sizeof *p);
	unsigned char *copy = malloc(len > 0 ? len : 1);
	if (p == NULL || copy == NULL) {
		free(p);
		free(copy);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (len > 0)
		memcpy(copy, buf, len);
	int rc = MPI_Isend(copy, (int)len, MPI_BYTE, dest, message_tag, MPI_COMM_WORLD, &p->req);
	if (rc != MPI_SUCCESS) {
		free(p);
		free(copy);
		mpi_message(rc, "MPI_Isend", err, errlen);
		return -1;
	}
	p->buf = copy;
	p->next = in_flight;
	in_flight = p;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int kopt_mpi_recv(int *src, unsigned char **buf, size_t *len, int timeout_ms, char *err,
		  size_t errlen)
{
	*src = -1;
	*buf = NULL;
	*len = 0;
	if (!initialised || finalised) {
		snprintf(err, errlen, "MPI is not initialised");
		return -1;
	}
	double deadline = timeout_ms < 0 ? -1.0 : now_s() + timeout_ms / 1000.0;
	/* Probing keeps the progress engine turning (the sends in flight too);
	 * the nap grows to 1 ms so a waiting rank does not spin a core. */
	long nap_ns = 20000;
	for (;;) {
		int flag = 0;
		MPI_Status st;
		int rc = MPI_Iprobe(MPI_ANY_SOURCE, message_tag, MPI_COMM_WORLD, &flag, &st);
		if (rc != MPI_SUCCESS) {
			mpi_message(rc, "MPI_Iprobe", err, errlen);
			return -1;
		}
		if (flag) {
			int count = 0;
			rc = MPI_Get_count(&st, MPI_BYTE, &count);
			if (rc != MPI_SUCCESS || count < 0) { /* MPI_UNDEFINED is negative */
				snprintf(err, errlen, "MPI_Get_count: a message of no byte count from "
						      "rank %d", st.MPI_SOURCE);
				return -1;
			}
			unsigned char *b = malloc(count > 0 ? (size_t)count : 1);
			if (b == NULL) {
				snprintf(err, errlen, "out of memory for a message of %d bytes", count);
				return -1;
			}
			rc = MPI_Recv(b, count, MPI_BYTE, st.MPI_SOURCE, message_tag, MPI_COMM_WORLD,
				      MPI_STATUS_IGNORE);
			if (rc != MPI_SUCCESS) {
				free(b);
				mpi_message(rc, "MPI_Recv", err, errlen);
				return -1;
			}
			*src = st.MPI_SOURCE;
			*buf = b;
			*len = (size_t)count;
			reap();
			return 0;
		}
		if (deadline >= 0 && now_s() >= deadline)
			break;
		struct timespec nap = {0, nap_ns};
		nanosleep(&nap, NULL);
		if (nap_ns < 1000000)
			nap_ns *= 2;
	}
	reap();
	return 1;
}

size_t kopt_mpi_pending(void)
{
	size_t n = 0;
	if (initialised && !finalised)
		reap();
	for (struct pending *p = in_flight; p != NULL; p = p->next)
		n++;
	return n;
}

void kopt_mpi_finalize(void)
{
	if (!initialised || finalised)
		return;
	while (in_flight != NULL) {
		struct pending *d = in_flight;
		in_flight = d->next;
		MPI_Wait(&d->req, MPI_STATUS_IGNORE);
		free(d->buf);
		free(d);
	}
	MPI_Finalize();
	finalised = 1;
}

void kopt_mpi_abort(int code)
{
	fflush(stdout);
	fflush(stderr);
	if (initialised && !finalised)
		MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

#else /* built without MPI */

int kopt_mpi_built(void)
{
	return 0;
}

int kopt_mpi_init(int *rank, int *size, double init_timeout_s, char *err, size_t errlen)
{
	(void)init_timeout_s;
	*rank = 0;
	*size = 0;
	snprintf(err, errlen, "this kopt was built without MPI (configure with -DKOPT_MPI=ON and "
			      "Open MPI installed: libopenmpi-dev)");
	return -1;
}

int kopt_mpi_send(int dest, const void *buf, size_t len, char *err, size_t errlen)
{
	snprintf(err, errlen, "this kopt was built without MPI");
	return -1;
}

int kopt_mpi_recv(int *src, unsigned char **buf, size_t *len, int timeout_ms, char *err,
		  size_t errlen)
{
	*src = -1;
	*buf = NULL;
	*len = 0;
	snprintf(err, errlen, "this kopt was built without MPI");
	return -1;
}

size_t kopt_mpi_pending(void)
{
	return 0;
}

void kopt_mpi_finalize(void)
{
}

void kopt_mpi_abort(int code)
{
	exit(code);
}

#endif
