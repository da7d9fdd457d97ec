/* Framed, typed messages over pipes; see wire.h. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"

static const unsigned char magic[4] = {'K', 'O', 'P', 'W'};

static int reserve(struct kopt_msg *m, size_t extra)
{
	if (m->failed)
		return -1;
	if (m->len + extra > KOPT_WIRE_MAX) {
		m->failed = 1;
		return -1;
	}
	if (m->len + extra <= m->cap)
		return 0;
	size_t cap = m->cap ? m->cap : 256;
	while (cap < m->len + extra)
		cap *= 2;
	unsigned char *b = realloc(m->buf, cap);
	if (b == NULL) {
		m->failed = 1;
		return -1;
	}
	m->buf = b;
	m->cap = cap;
	return 0;
}

static int put_head(struct kopt_msg *m, const char *key, char type, size_t value_len)
{
	size_t klen = strlen(key);
	if (klen > 0xffff || reserve(m, 3 + klen + value_len) != 0)
		return -1;
	m->buf[m->len++] = (unsigned char)type;
	m->buf[m->len++] = (unsigned char)(klen & 0xff);
	m->buf[m->len++] = (unsigned char)(klen >> 8);
	memcpy(m->buf + m->len, key, klen);
	m->len += klen;
	return 0;
}

int kopt_msg_put_int(struct kopt_msg *m, const char *key, int64_t v)
{
	if (put_head(m, key, 'i', 8) != 0)
		return -1;
	memcpy(m->buf + m->len, &v, 8);
	m->len += 8;
	return 0;
}

int kopt_msg_put_num(struct kopt_msg *m, const char *key, double v)
{
	if (put_head(m, key, 'd', 8) != 0)
		return -1;
	memcpy(m->buf + m->len, &v, 8);
	m->len += 8;
	return 0;
}

int kopt_msg_put_str(struct kopt_msg *m, const char *key, const void *s, size_t len)
{
	if (len > KOPT_WIRE_MAX || put_head(m, key, 's', 4 + len) != 0)
		return -1;
	uint32_t n = (uint32_t)len;
	memcpy(m->buf + m->len, &n, 4);
	m->len += 4;
	if (len > 0)
		memcpy(m->buf + m->len, s, len);
	m->len += len;
	return 0;
}

int kopt_msg_put_cstr(struct kopt_msg *m, const char *key, const char *s)
{
	return kopt_msg_put_str(m, key, s, strlen(s));
}

void kopt_msg_release(struct kopt_msg *m)
{
	free(m->buf);
	memset(m, 0, sizeof *m);
}

int kopt_msgview_parse(struct kopt_msgview *v, const void *buf, size_t len, char *err,
		       size_t errlen)
{
	const unsigned char *p = buf, *end = p + len;
	size_t cap = 0;
	v->fields = NULL;
	v->count = 0;
	while (p < end) {
		if (end - p < 3)
			goto broken;
		char type = (char)p[0];
		size_t klen = (size_t)p[1] | (size_t)p[2] << 8;
		p += 3;
		if ((size_t)(end - p) < klen)
			goto broken;
		struct kopt_field f = {(const char *)p, klen, type, 0, 0.0, NULL, 0};
		p += klen;
		if (type == 'i' || type == 'd') {
			if (end - p < 8)
				goto broken;
			if (type == 'i')
				memcpy(&f.i, p, 8);
			else
				memcpy(&f.d, p, 8);
			p += 8;
		} else if (type == 's') {
			uint32_t n;
			if (end - p < 4)
				goto broken;
			memcpy(&n, p, 4);
			p += 4;
			if ((size_t)(end - p) < n)
				goto broken;
			f.s = (const char *)p;
			f.slen = n;
			p += n;
		} else {
			goto broken;
		}
		if (v->count == cap) {
			cap = cap ? cap * 2 : 32;
			struct kopt_field *nf = realloc(v->fields, cap * sizeof *nf);
			if (nf == NULL) {
				snprintf(err, errlen, "out of memory parsing a message");
				kopt_msgview_release(v);
				return -1;
			}
			v->fields = nf;
		}
		v->fields[v->count++] = f;
	}
	return 0;
broken:
	snprintf(err, errlen, "malformed message at byte %zu of %zu",
		 (size_t)(p - (const unsigned char *)buf), len);
	kopt_msgview_release(v);
	return -1;
}

void kopt_msgview_release(struct kopt_msgview *v)
{
	free(v->fields);
	v->fields = NULL;
	v->count = 0;
}

const struct kopt_field *kopt_msg_find(const struct kopt_msgview *v, const char *key)
{
	size_t klen = strlen(key);
	for (size_t i = 0; i < v->count; i++)
		if (v->fields[i].keylen == klen && memcmp(v->fields[i].key, key, klen) == 0)
			return &v->fields[i];
	return NULL;
}

int64_t kopt_msg_int(const struct kopt_msgview *v, const char *key, int64_t def)
{
	const struct kopt_field *f = kopt_msg_find(v, key);
	if (f == NULL)
		return def;
	if (f->type == 'i')
		return f->i;
	if (f->type == 'd')
		return (int64_t)f->d;
	return def;
}

double kopt_msg_num(const struct kopt_msgview *v, const char *key, double def)
{
	const struct kopt_field *f = kopt_msg_find(v, key);
	if (f == NULL)
		return def;
	if (f->type == 'd')
		return f->d;
	if (f->type == 'i')
		return (double)f->i;
	return def;
}

const char *kopt_msg_cstr(const struct kopt_msgview *v, const char *key, char *buf, size_t buflen,
			  const char *def)
{
	const struct kopt_field *f = kopt_msg_find(v, key);
	if (buflen == 0)
		return def;
	const char *src = def;
	size_t len = def ? strlen(def) : 0;
	if (f != NULL && f->type == 's')
		src = f->s, len = f->slen;
	else if (def == NULL)
		return NULL;
	/* buf always holds the answer, the default included: callers may read
	 * buf rather than the returned pointer */
	size_t n = len < buflen - 1 ? len : buflen - 1;
	memcpy(buf, src, n);
	buf[n] = '\0';
	return buf;
}

