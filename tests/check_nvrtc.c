/* Check suite for core/compile/nvrtc.c and core/compile/nvrtc_cache.c: real NVRTC compiles
 * for sm_90 (no GPU needed), the ptxas report, compile errors as results,
 * the result byte format and the on-disk cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "compile/kopt_nvrtc.h"

static const char *kernel =
    "extern \"C\" __global__ void __launch_bounds__(128) scale(float *x, float a, int n)\n"
    "{\n"
    "\t__shared__ float tile[256];\n"
    "\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "\ttile[threadIdx.x] = i < n ? x[i] : 0.0f;\n"
    "\t__syncthreads();\n"
    "\tif (i < n)\n"
    "\t\tx[i] = a * tile[(threadIdx.x + 1) % blockDim.x];\n"
    "}\n"
    "extern \"C\" __global__ void other(float *x) { x[0] = 1.0f; }\n";

static struct kopt_nvrtc_job job_for(const char *src, const char *entry, const char *const *opts,
				     size_t n)
{
	struct kopt_nvrtc_job j = {
	    .source = src, .entry = entry, .arch = "sm_90", .options = opts, .n_options = n};
	return j;
}

START_TEST(test_compile_reports_resources)
{
	const char *opts[] = {"-std=c++17", "-DUNUSED=1"};
	struct kopt_nvrtc_job job = job_for(kernel, "scale", opts, 2);
	struct kopt_nvrtc_result res;
	char err[256];
	ck_assert_int_eq(kopt_nvrtc_compile(&job, &res, err, sizeof err), 0);
	ck_assert_msg(res.ok, "compile failed: %s", res.log);
	ck_assert_ptr_nonnull(res.cubin);
	ck_assert_uint_gt(res.cubin_size, 64);
	ck_assert_mem_eq(res.cubin, "\177ELF", 4);
	ck_assert_str_eq(res.lowered, "scale");
	ck_assert_int_gt(res.regs, 0);
	ck_assert_int_le(res.regs, 255);
	ck_assert_int_eq(res.smem_static, 256 * 4);
	ck_assert_int_eq(res.spill_stores, 0);
	ck_assert_int_eq(res.spill_loads, 0);
	ck_assert_int_eq(res.barriers, 1);
	/* __launch_bounds__(128), read back from the cubin */
	ck_assert_int_eq(res.max_threads, 128);
	ck_assert_int_eq(kopt_nvrtc_cubin_max_threads(res.cubin, res.cubin_size, "other"), -1);
	ck_assert(res.compile_s > 0.0);
	ck_assert_ptr_nonnull(strstr(res.log, "Compiling entry function 'scale'"));
	kopt_nvrtc_result_release(&res);

	/* the other kernel of the same source: its own report */
	job.entry = "other";
	ck_assert_int_eq(kopt_nvrtc_compile(&job, &res, err, sizeof err), 0);
	ck_assert(res.ok);
	ck_assert_int_eq(res.smem_static, 0);
	ck_assert_int_eq(res.barriers, 0);
	ck_assert_int_eq(res.max_threads, 1024);
	kopt_nvrtc_result_release(&res);
}
END_TEST

START_TEST(test_errors_are_results)
{
	struct kopt_nvrtc_result res;
	char err[256];
	struct kopt_nvrtc_job job =
	    job_for("extern \"C\" __global__ void k(float *x) { x[0] = 1 }\n", "k", NULL, 0);
	ck_assert_int_eq(kopt_nvrtc_compile(&job, &res, err, sizeof err), 0);
	ck_assert(!res.ok);
	ck_assert_ptr_null(res.cubin);
	ck_assert_ptr_nonnull(strstr(res.log, "error"));
	ck_assert_ptr_nonnull(strstr(res.log, "NVRTC_ERROR_COMPILATION"));
	kopt_nvrtc_result_release(&res);

	job = job_for(kernel, "no_such_kernel", NULL, 0);
	ck_assert_int_eq(kopt_nvrtc_compile(&job, &res, err, sizeof err), 0);
	ck_assert(!res.ok);
	ck_assert_ptr_nonnull(strstr(res.log, "no_such_kernel"));
	kopt_nvrtc_result_release(&res);

	const char *bad[] = {"--no-such-option"};
	job = job_for(kernel, "scale", bad, 1);
	ck_assert_int_eq(kopt_nvrtc_compile(&job, &res, err, sizeof err), 0);
	ck_assert(!res.ok);
	ck_assert_ptr_nonnull(strstr(res.log, "--no-such-option"));
	kopt_nvrtc_result_release(&res);
}
END_TEST

START_TEST(test_parse_log_picks_entry)
{
	const char *log =
	    "ptxas info    : 0 bytes gmem\n"
	    "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
	    "ptxas info    : Function properties for a\n"
	    "ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
	    "ptxas info    : Used 8 registers, used 0 barriers\n"
	    "ptxas info    : Compiling entry function 'ab' for 'sm_90'\n"
	    "ptxas info    : Function properties for ab\n"
	    "ptxas         .     96 bytes stack frame, 40 bytes spill stores, 36 bytes spill "
	    "loads\n"
	    "ptxas info    : Used 255 registers, used 1 barriers, 96 bytes cumulative stack size, "
	    "49152 bytes smem, 400 bytes cmem[0]\n";
	struct kopt_nvrtc_result res;
	kopt_nvrtc_result_init(&res);
	kopt_nvrtc_parse_log(log, "ab", &res);
	ck_assert_int_eq(res.regs, 255);
	ck_assert_int_eq(res.local_bytes, 96);
	ck_assert_int_eq(res.spill_stores, 40);
	ck_assert_int_eq(res.spill_loads, 36);
	ck_assert_int_eq(res.smem_static, 49152);
	ck_assert_int_eq(res.const_bytes, 400);
	kopt_nvrtc_result_init(&res);
	kopt_nvrtc_parse_log(log, "a", &res);
	ck_assert_int_eq(res.regs, 8);
	ck_assert_int_eq(res.smem_static, 0);
	ck_assert_int_eq(res.local_bytes, 8);
	kopt_nvrtc_result_init(&res);
	kopt_nvrtc_parse_log(log, "missing", &res);
	ck_assert_int_eq(res.regs, -1);
}
END_TEST

