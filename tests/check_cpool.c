/* Check suite for core/compile/cpool.c: results in completion order, a worker killed
 * mid-compile or past its time limit becomes a failed result and is
 * replaced, cache hits answered at submit, closing with jobs in flight.
 * Real NVRTC compiles for sm_90; no GPU needed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "compile/cpool.h"
#include "sys.h"

static const char *fast_src =
    "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n";
static char *slow_src;

/* A long straight-line kernel: about a second of NVRTC on a 2-core machine,
 * a few tenths on a fast one; the fast kernel takes a few milliseconds. */
static void make_slow(void)
{
	size_t cap = 200 * 100 + 256, n = 0;
	slow_src = malloc(cap);
	n += (size_t)snprintf(
	    slow_src + n, cap - n,
	    "extern \"C\" __global__ void k(float *x) {\n\tfloat a = x[threadIdx.x];\n");
	for (int i = 1; i <= 100; i++)
		n += (size_t)snprintf(
		    slow_src + n, cap - n,
		    "\ta = sinf(a * 1.0001f + %d.0f) * x[(threadIdx.x + %d) & 1023];\n", i, i);
	snprintf(slow_src + n, cap - n, "\tx[threadIdx.x] = a;\n}\n");
}

static struct kopt_nvrtc_job job_of(const char *src)
{
	struct kopt_nvrtc_job j = {.source = src, .entry = "k", .arch = "sm_90"};
	return j;
}

START_TEST(test_completion_order)
{
	char err[256];
	struct kopt_cpool *p = kopt_cpool_new(2, NULL, 0, err, sizeof err);
	ck_assert_msg(p != NULL, "%s", err);
	struct kopt_nvrtc_job slow = job_of(slow_src), fast = job_of(fast_src);
	long a = kopt_cpool_submit(p, &slow, err, sizeof err);
	long b = kopt_cpool_submit(p, &fast, err, sizeof err);
	ck_assert(a > 0 && b > 0 && a != b);
	ck_assert_uint_eq(kopt_cpool_pending(p), 2);
	long id;
	int cached;
	struct kopt_nvrtc_result res;
	ck_assert_int_eq(kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err), 1);
	ck_assert_int_eq(id, b); /* the fast one first */
	ck_assert(res.ok && !cached);
	kopt_nvrtc_result_release(&res);
	/* a short wait that ends before the slow compile */
	double t0 = kopt_sys_now();
	int r = kopt_cpool_wait_any(p, 0.01, &id, &res, &cached, err, sizeof err);
	if (r == 0) {
		ck_assert(kopt_sys_now() - t0 < 0.5);
		ck_assert_uint_eq(kopt_cpool_pending(p), 1);
		r = kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err);
	}
	ck_assert_int_eq(r, 1);
	ck_assert_int_eq(id, a);
	ck_assert(res.ok);
	ck_assert_int_gt(res.regs, 0);
	kopt_nvrtc_result_release(&res);
	ck_assert_int_eq(kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err), 0);
	ck_assert_uint_eq(kopt_cpool_pending(p), 0);
	kopt_cpool_free(p);
}
END_TEST

START_TEST(test_killed_worker_is_replaced)
{
	char err[256];
	struct kopt_cpool *p = kopt_cpool_new(1, NULL, 0, err, sizeof err);
	ck_assert_msg(p != NULL, "%s", err);
	struct kopt_nvrtc_job slow = job_of(slow_src), fast = job_of(fast_src);
	long before = kopt_cpool_worker_pid(p, 0);
	ck_assert_int_gt(before, 0);
	long a = kopt_cpool_submit(p, &slow, err, sizeof err);
	long b = kopt_cpool_submit(p, &fast, err, sizeof err); /* queued behind a */
	ck_assert_int_eq(kill((pid_t)before, SIGKILL), 0);
	long id;
	int cached;
	struct kopt_nvrtc_result res;
	ck_assert_int_eq(kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err), 1);
	ck_assert_int_eq(id, a);
	ck_assert(!res.ok);
	ck_assert_msg(strstr(res.log, "signal 9") != NULL, "log: %s", res.log);
	kopt_nvrtc_result_release(&res);
	ck_assert_int_eq(kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err), 1);
	ck_assert_int_eq(id, b);
	ck_assert_msg(res.ok, "after the restart: %s", res.log);
	kopt_nvrtc_result_release(&res);
	long after = kopt_cpool_worker_pid(p, 0);
	ck_assert(after > 0 && after != before);
	kopt_cpool_free(p);
}
END_TEST

