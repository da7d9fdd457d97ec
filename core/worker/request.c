/* Decoding a "run" request into struct kopt_request, once, by the field list
 * of request_fields.h. */
#include <string.h>

#include "worker/request.h"

#define DECODE_INT(n, d) r->n = kopt_msg_int(v, #n, d);
#define DECODE_FLAG(n, d) r->n = kopt_msg_int(v, #n, d);
#define DECODE_NUM(n, d) r->n = kopt_msg_num(v, #n, d);
#define DECODE_BYTES(n, d)                                                                     \
	r->n##_len = 0;                                                                        \
	r->n = kopt_msg_bytes(v, #n, &r->n##_len);
#define DECODE_STR(n, d) kopt_msg_cstr(v, #n, r->n, sizeof r->n, d);
#define DECODE_STR_64 DECODE_STR
#define DECODE_STR_128 DECODE_STR
#define DECODE_STR_256 DECODE_STR
#define DECODE_STR_1024 DECODE_STR
#define DECODE_STR_8192 DECODE_STR

void kopt_request_decode(const struct kopt_msgview *v, struct kopt_request *r)
{
	memset(r, 0, sizeof *r);
#define X(name, type, need, def, doc) DECODE_##type(name, def)
	KOPT_REQUEST_FIELDS(X)
#undef X
}
