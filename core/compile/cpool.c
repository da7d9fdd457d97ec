/* Compile worker processes; see cpool.h for the contract and the protocol. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/cpool.h"
#include "sys.h"

/* Bounds a frame so a corrupt length cannot make us allocate the world. */
#define MAX_FRAME ((uint64_t)1 << 31)

struct item {
	struct item *next;
	long id;
	int cached;
	unsigned char *buf; /* packed job (queue) or packed result (ready) */
	size_t size;
};

struct worker {
	pid_t pid;
	int fd;
	long job; /* id in flight, 0 when idle */
	double started;
};

struct kopt_cpool {
	int n;
	struct worker *w;
	char *cache_dir;
	double job_timeout_s;
	long next_id;
	size_t pending;
	struct item *queue, *queue_tail;
	struct item *ready, *ready_tail;
};

/* --- byte helpers ------------------------------------------------------- */

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static int write_all(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_frame(int fd, const unsigned char *buf, size_t n)
{
	unsigned char len[8];
	put_u64(len, n);
	return write_all(fd, len, 8) == 0 && write_all(fd, buf, n) == 0 ? 0 : -1;
}

/* Reads one frame into a malloc'ed buffer; -1 on EOF, error or bad length. */
static int read_frame(int fd, unsigned char **buf, size_t *n)
{
	unsigned char len[8];
	*buf = NULL;
	if (read_all(fd, len, 8) != 0)
		return -1;
	uint64_t size = get_u64(len);
	if (size > MAX_FRAME || (*buf = malloc(size ? (size_t)size : 1)) == NULL)
		return -1;
	if (read_all(fd, *buf, (size_t)size) != 0) {
		free(*buf);
		*buf = NULL;
		return -1;
	}
	*n = (size_t)size;
	return 0;
}

static size_t str_size(const char *s)
{
	return 8 + (s ? strlen(s) : 0);
}

static unsigned char *put_str(unsigned char *p, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	put_u64(p, s ? n : UINT64_MAX);
	memcpy(p + 8, s ? s : "", n);
	return p + 8 + n;
}

/* Reads a length-prefixed string into a fresh allocation (*out NULL for a
 * NULL field). */
static int get_str(const unsigned char **p, const unsigned char *end, char **out)
{
	*out = NULL;
	if (end - *p < 8)
		return -1;
	uint64_t n = get_u64(*p);
	*p += 8;
	if (n == UINT64_MAX)
		return 0;
	if ((uint64_t)(end - *p) < n || (*out = malloc((size_t)n + 1)) == NULL)
		return -1;
	memcpy(*out, *p, (size_t)n);
	(*out)[n] = '\0';
	*p += n;
	return 0;
}

static unsigned char *pack_job(const struct kopt_nvrtc_job *job, const char *cache_dir,
			       size_t *size)
{
	size_t n = str_size(job->source) + str_size(job->entry) + str_size(job->arch) +
		   str_size(job->name) + str_size(job->salt) + str_size(cache_dir) + 8;
	for (size_t i = 0; i < job->n_options; i++)
		n += str_size(job->options[i]);
	unsigned char *buf = malloc(n), *p = buf;
	if (buf == NULL)
		return NULL;
	p = put_str(p, job->source);
	p = put_str(p, job->entry);
	p = put_str(p, job->arch);
	p = put_str(p, job->name);
	p = put_str(p, job->salt);
	p = put_str(p, cache_dir);
	put_u64(p, job->n_options);
	p += 8;
	for (size_t i = 0; i < job->n_options; i++)
		p = put_str(p, job->options[i]);
	*size = n;
	return buf;
}

/* --- the worker side ----------------------------------------------------- */

static void serve_one(int fd, const unsigned char *buf, size_t size)
{
	const unsigned char *p = buf, *end = buf + size;
	char *source = NULL, *entry = NULL, *arch = NULL, *name = NULL, *salt = NULL, *dir = NULL;
	char **opts = NULL;
	uint64_t n_opts = 0, got = 0;
	struct kopt_nvrtc_result res;
	kopt_nvrtc_result_init(&res);
	int cached = 0;
	char err[256] = "malformed job frame";
	int ok = get_str(&p, end, &source) == 0 && get_str(&p, end, &entry) == 0 &&
		 get_str(&p, end, &arch) == 0 && get_str(&p, end, &name) == 0 &&
		 get_str(&p, end, &salt) == 0 && get_str(&p, end, &dir) == 0 && source != NULL &&
		 end - p >= 8;
	if (ok) {
		n_opts = get_u64(p);
		p += 8;
		ok = n_opts <= size && (opts = calloc((size_t)n_opts + 1, sizeof *opts)) != NULL;
	}
	for (; ok && got < n_opts; got++)
		ok = get_str(&p, end, &opts[got]) == 0 && opts[got] != NULL;
	if (ok) {
		struct kopt_nvrtc_job job = {.source = source,
					     .name = name,
					     .entry = entry,
					     .arch = arch,
					     .options = (const char *const *)opts,
					     .n_options = (size_t)n_opts,
					     .salt = salt};
		ok = kopt_nvrtc_compile_cached(&job, dir, &res, &cached, err, sizeof err) == 0;
	}
	if (!ok) {
		kopt_nvrtc_result_release(&res);
		char line[300];
		snprintf(line, sizeof line, "kopt compile worker: %s\n", err);
		res.log = strdup(line);
	}
	size_t rsize = 0;
	unsigned char *packed = kopt_nvrtc_result_pack(&res, &rsize);
	unsigned char *frame = packed ? malloc(rsize + 1) : NULL;
	if (frame == NULL)
		_exit(3); /* the pool reports a dead worker */
	frame[0] = (unsigned char)cached;
	memcpy(frame + 1, packed, rsize);
	if (write_frame(fd, frame, rsize + 1) != 0)
		_exit(0);
	free(frame);
	free(packed);
	kopt_nvrtc_result_release(&res);
	for (uint64_t i = 0; i < got; i++)
		free(opts[i]);
	free(opts);
	free(source);
	free(entry);
	free(arch);
	free(name);
	free(salt);
	free(dir);
}

void kopt_cpool_serve(int fd)
{
	unsigned char *buf;
	size_t n;
	while (read_frame(fd, &buf, &n) == 0) {
		serve_one(fd, buf, n);
		free(buf);
	}
}

/* --- the main side ------------------------------------------------------- */

static void close_other_fds(int keep)
{
#ifdef SYS_close_range
	if (keep > 3)
		syscall(SYS_close_range, 3u, (unsigned)keep - 1, 0u);
	if (syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u) == 0)
		return;
#endif
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 65536)
		max = 65536;
	for (int fd = 3; fd < (int)max; fd++)
		if (fd != keep)
			close(fd);
}

