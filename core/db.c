/* The experience database's file: SQLite opened with WAL, a busy timeout and
 * errors that name the file (db.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "db.h"

struct kopt_db {
	sqlite3 *h;
	char *path;
};

struct kopt_db_stmt {
	sqlite3_stmt *st;
	struct kopt_db *db;
};

static int kind_of(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return KOPT_DB_EBUSY;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return KOPT_DB_ECORRUPT;
	case SQLITE_FULL:
	case SQLITE_IOERR:
		return KOPT_DB_EFULL;
	case SQLITE_READONLY:
		return KOPT_DB_EREADONLY;
	case SQLITE_CANTOPEN:
		return KOPT_DB_ECANTOPEN;
	default:
		return KOPT_DB_ERROR;
	}
}

/* "PATH: MESSAGE" for the failure rc of connection h; returns its kind. */
static int fail(const char *path, sqlite3 *h, int rc, char *err, size_t errlen)
{
	const char *msg = h ? sqlite3_errmsg(h) : sqlite3_errstr(rc);
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", path, msg ? msg : sqlite3_errstr(rc));
	return kind_of(rc);
}

/* Runs sql, which returns at most one text value, into buf (empty if none). */
static int pragma_text(struct kopt_db *db, const char *sql, char *buf, size_t len, char *err,
		       size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db->h, sql, -1, &st, NULL);
	buf[0] = '\0';
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			const unsigned char *t = sqlite3_column_text(st, 0);
			snprintf(buf, len, "%s", t ? (const char *)t : "");
			rc = SQLITE_DONE;
		}
	}
	int out = rc == SQLITE_DONE ? 0 : fail(db->path, db->h, rc, err, errlen);
	sqlite3_finalize(st);
	return out;
}

/* "file:PATH?immutable=1" with PATH percent-encoded where a URI needs it,
 * or NULL when out of memory. */
static char *immutable_uri(const char *path)
{
	size_t n = strlen(path);
	char *uri = malloc(3 * n + 32);
	if (uri == NULL)
		return NULL;
	char *p = uri + sprintf(uri, "file:");
	for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
		if (*c == '%' || *c == '?' || *c == '#' || *c <= ' ' || *c >= 0x7f)
			p += sprintf(p, "%%%02X", *c);
		else
			*p++ = (char)*c;
	}
	strcpy(p, "?immutable=1");
	return uri;
}

/* A read-only open of a WAL file in a folder it cannot write to: SQLite
 * needs to create PATH-shm beside it, and fails with "unable to open". No
 * writer can be at work there (it would need the same folder), so the file
 * is read as immutable: its last checkpoint, without a -wal left by a
 * crash. 0 with db->h open, or SQLite's code. */
static int open_immutable(struct kopt_db *db)
{
	char *uri = immutable_uri(db->path);
	if (uri == NULL)
		return SQLITE_NOMEM;
	sqlite3_close_v2(db->h);
	db->h = NULL;
	int rc = sqlite3_open_v2(uri, &db->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
				 NULL);
	free(uri);
	return rc;
}

