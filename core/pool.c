/* Size-class free lists for the Lua state's small blocks (pool.h says why). */
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "sys.h"

#define CLASS_BYTES 16 /* Lua's strictest alignment (a long double) and the class step */
#define N_CLASSES (KOPT_POOL_SMALL_MAX / CLASS_BYTES + 1)
#define SLAB_BYTES ((size_t)256 << 10)
/* a large block's growth at least this big is populated in one call */
#define POPULATE_MIN ((size_t)256 << 10)

/* Under AddressSanitizer every block goes to malloc, so that the sanitizer
 * run checks the Lua state's blocks as it did before the pool. */
#ifdef __SANITIZE_ADDRESS__
#define POOL_BYPASS 1
#else
#define POOL_BYPASS 0
#endif

/* The start of a slab: the link to the slab before it (for kopt_pool_free),
 * padded to keep the blocks after it aligned. */
struct slab {
	struct slab *prev;
	char pad[CLASS_BYTES - sizeof(struct slab *)];
};

struct kopt_pool {
	void *free[N_CLASSES]; /* class c: blocks of c * CLASS_BYTES, linked through their first word */
	char *next, *end;      /* the unused part of the newest slab */
	struct slab *slabs;
};

/* The class of a small size (1 .. N_CLASSES - 1); 0 for a large one. */
static size_t class_of(size_t size)
{
	return size <= KOPT_POOL_SMALL_MAX ? (size + CLASS_BYTES - 1) / CLASS_BYTES : 0;
}

struct kopt_pool *kopt_pool_new(void)
{
	return calloc(1, sizeof(struct kopt_pool));
}

void kopt_pool_free(struct kopt_pool *pool)
{
	if (pool == NULL)
		return;
	while (pool->slabs != NULL) {
		struct slab *prev = pool->slabs->prev;
		free(pool->slabs);
		pool->slabs = prev;
	}
	free(pool);
}

static void *take(struct kopt_pool *pool, size_t cls)
{
	void *block = pool->free[cls];
	if (block != NULL) {
		memcpy(&pool->free[cls], block, sizeof(void *));
		return block;
	}
	size_t bytes = cls * CLASS_BYTES;
	if ((size_t)(pool->end - pool->next) < bytes) {
		/* what is left of the old slab (less than one block) is dropped */
		struct slab *s = malloc(SLAB_BYTES);
		if (s == NULL)
			return NULL;
		kopt_sys_populate(s, SLAB_BYTES);
		s->prev = pool->slabs;
		pool->slabs = s;
		pool->next = (char *)(s + 1);
		pool->end = (char *)s + SLAB_BYTES;
	}
	block = pool->next;
	pool->next += bytes;
	return block;
}

static void give_back(struct kopt_pool *pool, void *block, size_t cls)
{
	memcpy(block, &pool->free[cls], sizeof(void *));
	pool->free[cls] = block;
}

static void *large_realloc(void *ptr, size_t osize, size_t nsize)
{
	void *p = realloc(ptr, nsize);
	size_t old = ptr != NULL ? osize : 0;
	if (p != NULL && nsize >= old + POPULATE_MIN)
		kopt_sys_populate((char *)p + old, nsize - old);
	return p;
}

void *kopt_pool_realloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct kopt_pool *pool = ud;
	if (POOL_BYPASS) {
		if (nsize == 0) {
			free(ptr);
			return NULL;
		}
		return realloc(ptr, nsize);
	}
	size_t ocls = ptr != NULL ? class_of(osize) : 0;
	if (nsize == 0) {
		if (ocls != 0)
			give_back(pool, ptr, ocls);
		else
			free(ptr);
		return NULL;
	}
	size_t ncls = class_of(nsize);
	if (ptr != NULL && ocls == ncls && ocls != 0)
		return ptr;
	if (ocls == 0 && ncls == 0)
		return large_realloc(ptr, osize, nsize);
	void *block = ncls != 0 ? take(pool, ncls) : large_realloc(NULL, 0, nsize);
	if (block == NULL || ptr == NULL)
		return block;
	memcpy(block, ptr, osize < nsize ? osize : nsize);
	if (ocls != 0)
		give_back(pool, ptr, ocls);
	else
		free(ptr);
	return block;
}
