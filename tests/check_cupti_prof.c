/* Check suite for core/gpu/cupti_prof.cc on a machine without a GPU: profiling
 * must report "unavailable" with its reason and never crash, whatever is
 * missing (the library, the driver, the probe). Each test runs in its own
 * forked process, so the module's remembered load state starts fresh. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "gpu/cupti_prof.h"

START_TEST(test_missing_library)
{
	char err[700] = "", again[700] = "";
	setenv("KOPT_CUPTI_LIB", "/nonexistent/libcupti.so.13", 1);
	ck_assert_int_eq(kopt_cupti_load(err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "profiling unavailable"));
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/libcupti.so.13"));
	ck_assert_int_eq(kopt_cupti_load(again, sizeof again), -1);
	ck_assert_str_eq(err, again);

	/* everything after a failed load fails with the same sentence */
	struct kopt_cupti_info info;
	ck_assert_int_eq(kopt_cupti_probe(NULL, 0, 0, &info, again, sizeof again), -1);
	ck_assert_str_eq(err, again);
	const char *names[] = {"gpu__time_duration.sum"};
	struct kopt_cupti_session *s = (struct kopt_cupti_session *)&info;
	ck_assert_int_eq(kopt_cupti_session_begin(NULL, names, 1, &s, again, sizeof again), -1);
	ck_assert_ptr_null(s);
	int passes = 7;
	ck_assert_int_eq(kopt_cupti_num_passes(names, 1, &passes, again, sizeof again), -1);
	ck_assert_int_eq(passes, 0);
	kopt_cupti_shutdown();
}
END_TEST

START_TEST(test_disabled)
{
	char err[700] = "";
	setenv("KOPT_CUPTI_LIB", "none", 1);
	ck_assert_int_eq(kopt_cupti_load(err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "KOPT_CUPTI_LIB=none"));
}
END_TEST

START_TEST(test_strerror)
{
	char buf[700];
	kopt_cupti_strerror(35, buf, sizeof buf);
	ck_assert_ptr_nonnull(strstr(buf, "NVreg_RestrictProfilingToAdminUsers"));
	ck_assert_ptr_nonnull(strstr(buf, "administrators"));
	ck_assert_ptr_nonnull(strstr(buf, "(CUPTI error 35)"));
	kopt_cupti_strerror(43, buf, sizeof buf);
	ck_assert_ptr_nonnull(strstr(buf, "MIG"));
	kopt_cupti_strerror(39, buf, sizeof buf);
	ck_assert_ptr_nonnull(strstr(buf, "another profiler"));
	kopt_cupti_strerror(12345, buf, sizeof buf);
	ck_assert_ptr_nonnull(strstr(buf, "CUPTI error 12345"));
	/* truncation is safe */
	char tiny[8];
	kopt_cupti_strerror(35, tiny, sizeof tiny);
	ck_assert_uint_eq(strlen(tiny), 7);
}
END_TEST

/* With the toolkit's CUPTI but no driver, or before a probe, every call
 * fails with a sentence. */
START_TEST(test_no_probe_no_driver)
{
	char err[700] = "";
	unsetenv("KOPT_CUPTI_LIB");
	if (kopt_cupti_load(err, sizeof err) != 0) {
		ck_assert_ptr_nonnull(strstr(err, "profiling unavailable"));
		return; /* no CUPTI here: covered by test_missing_library */
	}
	const char *names[] = {"gpu__time_duration.sum"};
	struct kopt_cupti_session *s = NULL;
	ck_assert_int_eq(kopt_cupti_session_begin((CUcontext)(uintptr_t)0x10, names, 1, &s, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "kopt_cupti_probe"));
	ck_assert_ptr_null(s);
	int ok[1] = {7};
	ck_assert_int_eq(kopt_cupti_check_metrics(names, 1, ok, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "kopt_cupti_probe"));

	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cuda != NULL) {
		dlclose(cuda);
		return; /* a driver is present: the GPU tests cover the probe */
	}
	struct kopt_cupti_info info;
	err[0] = '\0';
	ck_assert_int_eq(kopt_cupti_probe(NULL, 0, 0, &info, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "profiling unavailable"));
	ck_assert_str_eq(info.chip, "");
	kopt_cupti_shutdown();
}
END_TEST

START_TEST(test_default_metrics)
{
	size_t n = 0;
	while (kopt_cupti_default_metrics[n] != NULL)
		n++;
	ck_assert_uint_eq(n, KOPT_CUPTI_DEFAULT_BASE + 1);
	ck_assert_ptr_nonnull(strstr(kopt_cupti_default_metrics[n - 1], "tensor"));
	for (size_t i = 0; i + 1 < n; i++)
		ck_assert_ptr_null(strstr(kopt_cupti_default_metrics[i], "tensor"));
}
END_TEST

static Suite *cupti_suite(void)
{
	Suite *s = suite_create("cupti_prof");
	TCase *tc = tcase_create("unavailable");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_missing_library);
	tcase_add_test(tc, test_disabled);
	tcase_add_test(tc, test_strerror);
	tcase_add_test(tc, test_no_probe_no_driver);
	tcase_add_test(tc, test_default_metrics);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cupti_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
