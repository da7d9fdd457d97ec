#ifndef KOPT_DB_H
#define KOPT_DB_H
/* An embedded SQLite file opened the way kopt's experience database needs it
 * (docs/DATABASE.md): write-ahead log, a busy timeout so two kopt processes
 * take turns instead of failing, synchronous=NORMAL (a commit does not fsync;
 * a killed process loses nothing committed, a power cut at most the last
 * commits), and one statement type whose values never outlive a step.
 *
 * Every function returns 0 on success or a negative KOPT_DB_E* code and, on
 * failure, a sentence in the caller's err buffer (errlen bytes) that names
 * the file. The schema is the caller's business (lua/kopt/expdb.lua). */
#include <stddef.h>
#include <stdint.h>

struct kopt_db;
struct kopt_db_stmt;

/* Failure kinds, so a caller can tell "another process holds the file too
 * long" from "this file is not a database". */
enum {
	KOPT_DB_OK = 0,
	KOPT_DB_EBUSY = -1,    /* locked by another connection past the timeout */
	KOPT_DB_ECORRUPT = -2, /* not a database, or a malformed one */
	KOPT_DB_EFULL = -3,    /* disk full or an I/O error */
	KOPT_DB_EREADONLY = -4,
	KOPT_DB_ECANTOPEN = -5,
	KOPT_DB_ERROR = -6, /* anything else (a bad statement: a bug) */
};

/* Results of kopt_db_step. */
enum { KOPT_DB_ROW = 1, KOPT_DB_DONE = 2 };

enum kopt_db_type { KOPT_DB_NULL, KOPT_DB_INT, KOPT_DB_REAL, KOPT_DB_TEXT };

/* A value to bind or a column read back. s is borrowed: for a bound value
 * until the statement is stepped (SQLite copies it), for a column until the
 * next step, reset or finalize of its statement. */
struct kopt_db_value {
	enum kopt_db_type type;
	int64_t i;
	double d;
	const char *s;
	size_t len;
};

#define KOPT_DB_READONLY 1 /* open for reading; fails if the file is missing */
/* leave the journal mode as it is: the caller switches to WAL once it knows
 * the file is its own (a file of another program stays untouched) */
#define KOPT_DB_KEEP_JOURNAL 2

/* Opens (creating when allowed) the database file at path; *out is NULL on
 * failure. busy_ms: how long a statement waits for another connection's lock.
 * A file that is not a database fails here with KOPT_DB_ECORRUPT. The caller
 * frees the handle with kopt_db_free. */
int kopt_db_open(const char *path, int flags, int busy_ms, struct kopt_db **out, char *err, size_t errlen);

/* Finalizes nothing: every statement must be finalized first. NULL is fine. */
void kopt_db_free(struct kopt_db *db);

/* Runs one or more statements that return no rows (BEGIN, COMMIT, CREATE). */
int kopt_db_exec(struct kopt_db *db, const char *sql, char *err, size_t errlen);

/* Prepares one statement (sql holding none, or more than one, is an error);
 * the caller finalizes it with kopt_db_finalize. */
int kopt_db_prepare(struct kopt_db *db, const char *sql, struct kopt_db_stmt **out, char *err, size_t errlen);

/* Binds parameter idx (from 1). */
int kopt_db_bind(struct kopt_db_stmt *st, int idx, const struct kopt_db_value *v, char *err, size_t errlen);

/* KOPT_DB_ROW, KOPT_DB_DONE or a negative code. */
int kopt_db_step(struct kopt_db_stmt *st, char *err, size_t errlen);

int kopt_db_columns(struct kopt_db_stmt *st);
const char *kopt_db_column_name(struct kopt_db_stmt *st, int col);
/* Column col (from 0) of the current row; see struct kopt_db_value for how
 * long s lives. */
void kopt_db_column(struct kopt_db_stmt *st, int col, struct kopt_db_value *v);

/* Rows changed by the last statement and the last inserted row id of the
 * statement's connection. */
int64_t kopt_db_changes(struct kopt_db_stmt *st);
int64_t kopt_db_last_id(struct kopt_db_stmt *st);

void kopt_db_finalize(struct kopt_db_stmt *st);

/* The SQLite library's version, e.g. "3.40.1". */
const char *kopt_db_library_version(void);

#endif
