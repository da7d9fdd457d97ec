/* Check suite for core/sha256.c and core/sys.c: SHA-256 against the FIPS
 * 180-4 test vectors (state hashes and compile-cache keys depend on it), mkdir
 * -p, the UTC timestamp format, the interrupt flag and its deadline, checked
 * and atomic writes with fault injection, and the run folder's lock. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static int callbacks;
static void count_callback(void)
{
	callbacks++;
}

/* A stuck strategy is interrupted from a hook: overdue after the grace
 * period, or at once on a second signal; never once answered. */
START_TEST(test_interrupt_overdue)
{
	kopt_sys_install_signal_handlers(count_callback);
	kopt_sys_clear_interrupt();
	ck_assert_int_eq(kopt_sys_interrupt_overdue(0.0), 0); /* no signal */
	raise(SIGTERM);
	ck_assert_int_eq(callbacks, 1);
	ck_assert_int_eq(kopt_sys_interrupt_overdue(60.0), 0); /* within the grace period */
	ck_assert_int_eq(kopt_sys_interrupt_overdue(0.0), 1);  /* past it */
	kopt_sys_acknowledge_interrupt();
	ck_assert_int_eq(kopt_sys_interrupt_overdue(0.0), 0); /* answered */
	kopt_sys_clear_interrupt();
	raise(SIGINT);
	raise(SIGTERM);
	ck_assert_int_eq(callbacks, 3);
	ck_assert_int_eq(kopt_sys_interrupt_overdue(60.0), 1); /* a second signal: at once */
	ck_assert_int_eq(kopt_sys_interrupted(), SIGINT);     /* the first one's number */
}
END_TEST

static void temp_dir(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "/tmp/check_sys_%s_%ld", tag, (long)getpid());
	char err[256];
	ck_assert_int_eq(kopt_sys_mkdir_p(buf, err, sizeof err), 0);
}

static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* KOPT_FAIL_WRITE_AFTER: the write that crosses the limit is written in
 * part and fails with ENOSPC, as on a full disk; so does every later one. */
START_TEST(test_write_fault_injection)
{
	char dir[128], path[160], err[256];
	temp_dir(dir, sizeof dir, "inject");
	snprintf(path, sizeof path, "%s/f", dir);
	setenv("KOPT_FAIL_WRITE_AFTER", "10", 1);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(kopt_sys_write_all(fd, "123456", 6, err, sizeof err), 0);
	ck_assert_int_eq(kopt_sys_write_all(fd, "abcdef", 6, err, sizeof err), -1);
	ck_assert_str_eq(err, strerror(ENOSPC));
	ck_assert_int_eq(kopt_sys_write_all(fd, "x", 1, err, sizeof err), -1);
	close(fd);
	ck_assert_int_eq(file_size(path), 10);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* write_atomic: the new content whole, or the old one untouched and no
 * temporary file left behind. */
START_TEST(test_write_atomic)
{
	char dir[128], path[160], err[256];
	temp_dir(dir, sizeof dir, "atomic");
	snprintf(path, sizeof path, "%s/results.json", dir);
	setenv("KOPT_FAIL_WRITE_AFTER", "12", 1);
	ck_assert_int_eq(kopt_sys_write_atomic(path, "{\"a\": 1}\n", 9, err, sizeof err), 0);
	ck_assert_int_eq(file_size(path), 9);
	ck_assert_int_eq(kopt_sys_write_atomic(path, "{\"a\": 12345}\n", 13, err, sizeof err), -1);
	ck_assert_str_eq(err, strerror(ENOSPC));
	ck_assert_int_eq(file_size(path), 9);
	DIR *d = opendir(dir);
	int entries = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		entries += e->d_name[0] != '.';
	closedir(d);
	ck_assert_int_eq(entries, 1);
	ck_assert_int_eq(kopt_sys_truncate(path, 3, err, sizeof err), 0);
	ck_assert_int_eq(file_size(path), 3);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(test_fsync_injection)
{
	char err[256];
	setenv("KOPT_FAIL_FSYNC", "1", 1);
	ck_assert_int_eq(kopt_sys_fsync(1, err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, strerror(EIO)));
}
END_TEST

/* One holder at a time; another process learns the holder's PID; closing
 * (or dying) releases it. */
START_TEST(test_lock)
{
	char dir[128], path[160], err[256];
	temp_dir(dir, sizeof dir, "lock");
	snprintf(path, sizeof path, "%s/.kopt.lock", dir);
	int fd;
	long holder;
	ck_assert_int_eq(kopt_sys_lock(path, &fd, &holder, err, sizeof err), 0);
	ck_assert_int_ge(fd, 0);
	pid_t child = fork();
	if (child == 0) {
		int cfd;
		long h;
		char e[256];
		int rc = kopt_sys_lock(path, &cfd, &h, e, sizeof e);
		_exit(rc == -1 && h == (long)getppid() ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fd);
	child = fork();
	if (child == 0) {
		int cfd;
		long h;
		char e[256];
		_exit(kopt_sys_lock(path, &cfd, &h, e, sizeof e) == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* Resident pages of [p, p + len) (page-aligned p). */
static size_t resident_pages(char *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, count = 0;
	unsigned char *vec = malloc(n);
	ck_assert_ptr_nonnull(vec);
	ck_assert_int_eq(mincore(p, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	free(vec);
	return count;
}

/* Populating backs whole pages around an unaligned range and keeps their
 * contents; populating ahead keeps *ready up to KOPT_SYS_POPULATE_AHEAD past
 * the used length, never past the capacity, and does nothing while the used
 * length stays within it. (On a kernel without MADV_POPULATE_WRITE only the
 * bookkeeping and the contents are checked.) */
START_TEST(test_populate)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 64 * page;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(p != MAP_FAILED);
	int supported = madvise(p, page, MADV_POPULATE_WRITE) == 0;
	p[page + 10] = 'k';
	ck_assert_uint_eq(resident_pages(p, len), supported ? 2 : 1);
	kopt_sys_populate(p + page + 10, 3 * page);
	ck_assert_int_eq(p[page + 10], 'k');
	if (supported)
		ck_assert_uint_eq(resident_pages(p, len), 5); /* pages 0, 1 and the 3 the range touches */
	munmap(p, len);

	size_t cap = 8 * KOPT_SYS_POPULATE_AHEAD, ready = 0;
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(p != MAP_FAILED);
	kopt_sys_populate_ahead(p, 100, cap, &ready);
	ck_assert_uint_eq(ready, 100 + KOPT_SYS_POPULATE_AHEAD);
	kopt_sys_populate_ahead(p, KOPT_SYS_POPULATE_AHEAD, cap, &ready);
	ck_assert_uint_eq(ready, 100 + KOPT_SYS_POPULATE_AHEAD);
	kopt_sys_populate_ahead(p, cap - 10, cap, &ready);
	ck_assert_uint_eq(ready, cap);
	if (supported)
		ck_assert_uint_eq(resident_pages(p, cap), cap / page);
	munmap(p, cap);
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
	tcase_add_test(tc, test_interrupt_overdue);
	tcase_add_test(tc, test_write_fault_injection);
	tcase_add_test(tc, test_write_atomic);
	tcase_add_test(tc, test_fsync_injection);
	tcase_add_test(tc, test_lock);
	tcase_add_test(tc, test_populate);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
