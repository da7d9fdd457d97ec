#ifndef KOPT_SYS_H
#define KOPT_SYS_H
#include <stddef.h>

/* Operating-system helpers the Lua standard library lacks. */

/* Monotonic seconds since an arbitrary origin. */
double kopt_sys_now(void);

/* Backs the pages of [addr, addr + len) with memory now, in one call,
 * instead of one page fault at each page's first touch; contents are left
 * as they are. A fault costs 11 us on the 2-core virtual machine of
 * docs/SEARCH.md's timings, a page populated this way 2.5 us in all
 * (including the first touch after it). A hint: it does nothing where the
 * kernel lacks MADV_POPULATE_WRITE (before Linux 5.14). */
void kopt_sys_populate(void *addr, size_t len);

/* For an array filled from its start (`cap` bytes at base, the first `used`
 * in use): keeps the pages up to KOPT_SYS_POPULATE_AHEAD bytes past `used`
 * populated, in one kopt_sys_populate call each time `used` passes *ready,
 * the length known to be backed (0 for a new array; a realloc that moves the
 * array keeps it valid, as the pages move or are copied). */
#define KOPT_SYS_POPULATE_AHEAD ((size_t)256 << 10)
void kopt_sys_populate_ahead(void *base, size_t used, size_t cap, size_t *ready);

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
/* The folder holding the lock file at path, flocked too (non-blocking): its
 * fd, -1 when another process holds it (err says so), -2 on other failures. */
int kopt_sys_lock_folder(const char *path, char *err, size_t errlen);

#endif
