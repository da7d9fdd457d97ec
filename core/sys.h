#ifndef KOPT_SYS_H
#define KOPT_SYS_H
#include <stddef.h>

/* Operating-system helpers the Lua standard library lacks. */

/* Monotonic seconds since an arbitrary origin. */
double kopt_sys_now(void);

/* UTC time as "2026-11-22T02:44:32Z" into buf (at least 21 bytes). */
void kopt_sys_utc_iso(char *buf, size_t n);

/* mkdir -p. Returns 0, or -1 with a message in err. */
int kopt_sys_mkdir_p(const char *path, char *err, size_t errlen);

/* SIGINT and SIGTERM set a flag the engine polls, so a run stops between
 * evaluations with everything flushed. on_signal (may be NULL) is called from
 * the signal handler after each one and must be async-signal-safe (the Lua
 * binding sets a hook there, as lua.c does). A third signal kills at once. */
void kopt_sys_install_signal_handlers(void (*on_signal)(void));
/* The first signal's number, or 0. */
int kopt_sys_interrupted(void);
/* The program noticed the signals so far and is stopping by itself. */
void kopt_sys_acknowledge_interrupt(void);
/* 1 when a signal is waiting and the program has not answered it in time:
 * a second signal, or `grace` seconds since the first; after an answer, any
 * further signal at once. */
int kopt_sys_interrupt_overdue(double grace);
void kopt_sys_clear_interrupt(void);

/* Durable writes. Every function returns 0, or -1 with one sentence in err.
 *
 * Fault injection for tests, read from the environment once:
 * KOPT_FAIL_WRITE_AFTER=N lets the process write N bytes in all through
 * kopt_sys_write_all, then fails every write with ENOSPC, as a full disk does
 * (the write that crosses the limit is written in part); KOPT_FAIL_FSYNC=1
 * fails every fsync with EIO. */

/* Writes all n bytes to fd (retrying short writes and EINTR). */
int kopt_sys_write_all(int fd, const void *buf, size_t n, char *err, size_t errlen);

/* fsync(fd); EINVAL (a file system without fsync) is not a failure. */
int kopt_sys_fsync(int fd, char *err, size_t errlen);

/* Replaces path with data atomically and durably: a temporary file in the
 * same folder, written, fsynced, renamed over path, the folder fsynced. On
 * failure the old file is intact and the temporary one removed. */
int kopt_sys_write_atomic(const char *path, const void *data, size_t n, char *err, size_t errlen);

/* truncate(2); cutting a file shorter needs no free space. */
int kopt_sys_truncate(const char *path, long long size, char *err, size_t errlen);

/* Takes an exclusive flock on path (created if absent) and writes this
 * process's PID into it. On success *fd holds the lock until closed (the
 * kernel drops it when the process dies, kill -9 included; children started
 * with exec do not inherit it). When another process holds it, returns -1
 * with *holder its PID (0 if it has not written one yet); other failures
 * leave *holder at -1. */
int kopt_sys_lock(const char *path, int *fd, long *holder, char *err, size_t errlen);

#endif
