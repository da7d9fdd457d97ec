#ifndef KOPT_HTTP_H
#define KOPT_HTTP_H
#include <stddef.h>

/* HTTP POST for LLM endpoints over the libcurl multi interface: every request
 * of a batch is in flight at once, each with its own retries. The client only
 * moves bytes; building requests and reading replies is the caller's job.
 *
 * Retry policy (the one OpenAI's own clients use): a response is retried when
 * its status is 408, 409, 429 or >= 500, or the server sends
 * "x-should-retry: true", or the transfer failed (connect error, timeout,
 * truncated body); never on other 4xx (bad request, auth, quota), never on a
 * 429 whose body says "insufficient_quota", never when "x-should-retry: false".
 * The delay is the server's retry-after-ms / retry-after (seconds or HTTP date)
 * when it lies in (0, retry_after_max_s], else
 * min(backoff_initial_s * 2^n, backoff_max_s) * (1 - 0.25 * U[0,1)). */

struct kopt_http_request {
	const char *url;               /* borrowed for the duration of the call */
	const char *const *headers;    /* "Name: value" lines, borrowed; may be NULL */
	size_t n_headers;
	const char *body;              /* POST body, borrowed */
	size_t body_len;
	double timeout_s;              /* total time of one attempt; <= 0: the option's */
};

struct kopt_http_response {
	long status;                   /* HTTP status of the last attempt, 0 if none */
	char *body;                    /* NUL-terminated; caller frees with kopt_http_response_release */
	size_t body_len;
	char *headers;                 /* raw header block of the last attempt, NUL-terminated */
	size_t headers_len;
	int attempts;                  /* attempts made (1 = no retry) */
	double elapsed_s;              /* from the start of the batch to the final answer */
	char err[256];                 /* transport failure of the last attempt, "" when none */
};

struct kopt_http_options {
	double connect_timeout_s;      /* default 10 */
	double timeout_s;              /* default per-attempt total, default 120 */
	int max_retries;               /* retries after the first attempt, default 2 */
	double backoff_initial_s;      /* default 0.5 */
	double backoff_max_s;          /* default 8 */
	double retry_after_max_s;      /* server delays above this are ignored, default 60 */
	/* > 0: the whole batch, retry waits included, ends within this many
	 * seconds: a retry that would start past it is not made, and an attempt
	 * gets at most the time left. 0 (default): no limit */
	double deadline_s;
	size_t max_body;               /* cap on a response body, default 8 MiB; more is an error */
	unsigned long seed;            /* jitter seed; 0 picks one from the clock */
	const char *ca_file;           /* extra CA bundle (tests); NULL: system store */
	/* Polled between transfers; non-zero abandons the batch (Ctrl-C). */
	int (*should_abort)(void *arg);
	void *abort_arg;
};

/* Fills opts with the defaults above. */
void kopt_http_options_init(struct kopt_http_options *opts);

/* Runs n requests concurrently and fills resps[0..n) (cleared on entry).
 * Every response must be released by the caller, also on failure. Returns 0
 * when the batch ran (each response then says how its request ended: a status
 * or an err), -1 with a message in err when the batch could not run at all
 * (libcurl failed to initialise, abandoned by should_abort). */
int kopt_http_request_many(const struct kopt_http_request *reqs, struct kopt_http_response *resps,
			   size_t n, const struct kopt_http_options *opts, char *err, size_t errlen);

/* Frees what a response owns and clears it; idempotent. */
void kopt_http_response_release(struct kopt_http_response *resp);

/* Delay in seconds asked for by a raw header block (retry-after-ms or
 * retry-after), or -1 when there is none or it cannot be read. */
double kopt_http_retry_after(const char *headers);

#endif
