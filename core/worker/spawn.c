/* Main-process side of the worker processes: spawn, stop, reap. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker/spawn.h"
#include "worker/worker.h"

extern char **environ;

static int lift(int *fd)
{
	if (*fd > 4)
		return 0;
	int n = fcntl(*fd, F_DUPFD_CLOEXEC, 5);
	if (n < 0)
		return -1;
	close(*fd);
	*fd = n;
	return 0;
}

int kopt_workerproc_spawn(struct kopt_workerproc *w, int device, const char *const *wrap,
			  char *err, size_t errlen)
{
	int req[2] = {-1, -1}, rep[2] = {-1, -1};
	w->pid = -1;
	w->to_fd = w->from_fd = -1;
	w->device = device;
	w->group = 0;
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(req, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	/* The child gets its ends as fds 3 and 4; everything else is close-on-exec.
	 * Our ends are moved above 4 first, so dup2 never maps an fd onto itself
	 * (which would keep its close-on-exec flag). */
	for (int i = 0; i < 2; i++) {
		if (lift(&req[i]) != 0 || lift(&rep[i]) != 0) {
			snprintf(err, errlen, "fcntl: %s", strerror(errno));
			goto fail;
		}
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, req[0], 3);
	posix_spawn_file_actions_adddup2(&fa, rep[1], 4);
	char dev[16];
	snprintf(dev, sizeof dev, "%d", device);
	char *argv[64 + 7];
	int argc = 0;
	char exe[4096];
	const char *prog = "/proc/self/exe";
	if (wrap != NULL && wrap[0] != NULL) {
		/* the wrapper runs kopt by its real path: /proc/self/exe would
		 * name the wrapper in its own process */
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n <= 0) {
			snprintf(err, errlen, "cannot find kopt's own path: %s", strerror(errno));
			posix_spawn_file_actions_destroy(&fa);
			goto fail;
		}
		exe[n] = '\0';
		for (; wrap[argc] != NULL && argc < 64; argc++)
			argv[argc] = (char *)wrap[argc];
		prog = wrap[0];
		argv[argc++] = exe;
	} else {
		argv[argc++] = "kopt";
	}
	argv[argc++] = KOPT_WORKER_ARG;
	argv[argc++] = dev;
	argv[argc++] = "3";
	argv[argc++] = "4";
	if (wrap != NULL && wrap[0] != NULL)
		argv[argc++] = KOPT_WORKER_BANDLESS;
	argv[argc] = NULL;
	/* a wrapper (the sanitizer) runs the worker as its own child: both go
	 * in a process group of their own, so a stop reaches the worker too */
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	w->group = wrap != NULL && wrap[0] != NULL;
	if (w->group) {
		posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
		posix_spawnattr_setpgroup(&attr, 0);
	}
	pid_t pid;
	int rc = posix_spawn(&pid, prog, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start a GPU worker: posix_spawn %s: %s", prog,
			 strerror(rc));
		goto fail;
	}
	close(req[0]);
	close(rep[1]);
	w->pid = pid;
	w->to_fd = req[1];
	w->from_fd = rep[0];
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (req[i] >= 0)
			close(req[i]);
		if (rep[i] >= 0)
			close(rep[i]);
	}
	return -1;
}

void kopt_workerproc_stop(struct kopt_workerproc *w, char *how, size_t howlen)
{
	kopt_workerproc_stop_wait(w, 0, how, howlen);
}

void kopt_workerproc_stop_wait(struct kopt_workerproc *w, int grace_ms, char *how,
			       size_t howlen)
{
	if (how != NULL && howlen > 0)
		how[0] = '\0';
	if (w->to_fd >= 0)
		close(w->to_fd);
	if (w->from_fd >= 0)
		close(w->from_fd);
	w->to_fd = w->from_fd = -1;
	if (w->pid <= 0)
		return;
	int status = 0;
	pid_t r = waitpid(w->pid, &status, WNOHANG);
	for (int waited = 0; r == 0 && waited < grace_ms; waited += 10) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		r = waitpid(w->pid, &status, WNOHANG);
	}
	if (w->group)
		kill(-w->pid, SIGKILL); /* the wrapper and any worker left under it */
	else if (r == 0)
		kill(w->pid, SIGKILL);
	if (r == 0) {
		do
			r = waitpid(w->pid, &status, 0);
		while (r < 0 && errno == EINTR);
	}
	if (how != NULL && r == w->pid) {
		if (WIFEXITED(status))
			snprintf(how, howlen, "exit code %d", WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			snprintf(how, howlen, "killed by signal %d", WTERMSIG(status));
	}
	w->pid = -1;
}