START_TEST(test_job_timeout)
{
	char err[256];
	struct kopt_cpool *p = kopt_cpool_new(1, NULL, 0.05, err, sizeof err);
	ck_assert_msg(p != NULL, "%s", err);
	struct kopt_nvrtc_job slow = job_of(slow_src), fast = job_of(fast_src);
	long a = kopt_cpool_submit(p, &slow, err, sizeof err);
	long id;
	int cached;
	struct kopt_nvrtc_result res;
	double t0 = kopt_sys_now();
	ck_assert_int_eq(kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err), 1);
	ck_assert_int_eq(id, a);
	ck_assert(!res.ok);
	ck_assert_msg(strstr(res.log, "timed out") != NULL, "log: %s", res.log);
	ck_assert(kopt_sys_now() - t0 < 5.0);
	kopt_nvrtc_result_release(&res);
	kopt_cpool_free(p);
	/* the same fast job well within a limit */
	p = kopt_cpool_new(1, NULL, 60, err, sizeof err);
	long b = kopt_cpool_submit(p, &fast, err, sizeof err);
	ck_assert_int_eq(kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err), 1);
	ck_assert(id == b && res.ok);
	kopt_nvrtc_result_release(&res);
	kopt_cpool_free(p);
}
END_TEST

START_TEST(test_cache_hit_at_submit)
{
	char dir[] = "/tmp/kopt-check-cpool-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char err[256];
	struct kopt_cpool *p = kopt_cpool_new(1, dir, 0, err, sizeof err);
	ck_assert_msg(p != NULL, "%s", err);
	struct kopt_nvrtc_job fast = job_of(fast_src);
	long id;
	int cached;
	struct kopt_nvrtc_result res;
	kopt_cpool_submit(p, &fast, err, sizeof err);
	ck_assert_int_eq(kopt_cpool_wait_any(p, -1, &id, &res, &cached, err, sizeof err), 1);
	ck_assert(res.ok && !cached);
	size_t size = res.cubin_size;
	kopt_nvrtc_result_release(&res);
	/* the worker stored it; a second submit needs no worker: kill it first */
	ck_assert_int_eq(kill((pid_t)kopt_cpool_worker_pid(p, 0), SIGKILL), 0);
	long b = kopt_cpool_submit(p, &fast, err, sizeof err);
	ck_assert_int_eq(kopt_cpool_wait_any(p, 0, &id, &res, &cached, err, sizeof err), 1);
	ck_assert(id == b && res.ok && cached);
	ck_assert_uint_eq(res.cubin_size, size);
	kopt_nvrtc_result_release(&res);
	kopt_cpool_free(p);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_free_with_jobs_in_flight)
{
	char err[256];
	struct kopt_cpool *p = kopt_cpool_new(2, NULL, 0, err, sizeof err);
	ck_assert_msg(p != NULL, "%s", err);
	struct kopt_nvrtc_job slow = job_of(slow_src);
	for (int i = 0; i < 4; i++)
		ck_assert_int_gt(kopt_cpool_submit(p, &slow, err, sizeof err), 0);
	double t0 = kopt_sys_now();
	kopt_cpool_free(p);
	ck_assert(kopt_sys_now() - t0 < 2.0);
	ck_assert_ptr_null(kopt_cpool_new(0, NULL, 0, err, sizeof err));
	ck_assert_ptr_nonnull(strstr(err, "at least one"));
}
END_TEST

static Suite *cpool_suite(void)
{
	Suite *s = suite_create("cpool");
	TCase *tc = tcase_create("pool");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_completion_order);
	tcase_add_test(tc, test_killed_worker_is_replaced);
	tcase_add_test(tc, test_job_timeout);
	tcase_add_test(tc, test_cache_hit_at_submit);
	tcase_add_test(tc, test_free_with_jobs_in_flight);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	make_slow();
	SRunner *sr = srunner_create(cpool_suite());
	/* No fork: the pool's children are the processes under test. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	free(slow_src);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