static int spawn(struct kopt_cpool *p, int i, char *err, size_t errlen)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		/* The main process owns Ctrl-C and SIGTERM (it stops between
		 * evaluations, so the compile in flight is kept); a worker ends
		 * when its socket closes, or with the main process. */
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN); /* (a SIGTERM to the group: timeout, systemd, Slurm) */
		signal(SIGPIPE, SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		close_other_fds(sv[1]);
		kopt_cpool_serve(sv[1]);
		_exit(0);
	}
	close(sv[1]);
	p->w[i].pid = pid;
	p->w[i].fd = sv[0];
	p->w[i].job = 0;
	return 0;
}

static void reap(struct worker *w, int *status)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	if (w->pid > 0) {
		kill(w->pid, SIGKILL);
		while (waitpid(w->pid, status, 0) < 0 && errno == EINTR)
			;
	}
	w->pid = 0;
}

struct kopt_cpool *kopt_cpool_new(int n, const char *cache_dir, double job_timeout_s, char *err,
				  size_t errlen)
{
	if (n < 1) {
		snprintf(err, errlen, "a compile pool needs at least one worker, got %d", n);
		return NULL;
	}
	struct kopt_cpool *p = calloc(1, sizeof *p);
	if (p == NULL || (p->w = calloc((size_t)n, sizeof *p->w)) == NULL ||
	    (cache_dir && (p->cache_dir = strdup(cache_dir)) == NULL)) {
		snprintf(err, errlen, "out of memory");
		kopt_cpool_free(p);
		return NULL;
	}
	p->job_timeout_s = job_timeout_s;
	p->next_id = 1;
	for (int i = 0; i < n; i++)
		p->w[i].fd = -1;
	for (int i = 0; i < n; i++, p->n++) {
		if (spawn(p, i, err, errlen) != 0) {
			kopt_cpool_free(p);
			return NULL;
		}
	}
	return p;
}

static void push(struct item **head, struct item **tail, struct item *it)
{
	it->next = NULL;
	if (*tail)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
}

