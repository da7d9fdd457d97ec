/* Check suite for core/wire.c (framing and typed messages between kopt and
 * its GPU workers) and the worker's start-up handshake, which runs without a
 * GPU: a worker on a machine without a driver must answer with one "error"
 * message carrying the no-driver sentence, then exit. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/cuda_driver.h"
#include "wire.h"
#include "worker/worker.h"

START_TEST(test_round_trip)
{
	struct kopt_msg m = {0};
	unsigned char bin[300];
	for (int i = 0; i < 300; i++)
		bin[i] = (unsigned char)(i * 7); /* includes NUL bytes */
	ck_assert_int_eq(kopt_msg_put_cstr(&m, "op", "run"), 0);
	ck_assert_int_eq(kopt_msg_put_int(&m, "a1.count", 1LL << 40), 0);
	ck_assert_int_eq(kopt_msg_put_num(&m, "tol", 2.5e-3), 0);
	ck_assert_int_eq(kopt_msg_put_str(&m, "cubin", bin, sizeof bin), 0);
	ck_assert_int_eq(kopt_msg_put_int(&m, "neg", -7), 0);

	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	char err[256];
	ck_assert_int_eq(kopt_wire_write(fds[1], m.buf, m.len, err, sizeof err), 0);
	kopt_msg_release(&m);
	unsigned char *buf;
	size_t len;
	ck_assert_int_eq(kopt_wire_read(fds[0], &buf, &len, 1000, err, sizeof err), 0);
	struct kopt_msgview v;
	ck_assert_int_eq(kopt_msgview_parse(&v, buf, len, err, sizeof err), 0);
	ck_assert_uint_eq(v.count, 5);
	char s[16];
	ck_assert_str_eq(kopt_msg_cstr(&v, "op", s, sizeof s, "?"), "run");
	/* an absent field: the default goes into the buffer too (the request's
	 * decoder reads the buffer), cut to fit; no default, NULL */
	ck_assert_ptr_eq(kopt_msg_cstr(&v, "absent", s, sizeof s, "dflt"), s);
	ck_assert_str_eq(s, "dflt");
	kopt_msg_cstr(&v, "absent", s, 4, "longer");
	ck_assert_str_eq(s, "lon");
	ck_assert_ptr_null(kopt_msg_cstr(&v, "absent", s, sizeof s, NULL));
	ck_assert(kopt_msg_int(&v, "a1.count", 0) == 1LL << 40);
	ck_assert(kopt_msg_num(&v, "tol", 0) == 2.5e-3);
	ck_assert(kopt_msg_num(&v, "neg", 0) == -7.0); /* int read as number */
	ck_assert(kopt_msg_int(&v, "tol", 9) == 0);    /* number read as int */
	ck_assert(kopt_msg_int(&v, "absent", 9) == 9);
	size_t blen;
	const char *b = kopt_msg_bytes(&v, "cubin", &blen);
	ck_assert_uint_eq(blen, sizeof bin);
	ck_assert_mem_eq(b, bin, sizeof bin);
	ck_assert_ptr_null(kopt_msg_bytes(&v, "tol", &blen));
	kopt_msgview_release(&v);
	free(buf);

	/* nothing to read: timeout, nothing consumed */
	ck_assert_int_eq(kopt_wire_read(fds[0], &buf, &len, 10, err, sizeof err), 1);
	/* writer gone: EOF is an error, not a timeout */
	close(fds[1]);
	ck_assert_int_eq(kopt_wire_read(fds[0], &buf, &len, 1000, err, sizeof err), -1);
	close(fds[0]);
}
END_TEST

