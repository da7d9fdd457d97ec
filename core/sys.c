#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sys.h"

double kopt_sys_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
			snprintf(err, errlen, "cannot create directory %s: %s", buf, strerror(errno));
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

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	if (interrupted && sig == SIGINT) {
		signal(SIGINT, SIG_DFL);
		raise(SIGINT);
	}
	interrupted = sig;
}

void kopt_sys_install_signal_handlers(void)
{
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

void kopt_sys_clear_interrupt(void)
{
	interrupted = 0;
}
