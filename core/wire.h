/* The framed protocol between kopt and its GPU worker processes.
 *
 * A frame is an 8-byte header (the magic "KOPW" and a little-endian u32
 * payload length) followed by the payload. A payload is a flat list of typed
 * fields: [u8 type][u16 key length][key][value], where the type is 'i' (i64),
 * 'd' (f64) or 's' (u32 length + bytes; binary-safe: CUBINs travel as 's').
 * Structured data uses dotted keys ("a3.type"). Integers are little-endian;
 * both ends run on the same host. Frames are capped at KOPT_WIRE_MAX. */
#ifndef KOPT_WIRE_H
#define KOPT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define KOPT_WIRE_MAX (256u << 20)

/* A payload under construction. Zero-initialise, then put; the caller frees
 * with kopt_msg_release. Put functions return -1 only when out of memory or
 * over KOPT_WIRE_MAX (the message is then marked failed and later puts do
 * nothing). */
struct kopt_msg {
	unsigned char *buf;
	size_t len, cap;
	int failed;
};

int kopt_msg_put_int(struct kopt_msg *m, const char *key, int64_t v);
int kopt_msg_put_num(struct kopt_msg *m, const char *key, double v);
int kopt_msg_put_str(struct kopt_msg *m, const char *key, const void *s, size_t len);
int kopt_msg_put_cstr(struct kopt_msg *m, const char *key, const char *s);
void kopt_msg_release(struct kopt_msg *m);

/* A parsed payload: fields point into the buffer given to kopt_msgview_parse,
 * which must outlive the view. Release with kopt_msgview_release. */
struct kopt_field {
	const char *key;
	size_t keylen;
	char type; /* 'i' 'd' 's' */
	int64_t i;
	double d;
	const char *s;
	size_t slen;
};

struct kopt_msgview {
	struct kopt_field *fields;
	size_t count;
};

int kopt_msgview_parse(struct kopt_msgview *v, const void *buf, size_t len, char *err,
		       size_t errlen);
void kopt_msgview_release(struct kopt_msgview *v);

/* Lookups by key; a field of another numeric type is converted. */
const struct kopt_field *kopt_msg_find(const struct kopt_msgview *v, const char *key);
int64_t kopt_msg_int(const struct kopt_msgview *v, const char *key, int64_t def);
double kopt_msg_num(const struct kopt_msgview *v, const char *key, double def);
/* NUL-terminated copy of the field, or of def when absent, into buf
 * (truncated); returns buf, or NULL when absent and def is NULL. */
const char *kopt_msg_cstr(const struct kopt_msgview *v, const char *key, char *buf, size_t buflen,
			  const char *def);
/* Borrowed bytes (valid as long as the view's buffer); NULL when absent. */
const char *kopt_msg_bytes(const struct kopt_msgview *v, const char *key, size_t *len);

/* Writes one frame, retrying on EINTR and short writes. -1 on error (EPIPE
 * when the peer died: callers ignore SIGPIPE). */
int kopt_wire_write(int fd, const void *payload, size_t len, char *err, size_t errlen);

/* Reads one frame into a malloc'ed buffer (caller frees). timeout_ms < 0
 * waits forever. Returns 0 on success, 1 on timeout (nothing consumed), -1 on
 * EOF or a broken frame (message in err). */
int kopt_wire_read(int fd, unsigned char **payload, size_t *len, int timeout_ms, char *err,
		   size_t errlen);

#endif