START_TEST(test_broken_frames)
{
	int fds[2];
	char err[256];
	unsigned char *buf;
	size_t len;
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], "XXXX\4\0\0\0abcd", 12), 12);
	ck_assert_int_eq(kopt_wire_read(fds[0], &buf, &len, 1000, err, sizeof err), -1);
	ck_assert(strstr(err, "header") != NULL);
	close(fds[0]);
	close(fds[1]);

	/* a frame cut short by the writer's death */
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(write(fds[1], "KOPW\20\0\0\0abc", 11), 11);
	close(fds[1]);
	ck_assert_int_eq(kopt_wire_read(fds[0], &buf, &len, 1000, err, sizeof err), -1);
	ck_assert(strstr(err, "mid-frame") != NULL);
	close(fds[0]);

	/* payloads that lie about their lengths */
	struct kopt_msgview v;
	const unsigned char bad1[] = {'i', 3, 0, 'a', 'b'}; /* key past the end */
	const unsigned char bad2[] = {'s',  1, 0, 'k', 0xff,
				      0xff, 0, 0, 'x'}; /* string past the end */
	const unsigned char bad3[] = {'q', 1, 0, 'k'};	/* unknown type */
	ck_assert_int_eq(kopt_msgview_parse(&v, bad1, sizeof bad1, err, sizeof err), -1);
	ck_assert_int_eq(kopt_msgview_parse(&v, bad2, sizeof bad2, err, sizeof err), -1);
	ck_assert_int_eq(kopt_msgview_parse(&v, bad3, sizeof bad3, err, sizeof err), -1);
	ck_assert_int_eq(kopt_msgview_parse(&v, bad3, 0, err, sizeof err), 0); /* empty is fine */
	ck_assert_uint_eq(v.count, 0);
	kopt_msgview_release(&v);
}
END_TEST

START_TEST(test_many_fields_grow)
{
	struct kopt_msg m = {0};
	char key[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof key, "a%d.count", i);
		ck_assert_int_eq(kopt_msg_put_int(&m, key, i), 0);
	}
	struct kopt_msgview v;
	char err[128];
	ck_assert_int_eq(kopt_msgview_parse(&v, m.buf, m.len, err, sizeof err), 0);
	ck_assert_uint_eq(v.count, 5000);
	ck_assert(kopt_msg_int(&v, "a4999.count", -1) == 4999);
	kopt_msgview_release(&v);
	kopt_msg_release(&m);
}
END_TEST

/* The worker's handshake, run in a child process as kopt would start it. */
START_TEST(test_worker_handshake)
{
	int req[2], rep[2];
	ck_assert_int_eq(pipe(req), 0);
	ck_assert_int_eq(pipe(rep), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char in[16], out[16];
		snprintf(in, sizeof in, "%d", req[0]);
		snprintf(out, sizeof out, "%d", rep[1]);
		char *argv[] = {"kopt", KOPT_WORKER_ARG, "0", in, out, NULL};
		_exit(kopt_worker_main(5, argv));
	}
	close(req[0]);
	close(rep[1]);
	unsigned char *buf;
	size_t len;
	char err[256], op[32], log[1024];
	ck_assert_int_eq(kopt_wire_read(rep[0], &buf, &len, 120000, err, sizeof err), 0);
	struct kopt_msgview v;
	ck_assert_int_eq(kopt_msgview_parse(&v, buf, len, err, sizeof err), 0);
	kopt_msg_cstr(&v, "op", op, sizeof op, "");
	char load_err[512];
	if (kopt_cuda_load(load_err, sizeof load_err) != 0) {
		/* no driver here: one sentence, pointing at replay, then exit 1 */
		ck_assert_str_eq(op, "error");
		kopt_msg_cstr(&v, "log", log, sizeof log, "");
		ck_assert_str_eq(log, load_err);
		ck_assert(strstr(log, "replay") != NULL);
	} else {
		ck_assert(strcmp(op, "ready") == 0 || strcmp(op, "error") == 0);
		struct kopt_msg q = {0};
		kopt_msg_put_cstr(&q, "op", "quit");
		kopt_wire_write(req[1], q.buf, q.len, err, sizeof err);
		kopt_msg_release(&q);
	}
	kopt_msgview_release(&v);
	free(buf);
	close(req[1]);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), strcmp(op, "ready") == 0 ? 0 : 1);
	close(rep[0]);
}
END_TEST

START_TEST(test_sticky_errors)
{
	ck_assert(kopt_cuda_error_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
	ck_assert(kopt_cuda_error_is_sticky(CUDA_ERROR_MISALIGNED_ADDRESS));
	ck_assert(kopt_cuda_error_is_sticky(CUDA_ERROR_LAUNCH_FAILED));
	ck_assert(!kopt_cuda_error_is_sticky(CUDA_ERROR_INVALID_VALUE));
	ck_assert(!kopt_cuda_error_is_sticky(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));
	char buf[128];
	ck_assert(strstr(kopt_cuda_strerror(CUDA_ERROR_ILLEGAL_ADDRESS, buf, sizeof buf), "700") !=
		  NULL);
}
END_TEST

static Suite *wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 150);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_broken_frames);
	tcase_add_test(tc, test_many_fields_grow);
	tcase_add_test(tc, test_worker_handshake);
	tcase_add_test(tc, test_sticky_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	SRunner *sr = srunner_create(wire_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
