/* Check suite for core/cubin.c: mutable module globals listed from CUBINs
 * that NVRTC compiles here for sm_90 (no GPU needed), and hostile images. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "compile/kopt_nvrtc.h"
#include "cubin.h"

static int globals_of(const char *src, struct kopt_cubin_global *g, int max)
{
	struct kopt_nvrtc_job job = {.source = src, .entry = "k", .arch = "sm_90"};
	struct kopt_nvrtc_result res;
	char err[256];
	ck_assert_int_eq(kopt_nvrtc_compile(&job, &res, err, sizeof err), 0);
	ck_assert_msg(res.ok, "compile failed: %s", res.log);
	int n = kopt_cubin_globals(res.cubin, res.cubin_size, g, max, err, sizeof err);
	ck_assert_msg(n >= 0, "%s", err);
	kopt_nvrtc_result_release(&res);
	return n;
}

static const struct kopt_cubin_global *find(const struct kopt_cubin_global *g, int n,
					    const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(g[i].name, name) == 0)
			return &g[i];
	return NULL;
}

START_TEST(test_device_variables_are_listed)
{
	const char *src = "__device__ float memo[1024];\n"
			  "__device__ unsigned calls = 7;\n"
			  "__constant__ float coeffs[16];\n"
			  "extern \"C\" __global__ void k(float *y) {\n"
			  "  unsigned c = atomicAdd(&calls, 1u);\n"
			  "  if (c > 0) { y[threadIdx.x] = memo[threadIdx.x]; return; }\n"
			  "  memo[threadIdx.x] = y[threadIdx.x] * coeffs[threadIdx.x % 16];\n"
			  "}\n";
	struct kopt_cubin_global g[8];
	int n = globals_of(src, g, 8);
	ck_assert_int_eq(n, 2);
	const struct kopt_cubin_global *memo = find(g, n, "memo"), *calls = find(g, n, "calls");
	ck_assert_ptr_nonnull(memo);
	ck_assert_ptr_nonnull(calls);
	ck_assert_uint_eq(memo->size, 4096);
	ck_assert_int_eq(memo->initialised, 0);
	ck_assert_uint_eq(calls->size, 4);
	ck_assert_int_eq(calls->initialised, 1);
	ck_assert_ptr_null(find(g, n, "coeffs")); /* constant memory is read-only */
}
END_TEST

START_TEST(test_stateless_kernel_has_none)
{
	const char *src = "__constant__ float c[4];\n"
			  "extern \"C\" __global__ void k(float *y) {\n"
			  "  __shared__ float s[32];\n"
			  "  s[threadIdx.x % 32] = c[0];\n"
			  "  __syncthreads();\n"
			  "  y[threadIdx.x] = s[(threadIdx.x + 1) % 32];\n"
			  "}\n";
	struct kopt_cubin_global g[4];
	ck_assert_int_eq(globals_of(src, g, 4), 0);
}
END_TEST

START_TEST(test_count_exceeds_capacity)
{
	const char *src = "__device__ int a, b, c;\n"
			  "extern \"C\" __global__ void k(int *y) { y[0] = a++ + b++ + c++; }\n";
	struct kopt_cubin_global g[1];
	ck_assert_int_eq(globals_of(src, g, 1), 3);
}
END_TEST

/* A variable whose name does not fit is listed as too long, never left
 * out: a variable kopt cannot follow would keep state unseen. */
START_TEST(test_long_name_is_listed)
{
	char src[4096], name[1200];
	memset(name, 'v', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	snprintf(src, sizeof src,
		 "__device__ int %s;\n"
		 "extern \"C\" __global__ void k(int *y) { y[0] = %s++; }\n",
		 name, name);
	struct kopt_cubin_global g[2];
	ck_assert_int_eq(globals_of(src, g, 2), 1);
	ck_assert_int_eq(g[0].too_long, 1);
	ck_assert_str_eq(g[0].name, "");
}
END_TEST

/* The section walk that compile/nvrtc.c shares: a named section is found
 * with its bytes inside the image, an absent one is not. */
START_TEST(test_section_find)
{
	struct kopt_nvrtc_job job = {.source = "extern \"C\" __global__ void k(float *y) "
					       "{ y[threadIdx.x] = 1.0f; }\n",
				     .entry = "k",
				     .arch = "sm_90"};
	struct kopt_nvrtc_result res;
	char err[256];
	ck_assert_int_eq(kopt_nvrtc_compile(&job, &res, err, sizeof err), 0);
	ck_assert_msg(res.ok, "compile failed: %s", res.log);
	struct kopt_elf e;
	struct kopt_elf_section s;
	ck_assert_int_eq(kopt_elf_open(&e, res.cubin, res.cubin_size), 0);
	ck_assert_int_eq(kopt_elf_find(&e, ".nv.info.k", &s), 0);
	ck_assert_ptr_nonnull(s.data);
	ck_assert(s.data >= res.cubin && s.data + s.size <= res.cubin + res.cubin_size);
	ck_assert_str_eq(kopt_elf_section_name(&e, &s), ".nv.info.k");
	ck_assert_int_eq(kopt_elf_find(&e, ".nv.info.absent", &s), 1);
	ck_assert_int_eq(kopt_elf_section(&e, e.shnum, &s), -1);
	ck_assert_int_eq(kopt_elf_open(&e, res.cubin, 10), -1);
	ck_assert_int_eq(kopt_elf_open(&e, res.cubin, 64), -2); /* headers past the end */
	kopt_nvrtc_result_release(&res);
}
END_TEST

START_TEST(test_hostile_images_are_refused)
{
	struct kopt_cubin_global g[2];
	char err[128];
	unsigned char junk[256];
	memset(junk, 0xff, sizeof junk);
	ck_assert_int_eq(kopt_cubin_globals(junk, sizeof junk, g, 2, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "ELF"));
	/* a valid magic with section headers pointing past the end */
	memset(junk, 0, sizeof junk);
	memcpy(junk, "\177ELF\002\001", 6);
	junk[40] = 0xf0;		/* e_shoff = 240 */
	junk[58] = 64;			/* e_shentsize */
	junk[60] = 4;			/* e_shnum */
	ck_assert_int_eq(kopt_cubin_globals(junk, sizeof junk, g, 2, err, sizeof err), -1);
	ck_assert_int_eq(kopt_cubin_globals(junk, 10, g, 2, err, sizeof err), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cubin");
	TCase *tc = tcase_create("globals");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_device_variables_are_listed);
	tcase_add_test(tc, test_stateless_kernel_has_none);
	tcase_add_test(tc, test_count_exceeds_capacity);
	tcase_add_test(tc, test_long_name_is_listed);
	tcase_add_test(tc, test_hostile_images_are_refused);
	tcase_add_test(tc, test_section_find);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
