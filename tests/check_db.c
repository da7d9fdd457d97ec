/* Check suite for core/db.c (the experience database's SQLite file): a new
 * file is WAL, values round-trip by type, a file that is not a database fails
 * at open with a sentence naming it and is left as it was, a read-only open
 * of a missing file fails, and a second connection waiting on a write lock
 * reports "busy" once its timeout has passed instead of hanging. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"

static char dir[64];

static void make_dir(void)
{
	snprintf(dir, sizeof dir, "/tmp/kopt-check-db-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The first column of the first row of sql, as text. */
static void one_text(struct kopt_db *db, const char *sql, char *out, size_t len)
{
	struct kopt_db_stmt *st;
	char err[256];
	ck_assert_int_eq(kopt_db_prepare(db, sql, &st, err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_step(st, err, sizeof err), KOPT_DB_ROW);
	struct kopt_db_value v;
	kopt_db_column(st, 0, &v);
	ck_assert_int_eq(v.type, KOPT_DB_TEXT);
	snprintf(out, len, "%s", v.s);
	kopt_db_finalize(st);
}

START_TEST(test_round_trip)
{
	make_dir();
	char path[128], err[256], mode[16];
	snprintf(path, sizeof path, "%s/e.db", dir);
	struct kopt_db *db;
	ck_assert_int_eq(kopt_db_open(path, 0, 1000, &db, err, sizeof err), 0);
	one_text(db, "PRAGMA journal_mode", mode, sizeof mode);
	ck_assert_str_eq(mode, "wal");
	ck_assert_int_eq(kopt_db_exec(db, "CREATE TABLE t (a INTEGER, b REAL, c TEXT, d)", err, sizeof err), 0);

	struct kopt_db_stmt *st;
	ck_assert_int_eq(kopt_db_prepare(db, "INSERT INTO t VALUES (?, ?, ?, ?)", &st, err, sizeof err), 0);
	struct kopt_db_value vals[4] = {
	    {.type = KOPT_DB_INT, .i = (int64_t)1 << 40},
	    {.type = KOPT_DB_REAL, .d = 0.125},
	    {.type = KOPT_DB_TEXT, .s = "a\0b", .len = 3}, /* an embedded NUL survives */
	    {.type = KOPT_DB_NULL},
	};
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(kopt_db_bind(st, i + 1, &vals[i], err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_step(st, err, sizeof err), KOPT_DB_DONE);
	ck_assert_int_eq(kopt_db_changes(st), 1);
	ck_assert_int_eq(kopt_db_last_id(st), 1);
	kopt_db_finalize(st);

	ck_assert_int_eq(kopt_db_prepare(db, "SELECT a, b, c, d FROM t", &st, err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_columns(st), 4);
	ck_assert_str_eq(kopt_db_column_name(st, 2), "c");
	ck_assert_int_eq(kopt_db_step(st, err, sizeof err), KOPT_DB_ROW);
	struct kopt_db_value v;
	kopt_db_column(st, 0, &v);
	ck_assert_int_eq(v.type, KOPT_DB_INT);
	ck_assert(v.i == (int64_t)1 << 40);
	kopt_db_column(st, 1, &v);
	ck_assert_int_eq(v.type, KOPT_DB_REAL);
	ck_assert(v.d == 0.125);
	kopt_db_column(st, 2, &v);
	ck_assert_int_eq(v.type, KOPT_DB_TEXT);
	ck_assert_uint_eq(v.len, 3);
	ck_assert_int_eq(memcmp(v.s, "a\0b", 3), 0);
	kopt_db_column(st, 3, &v);
	ck_assert_int_eq(v.type, KOPT_DB_NULL);
	ck_assert_int_eq(kopt_db_step(st, err, sizeof err), KOPT_DB_DONE);
	kopt_db_finalize(st);

	/* a bad statement is an error naming the file, not a crash */
	ck_assert_int_eq(kopt_db_prepare(db, "SELECT * FROM nowhere", &st, err, sizeof err), KOPT_DB_ERROR);
	ck_assert_ptr_null(st);
	ck_assert_ptr_nonnull(strstr(err, path));
	kopt_db_free(db);
	remove_dir();
}
END_TEST

/* Regression: a second statement in one prepare was dropped without a
 * word (d:run("INSERT ...; DELETE ...") ran only the INSERT), and an empty
 * one was accepted and failed only when stepped. */
START_TEST(test_one_statement)
{
	make_dir();
	char path[128], err[256] = "";
	snprintf(path, sizeof path, "%s/e.db", dir);
	struct kopt_db *db;
	struct kopt_db_stmt *st = NULL;
	ck_assert_int_eq(kopt_db_open(path, 0, 1000, &db, err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_exec(db, "CREATE TABLE t (a INTEGER)", err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_prepare(db, "INSERT INTO t VALUES (1); \n", &st, err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_step(st, err, sizeof err), KOPT_DB_DONE);
	kopt_db_finalize(st);
	ck_assert_int_ne(kopt_db_prepare(db, "INSERT INTO t VALUES (2); DELETE FROM t", &st, err,
					 sizeof err),
			 0);
	ck_assert_ptr_null(st);
	ck_assert_msg(strstr(err, path) && strstr(err, "more than one statement"), "%s", err);
	ck_assert_int_ne(kopt_db_prepare(db, "  ; ", &st, err, sizeof err), 0);
	ck_assert_ptr_null(st);
	ck_assert_msg(strstr(err, "no statement") != NULL, "%s", err);
	kopt_db_free(db);
	remove_dir();
}
END_TEST

START_TEST(test_not_a_database)
{
	make_dir();
	char path[128], err[256];
	snprintf(path, sizeof path, "%s/garbage.db", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 500; i++)
		fputs("garbage ", f);
	fclose(f);
	struct kopt_db *db = (struct kopt_db *)1;
	ck_assert_int_eq(kopt_db_open(path, 0, 100, &db, err, sizeof err), KOPT_DB_ECORRUPT);
	ck_assert_ptr_null(db);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, "not a database"));
	f = fopen(path, "r");
	char head[8] = {0};
	ck_assert_uint_eq(fread(head, 1, 7, f), 7);
	fclose(f);
	ck_assert_str_eq(head, "garbage"); /* left as it was */

	snprintf(path, sizeof path, "%s/missing.db", dir);
	ck_assert_int_eq(kopt_db_open(path, KOPT_DB_READONLY, 100, &db, err, sizeof err), KOPT_DB_ECANTOPEN);
	ck_assert_int_ne(access(path, F_OK), 0); /* not created */
	remove_dir();
}
END_TEST

START_TEST(test_busy)
{
	make_dir();
	char path[128], err[256];
	snprintf(path, sizeof path, "%s/e.db", dir);
	struct kopt_db *a, *b;
	ck_assert_int_eq(kopt_db_open(path, 0, 1000, &a, err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_exec(a, "CREATE TABLE t (x)", err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_open(path, 0, 200, &b, err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_exec(a, "BEGIN IMMEDIATE; INSERT INTO t VALUES (1)", err, sizeof err), 0);
	/* WAL: the reader is not blocked by the writer ... */
	char n[16];
	one_text(b, "SELECT CAST(count(*) AS TEXT) FROM t", n, sizeof n);
	ck_assert_str_eq(n, "0");
	/* ... a second writer waits its timeout, then says busy */
	ck_assert_int_eq(kopt_db_exec(b, "BEGIN IMMEDIATE", err, sizeof err), KOPT_DB_EBUSY);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_int_eq(kopt_db_exec(a, "COMMIT", err, sizeof err), 0);
	ck_assert_int_eq(kopt_db_exec(b, "BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT", err, sizeof err), 0);
	one_text(a, "SELECT CAST(count(*) AS TEXT) FROM t", n, sizeof n);
	ck_assert_str_eq(n, "2");
	kopt_db_free(b);
	kopt_db_free(a);
	remove_dir();
}
END_TEST

static Suite *db_suite(void)
{
	Suite *s = suite_create("db");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_one_statement);
	tcase_add_test(tc, test_not_a_database);
	tcase_add_test(tc, test_busy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(db_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
