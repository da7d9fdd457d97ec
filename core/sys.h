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

/* SIGINT/SIGTERM set a flag the engine polls, so a run stops between
 * evaluations with everything flushed; a second SIGINT kills at once. */
void kopt_sys_install_signal_handlers(void);
int kopt_sys_interrupted(void);
void kopt_sys_clear_interrupt(void);

#endif
