/* Check suite for core/sha256.c and core/sys.c: SHA-256 against the FIPS
 * 180-4 test vectors (state hashes and compile-cache keys depend on it), mkdir
 * -p, the UTC timestamp format and the interrupt flag. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "sha256.h"
#include "sys.h"

START_TEST(test_sha256_vectors)
{
	char hex[65];
	kopt_sha256_hex("", 0, hex);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	kopt_sha256_hex("abc", 3, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	kopt_sha256_hex(two_blocks, strlen(two_blocks), hex);
	ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

/* A million 'a's fed in uneven pieces: exercises the block buffering. */
START_TEST(test_sha256_streaming)
{
	static char chunk[997];
	memset(chunk, 'a', sizeof chunk);
	struct kopt_sha256 s;
	kopt_sha256_init(&s);
	size_t left = 1000000;
	while (left > 0) {
		size_t n = left < sizeof chunk ? left : sizeof chunk;
		kopt_sha256_update(&s, chunk, n);
		left -= n;
	}
	unsigned char d[32];
	kopt_sha256_final(&s, d);
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

START_TEST(test_mkdir_p)
{
	char base[] = "/tmp/kopt-check-sys-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(base));
	char path[256], err[256];
	snprintf(path, sizeof path, "%s/a/b/c", base);
	ck_assert_int_eq(kopt_sys_mkdir_p(path, err, sizeof err), 0);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(kopt_sys_mkdir_p(path, err, sizeof err), 0); /* exists: fine */
	char file[300];
	snprintf(file, sizeof file, "%s/f", path);
	FILE *fp = fopen(file, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	ck_assert_int_eq(kopt_sys_mkdir_p(file, err, sizeof err), -1); /* a file in the way */
	ck_assert_ptr_nonnull(strstr(err, "not a directory"));
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_utc_iso)
{
	char buf[32];
	kopt_sys_utc_iso(buf, sizeof buf);
	ck_assert_uint_eq(strlen(buf), 20);
	ck_assert(buf[4] == '-' && buf[7] == '-' && buf[10] == 'T' && buf[13] == ':' && buf[19] == 'Z');
	double a = kopt_sys_now(), b = kopt_sys_now();
	ck_assert(b >= a);
}
END_TEST

START_TEST(test_interrupt_flag)
{
	kopt_sys_install_signal_handlers(NULL);
	kopt_sys_clear_interrupt();
	ck_assert_int_eq(kopt_sys_interrupted(), 0);
	raise(SIGTERM); /* handled: sets the flag, the process goes on */
	ck_assert_int_eq(kopt_sys_interrupted(), SIGTERM);
	kopt_sys_clear_interrupt();
	ck_assert_int_eq(kopt_sys_interrupted(), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sys");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_sha256_vectors);
	tcase_add_test(tc, test_sha256_streaming);
	tcase_add_test(tc, test_mkdir_p);
	tcase_add_test(tc, test_utc_iso);
	tcase_add_test(tc, test_interrupt_flag);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
