#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"

double kopt_sys_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void kopt_sys_populate(void *addr, size_t len)
{
	static int unsupported;
	if (len == 0 || unsupported)
		return;
	/* whole pages: the one holding addr to the one holding its last byte,
	 * all of them in the mapping that holds the range */
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~(page - 1);
	uintptr_t end = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
	if (madvise((void *)start, end - start, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
		unsupported = 1;
}

void kopt_sys_populate_ahead(void *base, size_t used, size_t cap, size_t *ready)
{
	if (used <= *ready)
		return;
	size_t end = used + KOPT_SYS_POPULATE_AHEAD < cap ? used + KOPT_SYS_POPULATE_AHEAD : cap;
	kopt_sys_populate((char *)base + *ready, end - *ready);
	*ready = end;
}

void kopt_sys_utc_iso(char *buf, size_t n)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int kopt_sys_mkdir_p(const char *path, char *err, size_t errlen)
{
	char buf[4096];
	if (path[0] == '\0') {
		snprintf(err, errlen, "an empty path names no directory");
		return -1;
	}
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create directory %s: %s", buf,
				 strerror(errno));
			return -1;
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a directory", path);
		return -1;
	}
	return 0;
}

static volatile sig_atomic_t interrupted, signals, acknowledged;
static struct timespec first_signal;
static void (*signal_callback)(void);

static void on_signal(int sig)
{
	if (signals >= 2) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	if (!interrupted) {
		clock_gettime(CLOCK_MONOTONIC, &first_signal);
		interrupted = sig;
	}
	signals++;
	if (signal_callback != NULL)
		signal_callback();
}

void kopt_sys_install_signal_handlers(void (*callback)(void))
{
	signal_callback = callback;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int kopt_sys_interrupted(void)
{
	return interrupted;
}

void kopt_sys_acknowledge_interrupt(void)
{
	acknowledged = signals;
}

int kopt_sys_interrupt_overdue(double grace)
{
	int n = signals, seen = acknowledged;
	if (n == 0 || n == seen)
		return 0;
	if (seen > 0 || n >= 2)
		return 1;
	struct timespec t = first_signal;
	double since = kopt_sys_now() - ((double)t.tv_sec + (double)t.tv_nsec * 1e-9);
	return since >= grace;
}

void kopt_sys_clear_interrupt(void)
{
	interrupted = 0;
	signals = 0;
	acknowledged = 0;
}

/* Fault injection (see sys.h): -1 = off, else the bytes still allowed. */
static long long write_budget = -2;
static int fail_fsync = -1;

static long long write_allowance(void)
{
	if (write_budget == -2) {
		const char *v = getenv("KOPT_FAIL_WRITE_AFTER");
		char *end;
		long long n = v != NULL ? strtoll(v, &end, 10) : -1;
		write_budget = (v != NULL && *v != '\0' && *end == '\0' && n >= 0) ? n : -1;
	}
	return write_budget;
}

int kopt_sys_write_all(int fd, const void *buf, size_t n, char *err, size_t errlen)
{
	const char *p = buf;
	size_t left = n;
	long long allow = write_allowance();
	int injected = 0;
	if (allow >= 0 && (unsigned long long)allow < n) {
		left = (size_t)allow;
		injected = 1;
	}
	while (left > 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			snprintf(err, errlen, "%s", strerror(errno));
			return -1;
		}
		p += w;
		left -= (size_t)w;
		if (write_budget >= 0)
			write_budget -= w;
	}
	if (injected) {
		snprintf(err, errlen, "%s", strerror(ENOSPC));
		return -1;
	}
	return 0;
}

int kopt_sys_fsync(int fd, char *err, size_t errlen)
{
	if (fail_fsync < 0) {
		const char *v = getenv("KOPT_FAIL_FSYNC");
		fail_fsync = v != NULL && strcmp(v, "1") == 0;
	}
	if (fail_fsync) {
		snprintf(err, errlen, "fsync: %s", strerror(EIO));
		return -1;
	}
	if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
		snprintf(err, errlen, "fsync: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* fsync of the folder that holds path, so a rename in it is on the disk. */
static int sync_parent(const char *path, char *err, size_t errlen)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else if ((size_t)(slash - path) < sizeof dir)
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	else
		return 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* a folder we cannot open for reading: nothing to sync through */
	int rc = kopt_sys_fsync(fd, err, errlen);
	close(fd);
	return rc;
}

int kopt_sys_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp) {
		snprintf(err, errlen, "path too long");
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	int rc = -1;
	if (kopt_sys_write_all(fd, data, n, err, errlen) != 0 ||
	    kopt_sys_fsync(fd, err, errlen) != 0)
		goto out;
	if (close(fd) != 0) {
		fd = -1;
		snprintf(err, errlen, "%s", strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		goto out;
	}
	return sync_parent(path, err, errlen);
out:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return rc;
}

int kopt_sys_truncate(const char *path, long long size, char *err, size_t errlen)
{
	if (truncate(path, (off_t)size) != 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The PID a lock holder wrote, waiting briefly for one that has just taken
 * the lock and not written it yet; 0 when none appears. */
static long read_holder(int fd)
{
	for (int i = 0; i < 50; i++) {
		char buf[32];
		ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
		if (r > 0) {
			buf[r] = '\0';
			long pid = strtol(buf, NULL, 10);
			if (pid > 0)
				return pid;
		}
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

int kopt_sys_lock(const char *path, int *fd_out, long *holder, char *err, size_t errlen)
{
	*fd_out = -1;
	*holder = -1;
	/* A holder that ends may remove the lock file (a run that recorded
	 * nothing leaves no folder behind): a lock taken on a file no longer at
	 * path is dropped and taken again on the new one. */
	for (int tries = 0; tries < 100; tries++) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0) {
			snprintf(err, errlen, "%s", strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			if (e == EWOULDBLOCK) {
				*holder = read_holder(fd);
				snprintf(err, errlen, "locked by another process");
			} else {
				snprintf(err, errlen, "flock: %s", strerror(e));
			}
			close(fd);
			return -1;
		}
		struct stat held, now;
		if (fstat(fd, &held) != 0 || stat(path, &now) != 0 || held.st_ino != now.st_ino ||
		    held.st_dev != now.st_dev) {
			close(fd);
			continue;
		}
		char buf[32];
		int len = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
		if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		*fd_out = fd;
		return 0;
	}
	snprintf(err, errlen, "%s keeps being replaced", path);
	return -1;
}

/* The folder of path, flocked (non-blocking): a lock file deleted by hand
 * during a run freed the way for a second kopt on the same folder, and the
 * folder itself is not deleted while it holds the run. Returns its fd, -1
 * when another process holds it (err says so), -2 on other failures. */
int kopt_sys_lock_folder(const char *path, char *err, size_t errlen)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%.400s: %s", dir, strerror(errno));
		return -2;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK) {
			snprintf(err, errlen,
				 "in use by another kopt process, whose lock file %s was removed",
				 path);
			return -1;
		}
		snprintf(err, errlen, "flock %.400s: %s", dir, strerror(e));
		return -2;
	}
	return fd;
}