static struct item *pop(struct item **head, struct item **tail)
{
	struct item *it = *head;
	if (it) {
		*head = it->next;
		if (*head == NULL)
			*tail = NULL;
	}
	return it;
}

/* Queues a failed result for id with log text. */
static void fail_job(struct kopt_cpool *p, long id, const char *log)
{
	struct kopt_nvrtc_result res;
	kopt_nvrtc_result_init(&res);
	res.log = strdup(log);
	struct item *it = calloc(1, sizeof *it);
	if (it)
		it->buf = kopt_nvrtc_result_pack(&res, &it->size);
	kopt_nvrtc_result_release(&res);
	if (it == NULL || it->buf == NULL) {
		free(it);
		p->pending--; /* nothing to report it with: drop it */
		return;
	}
	it->id = id;
	push(&p->ready, &p->ready_tail, it);
}

/* Hands queued jobs to idle workers. A worker that could not be replaced
 * earlier is tried again here; with none alive, queued jobs fail rather
 * than wait forever. */
static void dispatch(struct kopt_cpool *p)
{
	int alive = 0;
	char err[256] = "";
	for (int i = 0; i < p->n; i++)
		alive += p->w[i].pid > 0 || (p->queue && spawn(p, i, err, sizeof err) == 0);
	while (alive == 0 && p->queue) {
		struct item *it = pop(&p->queue, &p->queue_tail);
		char log[400];
		snprintf(log, sizeof log, "kopt: no compile worker could be started: %s\n", err);
		fail_job(p, it->id, log);
		free(it->buf);
		free(it);
	}
	for (int i = 0; i < p->n && p->queue; i++) {
		struct worker *w = &p->w[i];
		if (w->job != 0 || w->pid <= 0)
			continue;
		struct item *it = pop(&p->queue, &p->queue_tail);
		if (write_frame(w->fd, it->buf, it->size) != 0) {
			/* dead before it got the job: replace it and retry */
			reap(w, &(int){0});
			if (spawn(p, i, err, sizeof err) != 0 ||
			    write_frame(w->fd, it->buf, it->size) != 0) {
				char log[400];
				snprintf(log, sizeof log,
					 "kopt: cannot start a compile worker: %s\n", err);
				fail_job(p, it->id, log);
				free(it->buf);
				free(it);
				continue;
			}
		}
		w->job = it->id;
		w->started = kopt_sys_now();
		free(it->buf);
		free(it);
	}
}

