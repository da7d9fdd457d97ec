/* Concurrent HTTP POST with retries over the libcurl multi interface. One easy
 * handle per request, reused across its attempts; a request waiting out its
 * backoff is simply not in the multi handle. Callbacks only copy bytes and
 * never fail except to stop an oversized body (STYLE.md 6). */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "http.h"
#include "sys.h"

#define HEADER_CAP (64u * 1024u)

struct buf {
	char *data;
	size_t len, cap;
};

enum state { WAITING, RUNNING, FINISHED };

struct transfer {
	CURL *easy;
	double timeout_s; /* of one attempt */
	struct curl_slist *hdrs;
	struct buf body, head;
	size_t max_body;
	int overflow;
	enum state state;
	double next_start;
	int attempts;
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void kopt_http_options_init(struct kopt_http_options *opts)
{
	memset(opts, 0, sizeof *opts);
	opts->connect_timeout_s = 10;
	opts->timeout_s = 120;
	opts->max_retries = 2;
	opts->backoff_initial_s = 0.5;
	opts->backoff_max_s = 8;
	opts->retry_after_max_s = 60;
	opts->max_body = 8u * 1024u * 1024u;
}

void kopt_http_response_release(struct kopt_http_response *resp)
{
	free(resp->body);
	free(resp->headers);
	resp->body = NULL;
	resp->headers = NULL;
	resp->body_len = 0;
	resp->headers_len = 0;
}

/* Appends n bytes, keeping a NUL after the data. Returns 0, or -1 when out of
 * memory. */
static int buf_append(struct buf *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (d == NULL)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct transfer *t = arg;
	size_t n = size * nmemb;
	if (t->body.len + n > t->max_body || buf_append(&t->body, p, n) != 0) {
		t->overflow = 1;
		return 0; /* curl stops the transfer with CURLE_WRITE_ERROR */
	}
	return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct transfer *t = arg;
	size_t n = size * nmemb;
	/* A status line starts a new response (after 100 Continue or a retry). */
	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0)
		buf_reset(&t->head);
	if (t->head.len + n <= HEADER_CAP)
		(void)buf_append(&t->head, p, n); /* dropping a header is harmless */
	return n;
}

/* Copies the value of header `name` (case-insensitive) into out. Returns 1
 * when found. */
static int header_value(const char *headers, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);
	for (const char *line = headers; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len > nlen && strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
			const char *v = line + nlen + 1;
			const char *stop = line + len;
			while (v < stop && isspace((unsigned char)*v))
				v++;
			while (stop > v && isspace((unsigned char)stop[-1]))
				stop--;
			size_t vlen = (size_t)(stop - v);
			if (vlen >= outlen)
				vlen = outlen - 1;
			memcpy(out, v, vlen);
			out[vlen] = '\0';
			return 1;
		}
		line = end ? end + 1 : NULL;
	}
	return 0;
}

double kopt_http_retry_after(const char *headers)
{
	char v[128];
	if (headers == NULL)
		return -1;
	if (header_value(headers, "retry-after-ms", v, sizeof v)) {
		char *end;
		double ms = strtod(v, &end);
		if (end != v && *end == '\0' && ms >= 0)
			return ms / 1000.0;
	}
	if (header_value(headers, "retry-after", v, sizeof v)) {
		char *end;
		double s = strtod(v, &end);
		if (end != v && *end == '\0' && s >= 0)
			return s;
		time_t when = curl_getdate(v, NULL);
		if (when != (time_t)-1)
			return difftime(when, time(NULL));
	}
	return -1;
}

static double next_random(unsigned long long *state)
{
	unsigned long long x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return (double)(x >> 11) / 9007199254740992.0; /* [0, 1) */
}

static int status_retryable(long status, const struct transfer *t)
{
	char v[16];
	if (header_value(t->head.data, "x-should-retry", v, sizeof v)) {
		if (strcmp(v, "true") == 0)
			return 1;
		if (strcmp(v, "false") == 0)
			return 0;
	}
	if (status == 429 && t->body.data && strstr(t->body.data, "insufficient_quota"))
		return 0; /* out of money: waiting will not help */
	return status == 408 || status == 409 || status == 429 || status >= 500;
}

