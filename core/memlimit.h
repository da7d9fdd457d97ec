/* A ceiling on the Lua state's memory (KOPT_MEMORY_LIMIT): a strategy that
 * grows without bound gets Lua's "not enough memory" error, which the engine
 * reports as the strategy's, and the run is written, instead of the machine
 * swapping until the kernel kills kopt with nothing but the event log left.
 * The limit wraps the pool's allocator (pool.h). After the error the engine
 * grants a reserve once (kopt_memlimit_grant), since the strategy's data may
 * still be reachable while the summary and results.json are written. */
#ifndef KOPT_MEMLIMIT_H
#define KOPT_MEMLIMIT_H
#include <stddef.h>

struct kopt_pool;

/* Refused retries, with no room won back between them, after which every
 * request must leave a sixteenth of the limit free (memlimit.c). */
#define KOPT_MEMLIMIT_STRIKES 8

struct kopt_memlimit {
	struct kopt_pool *pool;
	size_t used;	/* bytes the state holds */
	size_t limit;	/* 0: none; the base limit plus the reserve once granted */
	size_t base;	/* the limit asked for (KOPT_MEMORY_LIMIT or the default) */
	size_t reserve; /* granted once after the limit was hit, until rearmed */
	int hit;	/* an allocation was refused */
	/* the last request refused, whose retry after Lua's collection must
	 * leave a margin; retries refused in a row, and the squeeze they set
	 * off (memlimit.c) */
	int refused;
	void *refused_ptr;
	size_t refused_osize, refused_nsize;
	int strikes, squeeze;
	int granted;
};

/* A lua_Alloc (ud: struct kopt_memlimit) over kopt_pool_realloc. */
void *kopt_memlimit_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

/* "8G", "512M", "65536", "0" (none), "off" -> bytes. 0 on success, -1 on
 * bad text. */
int kopt_memlimit_parse(const char *text, size_t *bytes);

/* The default: three quarters of the machine's physical memory (0 when it
 * cannot be read). */
size_t kopt_memlimit_default(void);

/* Raises the limit by the reserve, once; returns 1 when it did. */
int kopt_memlimit_grant(struct kopt_memlimit *m);

/* Back to the base limit, with the reserve grantable again, when the state
 * holds less than the base (a finished run's data collected: the next run
 * of a suite gets its own reserve); returns 1 when it did. */
int kopt_memlimit_rearm(struct kopt_memlimit *m);

#endif