/* Regression: at -O3 the unpacked log came back empty. unpack wrote the log
 * pointer through an unsigned char ** cast of a char * field (a strict
 * aliasing violation), and the optimiser read the old NULL back. CI runs the
 * unit suites in a Release (-O3) build as well for this reason. */
START_TEST(test_pack_roundtrip)
{
	struct kopt_nvrtc_result a, b;
	kopt_nvrtc_result_init(&a);
	a.ok = 1;
	a.regs = 40;
	a.smem_static = 1024;
	a.compile_s = 1.25;
	a.log = strdup("log text");
	a.lowered = strdup("k");
	a.cubin = malloc(5);
	memcpy(a.cubin, "\0\1\2\3\4", 5);
	a.cubin_size = 5;
	size_t n;
	unsigned char *buf = kopt_nvrtc_result_pack(&a, &n);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(kopt_nvrtc_result_unpack(buf, n, &b), 0);
	ck_assert_int_eq(b.ok, 1);
	ck_assert_int_eq(b.regs, 40);
	ck_assert_int_eq(b.smem_static, 1024);
	ck_assert_int_eq(b.spill_loads, -1);
	ck_assert(b.compile_s == 1.25);
	ck_assert_str_eq(b.log, "log text");
	ck_assert_str_eq(b.lowered, "k");
	ck_assert_uint_eq(b.cubin_size, 5);
	ck_assert_mem_eq(b.cubin, "\0\1\2\3\4", 5);
	kopt_nvrtc_result_release(&b);
	/* truncated or foreign bytes are refused */
	for (size_t cut = 0; cut < n; cut += 7)
		ck_assert_int_eq(kopt_nvrtc_result_unpack(buf, cut, &b), -1);
	buf[0] = 'X';
	ck_assert_int_eq(kopt_nvrtc_result_unpack(buf, n, &b), -1);
	free(buf);
	kopt_nvrtc_result_release(&a);
}
END_TEST

START_TEST(test_cache_hit_on_second_call)
{
	char dir[] = "/tmp/kopt-check-nvrtc-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	const char *opts[] = {"-DX=1"};
	struct kopt_nvrtc_job job = job_for(kernel, "scale", opts, 1);
	char k1[65], k2[65];
	kopt_nvrtc_cache_key(&job, k1);
	kopt_nvrtc_cache_key(&job, k2);
	ck_assert_str_eq(k1, k2);
	const char *opts2[] = {"-DX=2"};
	struct kopt_nvrtc_job job2 = job_for(kernel, "scale", opts2, 1);
	kopt_nvrtc_cache_key(&job2, k2);
	ck_assert_str_ne(k1, k2);
	job2 = job_for(kernel, "scale", opts, 1);
	job2.arch = "sm_90a";
	kopt_nvrtc_cache_key(&job2, k2);
	ck_assert_str_ne(k1, k2);
	job2 = job_for(kernel, "scale", opts, 1);
	job2.salt = "digest of an included header";
	kopt_nvrtc_cache_key(&job2, k2);
	ck_assert_str_ne(k1, k2);

	struct kopt_nvrtc_result r1, r2;
	int cached = -1;
	char err[256];
	ck_assert_int_eq(kopt_nvrtc_compile_cached(&job, dir, &r1, &cached, err, sizeof err), 0);
	ck_assert_int_eq(cached, 0);
	ck_assert(r1.ok);
	ck_assert_int_eq(kopt_nvrtc_compile_cached(&job, dir, &r2, &cached, err, sizeof err), 0);
	ck_assert_int_eq(cached, 1);
	ck_assert(r2.ok);
	ck_assert_int_eq(r2.regs, r1.regs);
	ck_assert_int_eq(r2.smem_static, r1.smem_static);
	ck_assert_int_eq(r2.max_threads, r1.max_threads);
	ck_assert_str_eq(r2.log, r1.log);
	ck_assert_uint_eq(r2.cubin_size, r1.cubin_size);
	ck_assert_mem_eq(r2.cubin, r1.cubin, r1.cubin_size);
	kopt_nvrtc_result_release(&r1);
	kopt_nvrtc_result_release(&r2);

	/* compile errors are cached too */
	job = job_for("__global__ void broken( {}\n", NULL, NULL, 0);
	ck_assert_int_eq(kopt_nvrtc_compile_cached(&job, dir, &r1, &cached, err, sizeof err), 0);
	ck_assert(!r1.ok && cached == 0);
	ck_assert_int_eq(kopt_nvrtc_compile_cached(&job, dir, &r2, &cached, err, sizeof err), 0);
	ck_assert(!r2.ok && cached == 1);
	ck_assert_str_eq(r2.log, r1.log);
	kopt_nvrtc_result_release(&r1);
	kopt_nvrtc_result_release(&r2);

	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *nvrtc_suite(void)
{
	Suite *s = suite_create("nvrtc");
	TCase *tc = tcase_create("compile");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_compile_reports_resources);
	tcase_add_test(tc, test_errors_are_results);
	tcase_add_test(tc, test_parse_log_picks_entry);
	tcase_add_test(tc, test_pack_roundtrip);
	tcase_add_test(tc, test_cache_hit_on_second_call);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(nvrtc_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
