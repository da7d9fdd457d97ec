/* Check suite for core/pool.c: the Lua state's allocator (size-class free
 * lists for small blocks, malloc for large ones). Blocks keep their contents
 * across resizes within a class, across classes and across the small/large
 * boundary; a freed small block is handed out again for its class; hundreds
 * of slabs' worth of blocks are all distinct and aligned; and a Lua
 * state runs on the pool. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "pool.h"

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

START_TEST(test_resize_keeps_contents)
{
	struct kopt_pool *pool = kopt_pool_new();
	ck_assert_ptr_nonnull(pool);
	/* sizes: inside one class, across classes, small to large and back */
	static const size_t sizes[] = {1,	8,	16,	17,	 40,	 200,
				       KOPT_POOL_SMALL_MAX, KOPT_POOL_SMALL_MAX + 1, 9000, 300000, 900000, 100, 3};
	size_t n = sizeof sizes / sizeof sizes[0];
	unsigned char *p = kopt_pool_realloc(pool, NULL, 5 /* a type tag */, sizes[0]);
	fill(p, sizes[0], 1);
	for (size_t i = 1; i < n; i++) {
		size_t keep = sizes[i - 1] < sizes[i] ? sizes[i - 1] : sizes[i];
		p = kopt_pool_realloc(pool, p, sizes[i - 1], sizes[i]);
		ck_assert_ptr_nonnull(p);
		ck_assert_msg(same(p, keep, 1), "contents lost resizing %zu to %zu", sizes[i - 1],
			      sizes[i]);
		fill(p, sizes[i], 1);
	}
	ck_assert_ptr_null(kopt_pool_realloc(pool, p, sizes[n - 1], 0));
	ck_assert_ptr_null(kopt_pool_realloc(pool, NULL, 0, 0));
	kopt_pool_free(pool);
}
END_TEST

START_TEST(test_reuse_by_class)
{
#ifdef __SANITIZE_ADDRESS__
	return; /* the pool hands every block to malloc there */
#endif
	struct kopt_pool *pool = kopt_pool_new();
	void *a = kopt_pool_realloc(pool, NULL, 0, 40);
	void *b = kopt_pool_realloc(pool, NULL, 0, 40);
	ck_assert_ptr_ne(a, b);
	kopt_pool_realloc(pool, a, 40, 0);
	ck_assert_ptr_eq(kopt_pool_realloc(pool, NULL, 0, 33), a); /* 33..48 bytes: one class */
	void *c = kopt_pool_realloc(pool, NULL, 0, 64);
	ck_assert_ptr_ne(c, a);
	ck_assert_ptr_ne(c, b);
	/* a resize within the class keeps the block */
	ck_assert_ptr_eq(kopt_pool_realloc(pool, b, 40, 48), b);
	kopt_pool_free(pool);
}
END_TEST

/* Blocks of every small size over many slabs: distinct, 16-byte aligned, and
 * intact after all of them are written. */
START_TEST(test_many_blocks)
{
	struct kopt_pool *pool = kopt_pool_new();
	enum { N = 40000 };
	unsigned char **blocks = malloc(N * sizeof *blocks);
	ck_assert_ptr_nonnull(blocks);
	for (size_t i = 0; i < N; i++) {
		size_t size = 1 + i * 37 % KOPT_POOL_SMALL_MAX;
		blocks[i] = kopt_pool_realloc(pool, NULL, 0, size);
		ck_assert_ptr_nonnull(blocks[i]);
		ck_assert_uint_eq((uintptr_t)blocks[i] % 16, 0);
		fill(blocks[i], size, (unsigned)i);
	}
	for (size_t i = 0; i < N; i++)
		ck_assert_msg(same(blocks[i], 1 + i * 37 % KOPT_POOL_SMALL_MAX, (unsigned)i),
			      "block %zu overwritten", i);
	for (size_t i = 0; i < N; i += 2)
		kopt_pool_realloc(pool, blocks[i], 1 + i * 37 % KOPT_POOL_SMALL_MAX, 0);
	for (size_t i = 1; i < N; i += 2) {
		ck_assert(same(blocks[i], 1 + i * 37 % KOPT_POOL_SMALL_MAX, (unsigned)i));
		kopt_pool_realloc(pool, blocks[i], 1 + i * 37 % KOPT_POOL_SMALL_MAX, 0);
	}
	free(blocks);
	kopt_pool_free(pool);
}
END_TEST

START_TEST(test_lua_state)
{
	struct kopt_pool *pool = kopt_pool_new();
	lua_State *L = lua_newstate(kopt_pool_realloc, pool);
	ck_assert_ptr_nonnull(L);
	luaL_openlibs(L);
	const char *code = "local t = {} for i = 1, 100000 do t[i] = { i, tostring(i) } end "
			   "for i = 1, 100000, 2 do t[i] = nil end collectgarbage() "
			   "local s = 0 for i = 2, 100000, 2 do s = s + t[i][1] + #t[i][2] end "
			   "return s";
	ck_assert_int_eq(luaL_dostring(L, code), LUA_OK);
	ck_assert_int_eq((long long)lua_tointeger(L, -1), 2500050000LL + 244450);
	lua_close(L);
	kopt_pool_free(pool);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_resize_keeps_contents);
	tcase_add_test(tc, test_reuse_by_class);
	tcase_add_test(tc, test_many_blocks);
	tcase_add_test(tc, test_lua_state);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
