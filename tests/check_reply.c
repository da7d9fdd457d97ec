/* Check suite for core/worker/reply.c: a run reply's fields go on the wire
 * under the names and types of reply_fields.h (the Lua side reads them by
 * that list, kopt.gpu.reply_fields()), counters under "m.<metric>". */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "worker/reply.h"

START_TEST(test_put_by_the_list)
{
	struct kopt_msg m = {0};
	KOPT_REPLY_STR(&m, status, "ok");
	KOPT_REPLY_INT(&m, samples, 42);
	KOPT_REPLY_NUM(&m, time_ms, 0.125);
	KOPT_REPLY_INT(&m, err_unwritten, (size_t)3);
	kopt_reply_put_metric(&m, "dram__bytes.sum", 4096.0);
	ck_assert_int_eq(m.failed, 0);

	struct kopt_msgview v;
	char err[128], s[16];
	ck_assert_int_eq(kopt_msgview_parse(&v, m.buf, m.len, err, sizeof err), 0);
	ck_assert_uint_eq(v.count, 5);
	ck_assert_str_eq(kopt_msg_cstr(&v, "status", s, sizeof s, "?"), "ok");
	ck_assert_int_eq(kopt_msg_find(&v, "samples")->type, 'i');
	ck_assert(kopt_msg_int(&v, "samples", 0) == 42);
	ck_assert_int_eq(kopt_msg_find(&v, "time_ms")->type, 'd');
	ck_assert(kopt_msg_num(&v, "time_ms", 0) == 0.125);
	ck_assert(kopt_msg_int(&v, "err_unwritten", 0) == 3);
	ck_assert(kopt_msg_num(&v, "m.dram__bytes.sum", 0) == 4096.0);
	kopt_msgview_release(&v);
	kopt_msg_release(&m);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(kopt_reply_name(KOPT_REPLY_op), "op");
	ck_assert_str_eq(kopt_reply_name(KOPT_REPLY_t_total_s), "t_total_s");
	ck_assert_ptr_null(kopt_reply_name(KOPT_REPLY_NFIELDS));
	for (int i = 0; i < KOPT_REPLY_NFIELDS; i++) /* no name twice */
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(kopt_reply_name((enum kopt_reply_field)i),
					 kopt_reply_name((enum kopt_reply_field)j));
}
END_TEST

static Suite *reply_suite(void)
{
	Suite *s = suite_create("reply");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_put_by_the_list);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(reply_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