static double retry_delay(const struct transfer *t, int retry, const struct kopt_http_options *o,
			  unsigned long long *rng)
{
	/* what the server asks, at most retry_after_max_s: a longer wait asked
	 * for is waited up to that bound, not replaced by a short backoff that
	 * would meet the same 429 */
	double server = kopt_http_retry_after(t->head.data);
	if (server > 0)
		return server < o->retry_after_max_s ? server : o->retry_after_max_s;
	double d = o->backoff_initial_s;
	for (int i = 0; i < retry && d < o->backoff_max_s; i++)
		d *= 2;
	if (d > o->backoff_max_s)
		d = o->backoff_max_s;
	return d * (1 - 0.25 * next_random(rng));
}

/* Milliseconds, at least 1: libcurl reads a timeout of 0 as none. */
static long ms(double s)
{
	long v = (long)(s * 1000.0 + 0.5);
	return v < 1 ? 1 : v;
}

static int transfer_setup(struct transfer *t, const struct kopt_http_request *r,
			  const struct kopt_http_options *o, char *err, size_t errlen)
{
	t->easy = curl_easy_init();
	if (t->easy == NULL) {
		snprintf(err, errlen, "curl_easy_init failed");
		return -1;
	}
	for (size_t i = 0; i < r->n_headers; i++) {
		struct curl_slist *l = curl_slist_append(t->hdrs, r->headers[i]);
		if (l == NULL)
			goto oom;
		t->hdrs = l;
	}
	/* No "Expect: 100-continue" round trip for large prompts. */
	struct curl_slist *l = curl_slist_append(t->hdrs, "Expect:");
	if (l == NULL)
		goto oom;
	t->hdrs = l;
	double timeout = r->timeout_s > 0 ? r->timeout_s : o->timeout_s;
	CURL *e = t->easy;
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->hdrs);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body ? r->body : "");
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(r->body ? r->body_len : 0));
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(e, CURLOPT_PRIVATE, t);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ms(o->connect_timeout_s));
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms(timeout));
	t->timeout_s = timeout;
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (o->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(e, CURLOPT_USERAGENT, "kopt/" KOPT_VERSION);
	return 0;
oom:
	snprintf(err, errlen, "out of memory building request headers");
	return -1;
}

static void transfer_free(struct transfer *t, CURLM *multi)
{
	if (t->easy) {
		if (t->state == RUNNING)
			curl_multi_remove_handle(multi, t->easy);
		curl_easy_cleanup(t->easy);
	}
	curl_slist_free_all(t->hdrs);
	free(t->body.data);
	free(t->head.data);
	memset(t, 0, sizeof *t);
}

/* Moves the transfer's last attempt into the response (takes its buffers). */
static void finish(struct transfer *t, struct kopt_http_response *resp, long status, double elapsed)
{
	resp->status = status;
	resp->body = t->body.data ? t->body.data : calloc(1, 1);
	resp->body_len = t->body.len;
	resp->headers = t->head.data ? t->head.data : calloc(1, 1);
	resp->headers_len = t->head.len;
	resp->attempts = t->attempts;
	resp->elapsed_s = elapsed;
	memset(&t->body, 0, sizeof t->body);
	memset(&t->head, 0, sizeof t->head);
	t->state = FINISHED;
}

static void on_done(struct transfer *t, CURLcode code, struct kopt_http_response *resp,
		    const struct kopt_http_options *o, unsigned long long *rng, double t0)
{
	long status = 0;
	curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
	double now = kopt_sys_now();
	resp->err[0] = '\0';
	int retry;
	if (t->overflow) {
		snprintf(resp->err, sizeof resp->err, "response body exceeds %zu bytes",
			 t->max_body);
		retry = 0;
	} else if (code != CURLE_OK) {
		snprintf(resp->err, sizeof resp->err, "%s",
			 t->errbuf[0] ? t->errbuf : curl_easy_strerror(code));
		/* a URL or a certificate that is wrong stays wrong: no retry */
		retry = code != CURLE_UNSUPPORTED_PROTOCOL && code != CURLE_URL_MALFORMAT &&
			code != CURLE_PEER_FAILED_VERIFICATION && code != CURLE_SSL_CACERT_BADFILE;
	} else {
		retry = status_retryable(status, t);
	}
	if (retry && t->attempts <= o->max_retries) {
		double start = now + retry_delay(t, t->attempts - 1, o, rng);
		/* (a retry with under a tenth of a second left could not finish) */
		if (o->deadline_s <= 0 || start < t0 + o->deadline_s - 0.1) {
			t->state = WAITING;
			t->next_start = start;
			return;
		}
	}
	finish(t, resp, status, now - t0);
}

