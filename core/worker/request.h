/* A "run" request decoded once (request.c): one member per field of
 * KOPT_REQUEST_FIELDS (request_fields.h), with that list's defaults for the
 * fields the message lacks. The kernel arguments (a<i>.*) stay in the
 * message; data.c reads them. Floor "request": included by run; includes
 * nothing of the worker but its field list. */
#ifndef KOPT_WORKER_REQUEST_H
#define KOPT_WORKER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"
#include "worker/request_fields.h"

#define KOPT_RQ_MEMBER_INT(n) int64_t n;
#define KOPT_RQ_MEMBER_FLAG(n) int64_t n;
#define KOPT_RQ_MEMBER_NUM(n) double n;
#define KOPT_RQ_MEMBER_BYTES(n)                                                                \
	const char *n;                                                                         \
	size_t n##_len;
#define KOPT_RQ_MEMBER_STR_64(n) char n[64];
#define KOPT_RQ_MEMBER_STR_128(n) char n[128];
#define KOPT_RQ_MEMBER_STR_256(n) char n[256];
#define KOPT_RQ_MEMBER_STR_1024(n) char n[1024];
#define KOPT_RQ_MEMBER_STR_8192(n) char n[8192];

struct kopt_request {
#define X(name, type, need, def, doc) KOPT_RQ_MEMBER_##type(name)
	KOPT_REQUEST_FIELDS(X)
#undef X
};

/* Fills r from the message v; BYTES fields borrow v's buffer (valid as long
 * as it is). */
void kopt_request_decode(const struct kopt_msgview *v, struct kopt_request *r);

#endif
