/* Check suite for core/mpi.c without a launcher: whether kopt believes an
 * MPI launcher started it (the environment, KOPT_MPI overriding it), and
 * that sending or receiving before kopt_mpi_init is a status with a
 * sentence, never a crash or a hang. The messages themselves are tested
 * under mpirun by tests/lua/test_mpi.lua and test_mpi_faults.lua. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mpi.h"

static void clear_env(void)
{
	unsetenv("KOPT_MPI");
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMIX_RANK");
	unsetenv("PMI_RANK");
}

START_TEST(test_launched_from_env)
{
	clear_env();
	ck_assert_int_eq(kopt_mpi_launched(), 0);
	setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
	ck_assert_int_eq(kopt_mpi_launched(), 1);
	setenv("KOPT_MPI", "0", 1);
	ck_assert_int_eq(kopt_mpi_launched(), 0);
	clear_env();
	setenv("PMIX_RANK", "1", 1);
	ck_assert_int_eq(kopt_mpi_launched(), 1);
	clear_env();
	setenv("PMI_RANK", "0", 1);
	ck_assert_int_eq(kopt_mpi_launched(), 1);
	clear_env();
	setenv("OMPI_COMM_WORLD_SIZE", "", 1);
	ck_assert_int_eq(kopt_mpi_launched(), 0);
	setenv("KOPT_MPI", "1", 1);
	ck_assert_int_eq(kopt_mpi_launched(), 1);
	clear_env();
}
END_TEST

START_TEST(test_before_init)
{
	char err[256] = "";
	ck_assert_int_eq(kopt_mpi_send(1, "x", 1, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "MPI") != NULL, "send error: %s", err);
	int src = 5;
	unsigned char *buf = (unsigned char *)err;
	size_t len = 9;
	err[0] = '\0';
	ck_assert_int_eq(kopt_mpi_recv(&src, &buf, &len, 0, err, sizeof err), -1);
	ck_assert_int_eq(src, -1);
	ck_assert_ptr_null(buf);
	ck_assert_uint_eq(len, 0);
	ck_assert_msg(strstr(err, "MPI") != NULL, "recv error: %s", err);
	ck_assert_uint_eq(kopt_mpi_pending(), 0);
	kopt_mpi_finalize(); /* nothing to end: a no-op */
}
END_TEST

START_TEST(test_built_without)
{
	if (kopt_mpi_built())
		return;
	char err[256] = "";
	int rank = 7, size = 7;
	ck_assert_int_eq(kopt_mpi_init(&rank, &size, 0, err, sizeof err), -1);
	ck_assert_int_eq(rank, 0);
	ck_assert_int_eq(size, 0);
	ck_assert_msg(strstr(err, "built without MPI") != NULL, "init error: %s", err);
}
END_TEST

static Suite *mpi_suite(void)
{
	Suite *s = suite_create("mpi");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_launched_from_env);
	tcase_add_test(tc, test_before_init);
	tcase_add_test(tc, test_built_without);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mpi_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