long kopt_cpool_submit(struct kopt_cpool *p, const struct kopt_nvrtc_job *job, char *err,
		       size_t errlen)
{
	struct item *it = calloc(1, sizeof *it);
	if (it == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	it->id = p->next_id++;
	if (p->cache_dir) {
		char key[65];
		struct kopt_nvrtc_result res;
		kopt_nvrtc_cache_key(job, key);
		if (kopt_nvrtc_cache_load(p->cache_dir, key, &res)) {
			it->buf = kopt_nvrtc_result_pack(&res, &it->size);
			it->cached = 1;
			kopt_nvrtc_result_release(&res);
			if (it->buf) {
				push(&p->ready, &p->ready_tail, it);
				p->pending++;
				return it->id;
			}
		}
	}
	it->buf = pack_job(job, p->cache_dir, &it->size);
	if (it->buf == NULL) {
		free(it);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	long id = it->id; /* dispatch may hand it out and free it */
	push(&p->queue, &p->queue_tail, it);
	p->pending++;
	dispatch(p);
	return id;
}

/* A worker is gone (EOF, bad frame, timeout): report its job, replace it. */
static void lose_worker(struct kopt_cpool *p, int i, const char *why)
{
	struct worker *w = &p->w[i];
	int status = 0;
	reap(w, &status);
	char log[300];
	if (why)
		snprintf(log, sizeof log, "kopt: %s\n", why);
	else if (WIFSIGNALED(status))
		snprintf(log, sizeof log, "kopt: the compile worker died of signal %d (%s)\n",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(log, sizeof log, "kopt: the compile worker exited with status %d\n",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	fail_job(p, w->job, log);
	w->job = 0;
	char err[256];
	if (spawn(p, i, err, sizeof err) != 0)
		fprintf(stderr, "kopt: cannot replace a compile worker: %s\n", err);
}

static void collect(struct kopt_cpool *p, int i)
{
	struct worker *w = &p->w[i];
	unsigned char *buf;
	size_t n;
	if (read_frame(w->fd, &buf, &n) != 0 || n < 1) {
		lose_worker(p, i, NULL);
		return;
	}
	struct item *it = calloc(1, sizeof *it);
	if (it == NULL) {
		free(buf);
		lose_worker(p, i, "out of memory for a result");
		return;
	}
	it->id = w->job;
	it->cached = buf[0] != 0;
	it->size = n - 1;
	it->buf = buf;
	memmove(buf, buf + 1, n - 1);
	push(&p->ready, &p->ready_tail, it);
	w->job = 0;
}

int kopt_cpool_wait_any(struct kopt_cpool *p, double timeout_s, long *id,
			struct kopt_nvrtc_result *res, int *cached, char *err, size_t errlen)
{
	kopt_nvrtc_result_init(res);
	double deadline = timeout_s < 0 ? -1 : kopt_sys_now() + timeout_s;
	struct pollfd *fds = calloc((size_t)p->n, sizeof *fds);
	int *which = calloc((size_t)p->n, sizeof *which);
	int rc = -1;
	if (fds == NULL || which == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	int looked_last = 0; /* (a timeout that has passed still looks once: wait_any(0) polls) */
	while (p->ready == NULL) {
		dispatch(p);
		nfds_t nf = 0;
		double now = kopt_sys_now(), wait = deadline < 0 ? -1 : deadline - now;
		for (int i = 0; i < p->n; i++) {
			if (p->w[i].job == 0)
				continue;
			if (p->job_timeout_s > 0) {
				double left = p->w[i].started + p->job_timeout_s - now;
				if (left <= 0) {
					char why[128];
					snprintf(why, sizeof why, "compile timed out after %.3g s",
						 p->job_timeout_s);
					lose_worker(p, i, why);
					continue;
				}
				if (wait < 0 || left < wait)
					wait = left;
			}
			fds[nf].fd = p->w[i].fd;
			fds[nf].events = POLLIN;
			which[nf++] = i;
		}
		if (p->ready)
			break;
		if (nf == 0 && p->queue == NULL) {
			rc = 0; /* nothing pending */
			goto out;
		}
		if (deadline >= 0 && now >= deadline) {
			if (looked_last) {
				rc = 0;
				goto out;
			}
			looked_last = 1;
			wait = 0;
		}
		int ms = wait < 0 ? -1 : looked_last ? 0 : (int)(wait * 1000.0) + 1;
		int r = poll(fds, nf, ms);
		if (r < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			goto out;
		}
		for (nfds_t k = 0; r > 0 && k < nf; k++)
			if (fds[k].revents & (POLLIN | POLLHUP | POLLERR))
				collect(p, which[k]);
	}
	struct item *it = pop(&p->ready, &p->ready_tail);
	p->pending--;
	dispatch(p);
	*id = it->id;
	*cached = it->cached;
	if (kopt_nvrtc_result_unpack(it->buf, it->size, res) != 0) {
		kopt_nvrtc_result_init(res);
		res->log = strdup("kopt: a compile worker sent a malformed result\n");
	}
	free(it->buf);
	free(it);
	rc = 1;
out:
	free(fds);
	free(which);
	return rc;
}

size_t kopt_cpool_pending(const struct kopt_cpool *p)
{
	return p->pending;
}

int kopt_cpool_size(const struct kopt_cpool *p)
{
	return p->n;
}

long kopt_cpool_worker_pid(const struct kopt_cpool *p, int i)
{
	return i >= 0 && i < p->n && p->w[i].pid > 0 ? (long)p->w[i].pid : -1;
}

static void free_items(struct item *it)
{
	while (it) {
		struct item *next = it->next;
		free(it->buf);
		free(it);
		it = next;
	}
}

void kopt_cpool_free(struct kopt_cpool *p)
{
	if (p == NULL)
		return;
	for (int i = 0; i < p->n; i++) {
		if (p->w[i].fd >= 0)
			close(p->w[i].fd); /* idle workers see EOF and leave */
		p->w[i].fd = -1;
	}
	for (int i = 0; i < p->n; i++) {
		if (p->w[i].pid <= 0)
			continue;
		if (p->w[i].job != 0)
			kill(p->w[i].pid, SIGKILL);
		while (waitpid(p->w[i].pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	free_items(p->queue);
	free_items(p->ready);
	free(p->w);
	free(p->cache_dir);
	free(p);
}