int kopt_db_open(const char *path, int flags, int busy_ms, struct kopt_db **out, char *err,
		 size_t errlen)
{
	struct kopt_db *db = NULL;
	int rc, status = KOPT_DB_OK;
	char mode[32], ignored[1];

	if (err == NULL || errlen == 0) { /* a caller that does not want the reason */
		err = ignored;
		errlen = sizeof ignored;
	}
	*out = NULL;
	db = calloc(1, sizeof *db);
	if (db == NULL || (db->path = strdup(path)) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		status = KOPT_DB_ERROR;
		goto out;
	}
	int oflags = (flags & KOPT_DB_READONLY) ? SQLITE_OPEN_READONLY
						: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	rc = sqlite3_open_v2(path, &db->h, oflags | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		status = fail(path, db->h, rc, err, errlen);
		goto out;
	}
	sqlite3_extended_result_codes(db->h, 1);
	sqlite3_busy_timeout(db->h, busy_ms);
	/* The first read of the file: a file that is not a database fails here,
	 * before anything could be written to it. */
	status = pragma_text(db, "PRAGMA schema_version", mode, sizeof mode, err, errlen);
	if (status == KOPT_DB_ECANTOPEN && (flags & KOPT_DB_READONLY)) {
		rc = open_immutable(db);
		if (rc != SQLITE_OK) {
			status = fail(path, db->h, rc, err, errlen);
			goto out;
		}
		status = pragma_text(db, "PRAGMA schema_version", mode, sizeof mode, err, errlen);
	}
	if (status != KOPT_DB_OK)
		goto out;
	if (!(flags & (KOPT_DB_READONLY | KOPT_DB_KEEP_JOURNAL))) {
		/* WAL is a property of the file: switch only when it is not one yet
		 * (the switch needs the file to itself). */
		status = pragma_text(db, "PRAGMA journal_mode", mode, sizeof mode, err, errlen);
		if (status == KOPT_DB_OK && strcmp(mode, "wal") != 0)
			status = pragma_text(db, "PRAGMA journal_mode=WAL", mode, sizeof mode, err,
					     errlen);
		if (status != KOPT_DB_OK)
			goto out;
	}
	status = kopt_db_exec(db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", err, errlen);
out:
	if (status != KOPT_DB_OK) {
		kopt_db_free(db);
		return status;
	}
	*out = db;
	return KOPT_DB_OK;
}

void kopt_db_free(struct kopt_db *db)
{
	if (db == NULL)
		return;
	if (db->h)
		sqlite3_close_v2(db->h);
	free(db->path);
	free(db);
}

int kopt_db_exec(struct kopt_db *db, const char *sql, char *err, size_t errlen)
{
	int rc = sqlite3_exec(db->h, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? KOPT_DB_OK : fail(db->path, db->h, rc, err, errlen);
}

int kopt_db_prepare(struct kopt_db *db, const char *sql, struct kopt_db_stmt **out, char *err,
		    size_t errlen)
{
	struct kopt_db_stmt *s = NULL;
	*out = NULL;
	s = calloc(1, sizeof *s);
	if (s == NULL) {
		snprintf(err, errlen, "%s: out of memory", db->path);
		return KOPT_DB_ERROR;
	}
	const char *tail = NULL;
	int rc = sqlite3_prepare_v2(db->h, sql, -1, &s->st, &tail);
	if (rc != SQLITE_OK) {
		int status = fail(db->path, db->h, rc, err, errlen);
		sqlite3_finalize(s->st);
		free(s);
		return status;
	}
	/* A second statement would be dropped without a word, and an empty one
	 * would fail only when stepped: both are the caller's mistake. */
	while (tail != NULL && (*tail == ';' || *tail == ' ' || *tail == '\t' || *tail == '\n' ||
				*tail == '\r'))
		tail++;
	if (s->st == NULL || (tail != NULL && *tail != '\0')) {
		if (err && errlen)
			snprintf(err, errlen, "%s: %s in \"%.80s\" (one statement per call)",
				 db->path, s->st == NULL ? "no statement" : "more than one statement",
				 sql);
		sqlite3_finalize(s->st);
		free(s);
		return KOPT_DB_ERROR;
	}
	s->db = db;
	*out = s;
	return KOPT_DB_OK;
}

int kopt_db_bind(struct kopt_db_stmt *s, int idx, const struct kopt_db_value *v, char *err,
		 size_t errlen)
{
	int rc;
	switch (v->type) {
	case KOPT_DB_INT:
		rc = sqlite3_bind_int64(s->st, idx, v->i);
		break;
	case KOPT_DB_REAL:
		rc = sqlite3_bind_double(s->st, idx, v->d);
		break;
	case KOPT_DB_TEXT:
		rc = sqlite3_bind_text64(s->st, idx, v->s, (sqlite3_uint64)v->len, SQLITE_TRANSIENT,
					 SQLITE_UTF8);
		break;
	default:
		rc = sqlite3_bind_null(s->st, idx);
	}
	return rc == SQLITE_OK ? KOPT_DB_OK : fail(s->db->path, s->db->h, rc, err, errlen);
}

int kopt_db_step(struct kopt_db_stmt *s, char *err, size_t errlen)
{
	int rc = sqlite3_step(s->st);
	if (rc == SQLITE_ROW)
		return KOPT_DB_ROW;
	if (rc == SQLITE_DONE)
		return KOPT_DB_DONE;
	return fail(s->db->path, s->db->h, rc, err, errlen);
}

int kopt_db_columns(struct kopt_db_stmt *s)
{
	return sqlite3_column_count(s->st);
}

const char *kopt_db_column_name(struct kopt_db_stmt *s, int col)
{
	return sqlite3_column_name(s->st, col);
}

void kopt_db_column(struct kopt_db_stmt *s, int col, struct kopt_db_value *v)
{
	memset(v, 0, sizeof *v);
	switch (sqlite3_column_type(s->st, col)) {
	case SQLITE_INTEGER:
		v->type = KOPT_DB_INT;
		v->i = sqlite3_column_int64(s->st, col);
		break;
	case SQLITE_FLOAT:
		v->type = KOPT_DB_REAL;
		v->d = sqlite3_column_double(s->st, col);
		break;
	case SQLITE_TEXT:
	case SQLITE_BLOB:
		v->type = KOPT_DB_TEXT;
		v->s = (const char *)sqlite3_column_text(s->st, col);
		v->len = (size_t)sqlite3_column_bytes(s->st, col);
		if (v->s == NULL)
			v->s = "";
		break;
	default:
		v->type = KOPT_DB_NULL;
	}
}

int64_t kopt_db_changes(struct kopt_db_stmt *s)
{
	return sqlite3_changes64(s->db->h);
}

int64_t kopt_db_last_id(struct kopt_db_stmt *s)
{
	return sqlite3_last_insert_rowid(s->db->h);
}

void kopt_db_finalize(struct kopt_db_stmt *s)
{
	if (s == NULL)
		return;
	sqlite3_finalize(s->st);
	free(s);
}

const char *kopt_db_library_version(void)
{
	return sqlite3_libversion();
}
