/* Putting a run reply's fields by the list of reply_fields.h. */
#include <stdio.h>
#include <stdlib.h>

#include "worker/reply.h"

static const struct {
	const char *name;
	enum kopt_reply_type type;
} fields[KOPT_REPLY_NFIELDS] = {
#define X(name, type, doc) {#name, KOPT_REPLY_T_##type},
    KOPT_REPLY_FIELDS(X)
#undef X
};

/* The field's entry, checked against the type the caller puts; a mismatch
 * or an out-of-range field is a bug in the worker, not an outcome. */
static const char *checked(enum kopt_reply_field f, enum kopt_reply_type type)
{
	if ((unsigned)f >= KOPT_REPLY_NFIELDS || fields[f].type != type) {
		fprintf(stderr, "kopt worker: reply field %d put with the wrong type\n", (int)f);
		abort();
	}
	return fields[f].name;
}

const char *kopt_reply_name(enum kopt_reply_field f)
{
	return (unsigned)f < KOPT_REPLY_NFIELDS ? fields[f].name : NULL;
}

void kopt_reply_put_int(struct kopt_msg *m, enum kopt_reply_field f, int64_t v)
{
	kopt_msg_put_int(m, checked(f, KOPT_REPLY_T_INT), v);
}

void kopt_reply_put_num(struct kopt_msg *m, enum kopt_reply_field f, double v)
{
	kopt_msg_put_num(m, checked(f, KOPT_REPLY_T_NUM), v);
}

void kopt_reply_put_str(struct kopt_msg *m, enum kopt_reply_field f, const char *s)
{
	kopt_msg_put_cstr(m, checked(f, KOPT_REPLY_T_STR), s);
}

void kopt_reply_put_metric(struct kopt_msg *m, const char *metric, double v)
{
	char key[300];
	/* the one family today; a second would give this function a parameter */
#define PREFIX(name, prefix, type, doc) prefix
	snprintf(key, sizeof key, "%s%s", KOPT_REPLY_PREFIXES(PREFIX), metric);
#undef PREFIX
	kopt_msg_put_num(m, key, v);
}
