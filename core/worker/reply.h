/* Putting the fields of a run reply (reply_fields.h), by the list: a field
 * is named by its identifier, and the KOPT_REPLY_* macros fail to compile
 * when it is not in the list or has another type. Floor "reply" (beside
 * "request"): included by loop, run and profile; includes nothing of the
 * worker but its field list. */
#ifndef KOPT_WORKER_REPLY_H
#define KOPT_WORKER_REPLY_H

#include <stdint.h>

#include "wire.h"
#include "worker/reply_fields.h"

enum kopt_reply_field {
#define X(name, type, doc) KOPT_REPLY_##name,
	KOPT_REPLY_FIELDS(X)
#undef X
	    KOPT_REPLY_NFIELDS
};

enum kopt_reply_type { KOPT_REPLY_T_INT, KOPT_REPLY_T_NUM, KOPT_REPLY_T_STR };

/* Each field's type as a constant, for the compile-time checks below. */
enum {
#define X(name, type, doc) KOPT_REPLY_TYPE_##name = KOPT_REPLY_T_##type,
	KOPT_REPLY_FIELDS(X)
#undef X
};

/* The field's name on the wire ("time_ms"). */
const char *kopt_reply_name(enum kopt_reply_field f);

/* Put one field into m (a failed put marks m failed, as kopt_msg_put_* do).
 * A field of another type is a broken invariant (abort); the macros below
 * rule that out at compile time. */
void kopt_reply_put_int(struct kopt_msg *m, enum kopt_reply_field f, int64_t v);
void kopt_reply_put_num(struct kopt_msg *m, enum kopt_reply_field f, double v);
void kopt_reply_put_str(struct kopt_msg *m, enum kopt_reply_field f, const char *s);
/* One counter of the "m." family: "m.<metric>". */
void kopt_reply_put_metric(struct kopt_msg *m, const char *metric, double v);

#define KOPT_REPLY_PUT_(m, name, T, fn, v)                                                         \
	do {                                                                                       \
		_Static_assert((int)KOPT_REPLY_TYPE_##name == (int)KOPT_REPLY_T_##T,               \
			       "reply field " #name " is not " #T " (worker/reply_fields.h)");     \
		fn(m, KOPT_REPLY_##name, v);                                                       \
	} while (0)
#define KOPT_REPLY_INT(m, name, v) KOPT_REPLY_PUT_(m, name, INT, kopt_reply_put_int, (int64_t)(v))
#define KOPT_REPLY_NUM(m, name, v) KOPT_REPLY_PUT_(m, name, NUM, kopt_reply_put_num, (double)(v))
#define KOPT_REPLY_STR(m, name, v) KOPT_REPLY_PUT_(m, name, STR, kopt_reply_put_str, v)

#endif