const char *kopt_msg_bytes(const struct kopt_msgview *v, const char *key, size_t *len)
{
	const struct kopt_field *f = kopt_msg_find(v, key);
	*len = 0;
	if (f == NULL || f->type != 's')
		return NULL;
	*len = f->slen;
	return f->s;
}

enum { MID_FRAME_MS = 5000 };

static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads n bytes. stall_ms >= 0: the most it waits for the next bytes once
 * a frame has begun (2: it stalled; the stream is out of step then, so the
 * caller drops the worker); -1: no limit. 1: end of file. */
static int read_all(int fd, unsigned char *p, size_t n, int stall_ms)
{
	while (n > 0) {
		if (stall_ms >= 0) {
			struct pollfd pfd = {fd, POLLIN, 0};
			int pr;
			do
				pr = poll(&pfd, 1, stall_ms);
			while (pr < 0 && errno == EINTR);
			if (pr == 0)
				return 2;
		}
		ssize_t r = read(fd, p, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			return 1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int kopt_wire_write(int fd, const void *payload, size_t len, char *err, size_t errlen)
{
	if (len > KOPT_WIRE_MAX) {
		snprintf(err, errlen, "message of %zu bytes over the %u-byte limit", len,
			 KOPT_WIRE_MAX);
		return -1;
	}
	unsigned char head[8];
	uint32_t n = (uint32_t)len;
	memcpy(head, magic, 4);
	memcpy(head + 4, &n, 4);
	if (write_all(fd, head, 8) != 0 || write_all(fd, payload, len) != 0) {
		snprintf(err, errlen, "write to worker pipe: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int kopt_wire_read(int fd, unsigned char **payload, size_t *len, int timeout_ms, char *err,
		   size_t errlen)
{
	*payload = NULL;
	*len = 0;
	struct pollfd pfd = {fd, POLLIN, 0};
	int pr;
	do
		pr = poll(&pfd, 1, timeout_ms);
	while (pr < 0 && errno == EINTR);
	if (pr == 0)
		return 1;
	if (pr < 0) {
		snprintf(err, errlen, "poll: %s", strerror(errno));
		return -1;
	}
	/* once a frame has begun, a caller's timeout still holds, but at least
	 * MID_FRAME_MS between chunks: a large message arrives as the pipe drains */
	int stall_ms = timeout_ms < 0 ? -1 : timeout_ms > MID_FRAME_MS ? timeout_ms : MID_FRAME_MS;
	unsigned char head[8];
	int r = read_all(fd, head, 8, stall_ms);
	if (r != 0) {
		snprintf(err, errlen, "%s",
			 r == 2	 ? "the worker stopped sending mid-frame"
			 : r > 0 ? "pipe closed"
				 : strerror(errno));
		return -1;
	}
	uint32_t n;
	memcpy(&n, head + 4, 4);
	if (memcmp(head, magic, 4) != 0 || n > KOPT_WIRE_MAX) {
		snprintf(err, errlen, "bad frame header");
		return -1;
	}
	unsigned char *buf = malloc(n ? n : 1);
	if (buf == NULL) {
		snprintf(err, errlen, "out of memory for a %u-byte message", n);
		return -1;
	}
	r = read_all(fd, buf, n, stall_ms);
	if (r != 0) {
		free(buf);
		snprintf(err, errlen, "%s",
			 r == 2	 ? "the worker stopped sending mid-frame"
			 : r > 0 ? "pipe closed mid-frame"
				 : strerror(errno));
		return -1;
	}
	*payload = buf;
	*len = n;
	return 0;
}