int kopt_http_request_many(const struct kopt_http_request *reqs, struct kopt_http_response *resps,
			   size_t n, const struct kopt_http_options *opts, char *err, size_t errlen)
{
	int rc = -1;
	CURLM *multi = NULL;
	struct transfer *ts = NULL;
	struct kopt_http_options o;
	if (opts)
		o = *opts;
	else
		kopt_http_options_init(&o);
	if (err && errlen)
		err[0] = '\0';
	memset(resps, 0, n * sizeof *resps);
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		snprintf(err, errlen, "curl_global_init: %s", curl_easy_strerror(global_rc));
		goto out;
	}
	if (n == 0)
		return 0;
	unsigned long long rng =
	    o.seed ? o.seed : (unsigned long long)time(NULL) ^ 0x9e3779b97f4a7c15ull;
	if (rng == 0)
		rng = 1;
	ts = calloc(n, sizeof *ts);
	multi = curl_multi_init();
	if (ts == NULL || multi == NULL) {
		snprintf(err, errlen, "out of memory starting %zu HTTP requests", n);
		goto out;
	}
	double t0 = kopt_sys_now();
	for (size_t i = 0; i < n; i++) {
		ts[i].max_body = o.max_body;
		ts[i].next_start = t0;
		if (transfer_setup(&ts[i], &reqs[i], &o, err, errlen) != 0)
			goto out;
	}
	size_t left = n;
	while (left > 0) {
		if (o.should_abort && o.should_abort(o.abort_arg)) {
			snprintf(err, errlen, "interrupted");
			goto out;
		}
		double now = kopt_sys_now();
		double wait = 0.2;
		for (size_t i = 0; i < n; i++) {
			struct transfer *t = &ts[i];
			if (t->state != WAITING)
				continue;
			if (t->next_start > now) {
				if (t->next_start - now < wait)
					wait = t->next_start - now;
				continue;
			}
			buf_reset(&t->body);
			buf_reset(&t->head);
			t->overflow = 0;
			t->errbuf[0] = '\0';
			t->attempts++;
			if (o.deadline_s > 0) {
				double left_s = t0 + o.deadline_s - now;
				double cap = left_s < t->timeout_s ? left_s : t->timeout_s;
				curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS,
						 ms(cap > 0.1 ? cap : 0.1));
			}
			if (curl_multi_add_handle(multi, t->easy) != CURLM_OK) {
				snprintf(resps[i].err, sizeof resps[i].err,
					 "curl_multi_add_handle failed");
				finish(t, &resps[i], 0, now - t0);
				left--;
				continue;
			}
			t->state = RUNNING;
			wait = 0;
		}
		int running = 0;
		CURLMcode mc = curl_multi_perform(multi, &running);
		if (mc != CURLM_OK) {
			snprintf(err, errlen, "curl_multi_perform: %s", curl_multi_strerror(mc));
			goto out;
		}
		CURLMsg *msg;
		int queued;
		while ((msg = curl_multi_info_read(multi, &queued)) != NULL) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct transfer *t = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
			CURLcode code = msg->data.result;
			curl_multi_remove_handle(multi, t->easy);
			t->state = WAITING;
			size_t i = (size_t)(t - ts);
			on_done(t, code, &resps[i], &o, &rng, t0);
			if (t->state == FINISHED)
				left--;
			else
				wait = 0;
		}
		if (left > 0 && wait > 0) {
			mc = curl_multi_poll(multi, NULL, 0, (int)ms(wait < 0.001 ? 0.001 : wait),
					     NULL);
			if (mc != CURLM_OK) {
				snprintf(err, errlen, "curl_multi_poll: %s",
					 curl_multi_strerror(mc));
				goto out;
			}
		}
	}
	rc = 0;
out:
	if (ts) {
		for (size_t i = 0; i < n; i++)
			transfer_free(&ts[i], multi);
		free(ts);
	}
	if (multi)
		curl_multi_cleanup(multi);
	return rc;
}
