/* Check suite for core/http.c against a small HTTP/1.1 server run in a thread
 * on loopback. The path of a request picks the server's behaviour:
 *   /ok            200 "hello"
 *   /slow/MS       200 after MS milliseconds
 *   /once429/ID    first hit per ID: 429 with Retry-After: 1, then 200
 *   /once500/ID    first hit per ID: 500, then 200
 *   /always500     500
 *   /quota         429 with an insufficient_quota body
 *   /unauthorized  401
 *   /truncated     announces 100 bytes, sends 10, closes
 *   /big           200 with 100000 bytes
 *   /auth          200 echoing the Authorization header */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "http.h"
#include "sys.h"

static int server_fd = -1;
static int server_port;
static pthread_mutex_t hits_lock = PTHREAD_MUTEX_INITIALIZER;
static char seen[64][64];
static int n_seen;

/* Returns how many times path was requested before this call. */
static int count_hit(const char *path)
{
	pthread_mutex_lock(&hits_lock);
	int before = 0;
	for (int i = 0; i < n_seen; i++)
		if (strcmp(seen[i], path) == 0)
			before++;
	if (n_seen < 64)
		snprintf(seen[n_seen++], sizeof seen[0], "%s", path);
	pthread_mutex_unlock(&hits_lock);
	return before;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void reply(int fd, int status, const char *extra, const char *body)
{
	char head[512];
	int n = snprintf(head, sizeof head,
			 "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
			 status, strlen(body), extra ? extra : "");
	send_all(fd, head, (size_t)n);
	send_all(fd, body, strlen(body));
}

static void *serve_one(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char req[65536];
	size_t len = 0;
	char *end = NULL;
	while (len < sizeof req - 1) {
		ssize_t r = recv(fd, req + len, sizeof req - 1 - len, 0);
		if (r <= 0)
			break;
		len += (size_t)r;
		req[len] = '\0';
		if ((end = strstr(req, "\r\n\r\n")) != NULL) {
			const char *cl = strcasestr(req, "content-length:");
			size_t want = cl ? (size_t)atol(cl + 15) : 0;
			if (len >= (size_t)(end + 4 - req) + want)
				break;
		}
	}
	char path[256] = "";
	sscanf(req, "%*s %255s", path);
	int before = count_hit(path);
	int ms;
	if (strcmp(path, "/ok") == 0) {
		reply(fd, 200, NULL, "hello");
	} else if (sscanf(path, "/slow/%d", &ms) == 1) {
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		reply(fd, 200, NULL, "slow");
	} else if (strncmp(path, "/once429/", 9) == 0) {
		if (before == 0)
			reply(fd, 429, "Retry-After: 1\r\n", "{\"error\":{\"code\":\"rate_limit_exceeded\"}}");
		else
			reply(fd, 200, NULL, "after429");
	} else if (strncmp(path, "/once429long/", 13) == 0) {
		if (before == 0)
			reply(fd, 429, "Retry-After: 120\r\n", "{\"error\":{\"code\":\"rate_limit_exceeded\"}}");
		else
			reply(fd, 200, NULL, "after429long");
	} else if (strncmp(path, "/once500/", 9) == 0) {
		reply(fd, before == 0 ? 500 : 200, NULL, before == 0 ? "oops" : "after500");
	} else if (strcmp(path, "/always500") == 0) {
		reply(fd, 500, NULL, "oops");
	} else if (strcmp(path, "/quota") == 0) {
		reply(fd, 429, NULL, "{\"error\":{\"code\":\"insufficient_quota\"}}");
	} else if (strcmp(path, "/unauthorized") == 0) {
		reply(fd, 401, NULL, "{\"error\":\"bad key\"}");
	} else if (strcmp(path, "/truncated") == 0) {
		const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n0123456789";
		send_all(fd, h, strlen(h));
	} else if (strcmp(path, "/big") == 0) {
		static char big[100001];
		memset(big, 'x', sizeof big - 1);
		reply(fd, 200, NULL, big);
	} else if (strcmp(path, "/auth") == 0) {
		char v[256] = "";
		const char *a = strcasestr(req, "\r\nauthorization: ");
		if (a)
			sscanf(a + 17, "%255[^\r]", v);
		reply(fd, 200, "X-Request-Id: req-1\r\n", v);
	} else {
		reply(fd, 404, NULL, "no such path");
	}
	close(fd);
	return NULL;
}

static void *accept_loop(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(server_fd, NULL, NULL);
		if (fd < 0)
			return NULL;
		pthread_t t;
		pthread_create(&t, NULL, serve_one, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

static void start_server(void)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	server_fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(server_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	ck_assert_int_eq(bind(server_fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(server_fd, 64), 0);
	socklen_t alen = sizeof a;
	getsockname(server_fd, (struct sockaddr *)&a, &alen);
	server_port = ntohs(a.sin_port);
	pthread_t t;
	pthread_create(&t, NULL, accept_loop, NULL);
	pthread_detach(t);
}

static void url(char *buf, size_t n, const char *path)
{
	snprintf(buf, n, "http://127.0.0.1:%d%s", server_port, path);
}

/* Runs one request to path with the given retries; fills resp. */
static void one(const char *path, struct kopt_http_options *o, struct kopt_http_response *resp)
{
	char u[256], err[256];
	url(u, sizeof u, path);
	struct kopt_http_request r = {u, NULL, 0, "{}", 2, 0};
	ck_assert_int_eq(kopt_http_request_many(&r, resp, 1, o, err, sizeof err), 0);
}

static void fast_options(struct kopt_http_options *o)
{
	kopt_http_options_init(o);
	o->backoff_initial_s = 0.05;
	o->backoff_max_s = 0.2;
	o->timeout_s = 10;
	o->seed = 7;
}

START_TEST(test_ok_and_headers)
{
	struct kopt_http_options o;
	fast_options(&o);
	char u[256], err[256];
	url(u, sizeof u, "/auth");
	const char *hdrs[] = {"Authorization: Bearer sk-test", "Content-Type: application/json"};
	struct kopt_http_request r = {u, hdrs, 2, "{\"a\":1}", 7, 0};
	struct kopt_http_response resp;
	ck_assert_int_eq(kopt_http_request_many(&r, &resp, 1, &o, err, sizeof err), 0);
	ck_assert_int_eq(resp.status, 200);
	ck_assert_str_eq(resp.body, "Bearer sk-test");
	ck_assert_int_eq(resp.attempts, 1);
	ck_assert_str_eq(resp.err, "");
	ck_assert_ptr_nonnull(strstr(resp.headers, "X-Request-Id: req-1"));
	kopt_http_response_release(&resp);
	kopt_http_response_release(&resp); /* idempotent */
}
END_TEST

/* Three requests that each take 1 s on the server finish together. */
START_TEST(test_parallel)
{
	struct kopt_http_options o;
	fast_options(&o);
	char u[256], err[256];
	url(u, sizeof u, "/slow/1000");
	struct kopt_http_request r[3] = {{u, NULL, 0, "{}", 2, 0}, {u, NULL, 0, "{}", 2, 0},
					 {u, NULL, 0, "{}", 2, 0}};
	struct kopt_http_response resp[3];
	double t0 = kopt_sys_now();
	ck_assert_int_eq(kopt_http_request_many(r, resp, 3, &o, err, sizeof err), 0);
	double dt = kopt_sys_now() - t0;
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(resp[i].status, 200);
		ck_assert_str_eq(resp[i].body, "slow");
		kopt_http_response_release(&resp[i]);
	}
	ck_assert_msg(dt >= 0.95 && dt < 2.0, "3 x 1 s requests took %.2f s", dt);
}
END_TEST

START_TEST(test_retry_after_429)
{
	struct kopt_http_options o;
	fast_options(&o);
	struct kopt_http_response resp;
	double t0 = kopt_sys_now();
	one("/once429/a", &o, &resp);
	double dt = kopt_sys_now() - t0;
	ck_assert_int_eq(resp.status, 200);
	ck_assert_str_eq(resp.body, "after429");
	ck_assert_int_eq(resp.attempts, 2);
	/* Retry-After: 1 wins over the 0.05 s backoff. */
	ck_assert_msg(dt >= 0.95 && dt < 3, "waited %.2f s", dt);
	kopt_http_response_release(&resp);
}
END_TEST

/* A Retry-After past the bound is waited up to the bound, not replaced by
 * the short backoff (which would meet the same 429 again). */
START_TEST(test_retry_after_capped)
{
	struct kopt_http_options o;
	fast_options(&o);
	o.retry_after_max_s = 0.6;
	struct kopt_http_response resp;
	double t0 = kopt_sys_now();
	one("/once429long/a", &o, &resp);
	double dt = kopt_sys_now() - t0;
	ck_assert_int_eq(resp.status, 200);
	ck_assert_int_eq(resp.attempts, 2);
	ck_assert_msg(dt >= 0.55 && dt < 3, "waited %.2f s", dt);
	kopt_http_response_release(&resp);
}
END_TEST

START_TEST(test_500_then_ok)
{
	struct kopt_http_options o;
	fast_options(&o);
	struct kopt_http_response resp;
	one("/once500/a", &o, &resp);
	ck_assert_int_eq(resp.status, 200);
	ck_assert_str_eq(resp.body, "after500");
	ck_assert_int_eq(resp.attempts, 2);
	kopt_http_response_release(&resp);
	one("/always500", &o, &resp);
	ck_assert_int_eq(resp.status, 500);
	ck_assert_int_eq(resp.attempts, 3);
	kopt_http_response_release(&resp);
}
END_TEST

START_TEST(test_no_retry_on_client_errors)
{
	struct kopt_http_options o;
	fast_options(&o);
	struct kopt_http_response resp;
	one("/quota", &o, &resp);
	ck_assert_int_eq(resp.status, 429);
	ck_assert_int_eq(resp.attempts, 1);
	kopt_http_response_release(&resp);
	one("/unauthorized", &o, &resp);
	ck_assert_int_eq(resp.status, 401);
	ck_assert_int_eq(resp.attempts, 1);
	ck_assert_str_eq(resp.body, "{\"error\":\"bad key\"}");
	kopt_http_response_release(&resp);
}
END_TEST

START_TEST(test_timeout)
{
	struct kopt_http_options o;
	fast_options(&o);
	o.max_retries = 0;
	o.timeout_s = 0.5;
	struct kopt_http_response resp;
	double t0 = kopt_sys_now();
	one("/slow/3000", &o, &resp);
	double dt = kopt_sys_now() - t0;
	ck_assert_int_eq(resp.status, 0);
	ck_assert_msg(resp.err[0] != '\0', "a timeout must carry an error");
	ck_assert_msg(dt < 1.5, "timeout of 0.5 s took %.2f s", dt);
	kopt_http_response_release(&resp);
}
END_TEST

START_TEST(test_truncated_and_oversized)
{
	struct kopt_http_options o;
	fast_options(&o);
	o.max_retries = 1;
	struct kopt_http_response resp;
	one("/truncated", &o, &resp);
	ck_assert_msg(resp.err[0] != '\0', "a truncated body must carry an error");
	ck_assert_int_eq(resp.attempts, 2); /* transport failures are retried */
	kopt_http_response_release(&resp);
	o.max_body = 1000;
	one("/big", &o, &resp);
	ck_assert_ptr_nonnull(strstr(resp.err, "exceeds 1000 bytes"));
	ck_assert_int_eq(resp.attempts, 1); /* the same body would come again */
	ck_assert_uint_le(resp.body_len, 1000);
	kopt_http_response_release(&resp);
}
END_TEST

START_TEST(test_connect_refused)
{
	struct kopt_http_options o;
	fast_options(&o);
	o.max_retries = 1;
	/* A port that was just free. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&a, sizeof a);
	socklen_t alen = sizeof a;
	getsockname(fd, (struct sockaddr *)&a, &alen);
	close(fd);
	char u[128], err[256];
	snprintf(u, sizeof u, "http://127.0.0.1:%d/ok", ntohs(a.sin_port));
	struct kopt_http_request r = {u, NULL, 0, "{}", 2, 0};
	struct kopt_http_response resp;
	ck_assert_int_eq(kopt_http_request_many(&r, &resp, 1, &o, err, sizeof err), 0);
	ck_assert_int_eq(resp.status, 0);
	ck_assert_int_eq(resp.attempts, 2);
	ck_assert_msg(resp.err[0] != '\0', "connection refused must carry an error");
	kopt_http_response_release(&resp);
}
END_TEST

START_TEST(test_retry_after_parse)
{
	ck_assert_double_eq_tol(kopt_http_retry_after("HTTP/1.1 429 X\r\nRetry-After: 3\r\n"), 3, 1e-9);
	ck_assert_double_eq_tol(kopt_http_retry_after("retry-after-ms: 250\r\nRetry-After: 3\r\n"), 0.25,
				1e-9);
	ck_assert_double_eq_tol(kopt_http_retry_after("Content-Type: x\r\n"), -1, 1e-9);
	ck_assert_double_eq_tol(kopt_http_retry_after("Retry-After: soon\r\n"), -1, 1e-9);
	char h[128];
	time_t when = time(NULL) + 30;
	struct tm tm;
	gmtime_r(&when, &tm);
	strftime(h, sizeof h, "Retry-After: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
	double d = kopt_http_retry_after(h);
	ck_assert_msg(d > 27 && d <= 30, "HTTP-date retry-after read as %.1f", d);
}
END_TEST

static Suite *http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("loopback");
	tcase_set_timeout(tc, 30);
	tcase_add_unchecked_fixture(tc, start_server, NULL);
	tcase_add_test(tc, test_ok_and_headers);
	tcase_add_test(tc, test_parallel);
	tcase_add_test(tc, test_retry_after_429);
	tcase_add_test(tc, test_retry_after_capped);
	tcase_add_test(tc, test_500_then_ok);
	tcase_add_test(tc, test_no_retry_on_client_errors);
	tcase_add_test(tc, test_timeout);
	tcase_add_test(tc, test_truncated_and_oversized);
	tcase_add_test(tc, test_connect_refused);
	tcase_add_test(tc, test_retry_after_parse);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(http_suite());
	/* One process: the server thread lives in it. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
