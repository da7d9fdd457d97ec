/* Check suite for core/worker/data.c: reading a run request's argument list
 * (kopt_worker_setup_args) and building a launch's parameters from it. Only
 * scalar arguments here, which need no GPU.
 *
 * Regression: the list's signature, which decides whether the buffers of the
 * previous request are kept, was cut at 4096 bytes without notice. Two lists
 * that differed only past the cut (one more argument, say) compared equal,
 * so the second kept the first's argument array and wrote past its end. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "worker/data.h"

/* A request of n scalar arguments whose names are long enough that the
 * signature of 40 of them does not fit. */
static void scalars(struct kopt_msg *m, int n)
{
	char key[64], name[128];
	memset(name, 'x', 119);
	for (int i = 0; i < n; i++) {
		snprintf(name + 119, sizeof name - 119, "%03d", i % 1000);
		snprintf(key, sizeof key, "a%d.name", i + 1);
		kopt_msg_put_cstr(m, key, name);
		snprintf(key, sizeof key, "a%d.kind", i + 1);
		kopt_msg_put_cstr(m, key, "scalar");
		snprintf(key, sizeof key, "a%d.type", i + 1);
		kopt_msg_put_cstr(m, key, "i32");
		snprintf(key, sizeof key, "a%d.value", i + 1);
		kopt_msg_put_int(m, key, i);
	}
}

static int setup(struct worker *w, int n, char *err, size_t errlen)
{
	struct kopt_msg m = {0};
	struct kopt_msgview v;
	scalars(&m, n);
	ck_assert_int_eq(m.failed, 0);
	ck_assert_int_eq(kopt_msgview_parse(&v, m.buf, m.len, err, errlen), 0);
	int rc = kopt_worker_setup_args(w, n, &v, err, errlen);
	kopt_msgview_release(&v);
	kopt_msg_release(&m);
	return rc;
}

START_TEST(test_long_list_changes_shape)
{
	struct worker *w = calloc(1, sizeof *w);
	char err[256] = "";
	ck_assert_ptr_nonnull(w);
	ck_assert_msg(setup(w, 40, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(w->nargs, 40);
	ck_assert_msg(setup(w, 41, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(w->nargs, 41);
	ck_assert_int_eq((int)w->args[40].ivalue, 40);
	/* the same list again keeps working, its values refreshed */
	ck_assert_msg(setup(w, 41, err, sizeof err) == 0, "%s", err);
	ck_assert_int_eq(w->nargs, 41);
	kopt_worker_free_problem(w);
	free(w);
}
END_TEST

START_TEST(test_short_list_is_kept)
{
	struct worker *w = calloc(1, sizeof *w);
	char err[256] = "";
	ck_assert_ptr_nonnull(w);
	ck_assert_msg(setup(w, 3, err, sizeof err) == 0, "%s", err);
	struct warg *first = w->args;
	ck_assert_msg(setup(w, 3, err, sizeof err) == 0, "%s", err);
	ck_assert_ptr_eq(w->args, first);
	kopt_worker_free_problem(w);
	free(w);
}
END_TEST

/* Regression: a pipeline kernel's argument selection that names no kernel
 * parameter failed with w->log untouched, so the reference's run ended in
 * "error" with no message at all. */
START_TEST(test_bad_selection_says_why)
{
	struct worker *w = calloc(1, sizeof *w);
	char err[256] = "";
	ck_assert_ptr_nonnull(w);
	ck_assert_msg(setup(w, 3, err, sizeof err) == 0, "%s", err);
	struct inputset set = {0};
	struct wparams p;
	ck_assert_int_eq(kopt_worker_build_params_sel(w, &set, &p, 1, "3,1"), 0);
	kopt_worker_free_params(&p);
	w->log[0] = '\0';
	ck_assert_int_eq(kopt_worker_build_params_sel(w, &set, &p, 1, "2,5"), -1);
	kopt_worker_free_params(&p);
	ck_assert_msg(strstr(w->log, "'2,5'") && strstr(w->log, "5 is not a kernel parameter"),
		      "log: '%s'", w->log);
	w->log[0] = '\0';
	ck_assert_int_eq(kopt_worker_build_params_sel(w, &set, &p, 1, "2;1"), -1);
	kopt_worker_free_params(&p);
	ck_assert_msg(strstr(w->log, "'2;1'") != NULL, "log: '%s'", w->log);
	kopt_worker_free_problem(w);
	free(w);
}
END_TEST

/* Size lists from the wire ("4096,64"): digits and single commas only, so
 * "-1" cannot wrap to SIZE_MAX and "2,1," is not read as "2,1". */
START_TEST(test_size_lists_are_strict)
{
	size_t v[4];
	ck_assert_int_eq(kopt_worker_parse_sizes("4096,64", v, 4), 2);
	ck_assert_uint_eq(v[0], 4096);
	ck_assert_uint_eq(v[1], 64);
	ck_assert_int_eq(kopt_worker_parse_sizes("", v, 4), 0);
	ck_assert_int_eq(kopt_worker_parse_sizes("7", v, 4), 1);
	ck_assert_int_eq(kopt_worker_parse_sizes("1,2,3,4", v, 4), 4);
	const char *bad[] = {"-1", "2,1,", ",2", "2,,1", " 2", "2 ,1", "+3", "1,2,3,4,5", "2x",
			     "99999999999999999999999"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(kopt_worker_parse_sizes(bad[i], v, 4) == -1, "accepted '%s'", bad[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("data");
	TCase *tc = tcase_create("args");
	tcase_add_test(tc, test_long_list_changes_shape);
	tcase_add_test(tc, test_short_list_is_kept);
	tcase_add_test(tc, test_bad_selection_says_why);
	tcase_add_test(tc, test_size_lists_are_strict);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
