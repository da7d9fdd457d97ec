#ifndef KOPT_POOL_H
#define KOPT_POOL_H
#include <stddef.h>

/* The Lua state's memory: small blocks (up to KOPT_POOL_SMALL_MAX bytes: the
 * lists of an expansion's moves, a kilobyte each, among them) come from free
 * lists by size class, carved from 256 KiB slabs that are populated
 * in one call each (kopt_sys_populate); larger blocks come from malloc, and a
 * large block that grows by 256 KiB or more has its new part populated the
 * same way.
 *
 * Why: a search keeps 10^5 live tables and makes and drops thousands per
 * iteration. Through glibc malloc, a tenth of an MCGS iteration went to its
 * slow paths (consolidating fast bins, unlinking chunks) and more to page
 * faults of the growing heap, 11 us each on the virtual machine of
 * docs/SEARCH.md's timings. A free list needs no header, as Lua passes every
 * block's size back when it frees or resizes it.
 *
 * The cost: small blocks are rounded up to 16 bytes, and their memory is
 * never returned to malloc before kopt_pool_free (a block freed in one class
 * serves only that class again). Not thread-safe: one pool belongs to one
 * Lua state. Built with AddressSanitizer, every block comes from malloc. */

#define KOPT_POOL_SMALL_MAX 4096

struct kopt_pool;

/* A new empty pool, or NULL when out of memory. Caller frees with
 * kopt_pool_free after closing the Lua state that uses it. */
struct kopt_pool *kopt_pool_new(void);

/* Frees the pool and its slabs; every block it handed out must have been
 * given back first (lua_close gives back all of a state's). */
void kopt_pool_free(struct kopt_pool *pool);

/* A lua_Alloc on a pool (ud): with nsize 0 frees ptr (NULL may be given)
 * and returns NULL; else resizes ptr, whose size is osize (or allocates, when
 * ptr is NULL: osize is then a type tag, not a size), keeping the first
 * min(osize, nsize) bytes. NULL when out of memory, ptr then untouched. */
void *kopt_pool_realloc(void *ud, void *ptr, size_t osize, size_t nsize);

#endif
