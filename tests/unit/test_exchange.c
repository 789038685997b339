/* SPDX-License-Identifier: Apache-2.0 */
/* The exchange as the lower layer it is: request and response heads in
 * buffers, the verdicts it answers with, the bytes it writes, and the books
 * it closes (the access log line's outcome by the one rule). No sockets. */
#include <unistd.h>

#include <event2/buffer.h>

#include "accesslog.h"
#include "config.h"
#include "exchange.h"
#include "httphead.h"
#include "ring.h"

#include "unit.h"

static struct conf *conf;
static struct ring *ring;
static uint64_t rng = 42;
static char log_path[] = "/tmp/tt-exchange-XXXXXX";

static int setup(void **state)
{
	int fd = mkstemp(log_path);
	(void)state;
	assert_true(fd >= 0);
	close(fd);
	conf = unit_conf("limits: {max_body_bytes: 1k}\n"
	    "routes:\n"
	    "  - {name: chat, match: {path_prefix: /v1/}, upstream: http://127.0.0.1:9}\n");
	ring = ring_new();
	assert_non_null(ring);
	assert_int_equal(accesslog_open(log_path), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	accesslog_close();
	unlink(log_path);
	conf_unref(conf);
	return 0;
}

/* A request head through every step the proxy takes: found, its line
 * checked, parsed. 0, or the verdict's status. */
static unsigned request(struct exchange *x, struct evbuffer *in, const char *raw,
    struct http_head *rq, size_t *head_len)
{
	struct exchange_verdict v;
	size_t pos = 0;

	exchange_begin(x, conf, ring, "192.0.2.1", 1000);
	evbuffer_add(in, raw, strlen(raw));
	assert_int_equal(exchange_find_head(in, &pos, conf->max_header_bytes, head_len), 1);
	if (exchange_request_line(x, in, &v) < 0 ||
	    exchange_request_head(x, in, *head_len, &rng, rq, &v) < 0) {
		assert_int_equal(v.end, METER_END_REJECTED);
		return v.status;
	}
	return 0;
}

static unsigned verdict_of(const char *raw)
{
	struct exchange x;
	struct http_head rq;
	struct evbuffer *in = evbuffer_new();
	size_t len;
	unsigned st = request(&x, in, raw, &rq, &len);

	exchange_abandon(&x);
	evbuffer_free(in);
	return st;
}

static void test_request_verdicts(void **state)
{
	(void)state;
	assert_int_equal(verdict_of("GET /v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), 0);
	assert_int_equal(verdict_of("GET /other HTTP/1.1\r\nHost: h\r\n\r\n"), 404);
	assert_int_equal(verdict_of("TRACE /v1/x HTTP/1.1\r\nHost: h\r\n\r\n"), 405);
	assert_int_equal(verdict_of("GET /v1/x HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
	assert_int_equal(verdict_of("GET /v1/x HTTP/1.1\r\n\r\n"), 400);
	assert_int_equal(verdict_of("GET /v1/../x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
	assert_int_equal(verdict_of("GET /v1/x HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n"), 400);
	assert_int_equal(verdict_of("POST /v1/x HTTP/1.1\r\nHost: h\r\n"
	    "Transfer-Encoding: gzip, chunked\r\n\r\n"), 501);
	/* llhttp's own refusal of a coding list maps to the same 501 */
	assert_int_equal(verdict_of("POST /v1/x HTTP/1.1\r\nHost: h\r\n"
	    "Transfer-Encoding: chunked, chunked\r\n\r\n"), 501);
	assert_int_equal(verdict_of("POST /v1/x HTTP/1.1\r\nHost: h\r\n"
	    "Content-Length: 2000\r\n\r\n"), 413);
	assert_int_equal(verdict_of("POST /v1/x HTTP/1.1\r\nHost: h\r\n"
	    "Connection: content-length\r\nContent-Length: 2\r\n\r\n"), 400);

	char big[8192] = "GET /v1/x HTTP/1.1\r\nHost: h\r\n";
	for (int i = 0; i < 130; i++)
		snprintf(big + strlen(big), sizeof big - strlen(big), "X-%d: v\r\n", i);
	strcat(big, "\r\n");
	assert_int_equal(verdict_of(big), 431);
}

static void test_upstream_head_and_retry_copy(void **state)
{
	struct exchange x;
	struct http_head rq;
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new(), *copy;
	size_t len;
	char *s, *c;
	(void)state;

	assert_int_equal(request(&x, in, "GET http://api.example/v1/models HTTP/1.1\r\n"
	    "Host: other\r\nX-Request-Id: abc-1\r\nConnection: keep-alive, X-Hop\r\n"
	    "X-Hop: 1\r\n\r\n", &rq, &len), 0);
	assert_string_equal(x.route->name, "chat");
	assert_string_equal(x.request_id, "abc-1");
	assert_string_equal(x.target, "/v1/models");   /* origin-form, for the log */
	exchange_write_request(&x, &rq, &x.route->upstreams[0], out, "https", 1);
	evbuffer_drain(in, len);
	assert_int_equal(exchange_written(&x, 0), evbuffer_get_length(out));
	assert_int_equal(exchange_written(&x, evbuffer_get_length(out)), 0);
	copy = exchange_take_retry(&x, 0);
	assert_non_null(copy);
	assert_null(exchange_take_retry(&x, 1));         /* one retry at most */
	s = unit_take(out);
	c = unit_take(copy);
	assert_string_equal(s, c);
	assert_string_equal(s, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
	    "X-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Proto: https\r\n"
	    "X-Request-Id: abc-1\r\n\r\n");
	free(s);
	free(c);
	evbuffer_free(copy);
	exchange_abandon(&x);
	evbuffer_free(in);
	evbuffer_free(out);
}

/* A POST goes again only when the backend cannot have read any of it. */
static void test_post_retried_only_unseen(void **state)
{
	struct exchange x;
	struct http_head rq;
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new(), *copy;
	size_t len;
	(void)state;

	assert_int_equal(request(&x, in, "POST /v1/x HTTP/1.1\r\nHost: h\r\n"
	    "Content-Length: 2\r\n\r\n", &rq, &len), 0);
	exchange_write_request(&x, &rq, &x.route->upstreams[0], out, "http", 1);
	evbuffer_drain(in, len);
	assert_null(exchange_take_retry(&x, 0));        /* it may have been acted on */
	copy = exchange_take_retry(&x, 1);              /* it cannot have been */
	assert_non_null(copy);
	assert_int_equal(evbuffer_get_length(copy), evbuffer_get_length(out));
	assert_int_equal(exchange_written(&x, 0), 0);   /* none kept any more */
	evbuffer_free(copy);
	exchange_abandon(&x);
	evbuffer_free(in);
	evbuffer_free(out);
}

static void test_request_body_trailers_and_limit(void **state)
{
	struct exchange x;
	struct exchange_verdict v;
	struct http_head rq;
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	size_t len;
	char *s;
	(void)state;

	assert_int_equal(request(&x, in, "POST /v1/x HTTP/1.1\r\nHost: h\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n5\r\nhel", &rq, &len), 0);
	evbuffer_drain(in, len);
	assert_int_equal(exchange_request_body(&x, in, out, &v), 0);
	assert_false(x.req_done);
	/* the trailer section is read and dropped; the next request stays */
	evbuffer_add_printf(in, "lo\r\n0\r\nX-T: 1\r\n\r\nGET /v1/next");
	assert_int_equal(exchange_request_body(&x, in, out, &v), 0);
	assert_true(x.req_done);
	s = unit_take(out);
	assert_string_equal(s, "5\r\nhello\r\n0\r\n\r\n");
	free(s);
	s = unit_take(in);
	assert_string_equal(s, "GET /v1/next");
	free(s);
	exchange_abandon(&x);

	/* a chunk whose size passes max_body_bytes is refused before any of
	 * it is forwarded */
	assert_int_equal(request(&x, in, "POST /v1/x HTTP/1.1\r\nHost: h\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n2\r\nxx\r\n800\r\nyyy", &rq, &len), 0);
	evbuffer_drain(in, len);
	assert_int_equal(exchange_request_body(&x, in, out, &v), -1);
	assert_int_equal(v.status, 413);
	assert_int_equal(v.end, METER_END_REJECTED);
	assert_int_equal(evbuffer_get_length(out), 0);
	exchange_abandon(&x);
	evbuffer_free(in);
	evbuffer_free(out);
}

/* A GET's exchange up to the response head; returns what the head was. */
static int response(struct exchange *x, const char *raw, struct evbuffer *up,
    struct evbuffer *out, struct exchange_verdict *v)
{
	struct http_head rq;
	struct evbuffer *in = evbuffer_new();
	size_t len, pos = 0;
	int r;

	assert_int_equal(request(x, in, "GET /v1/chat/completions HTTP/1.1\r\n"
	    "Host: h\r\n\r\n", &rq, &len), 0);
	evbuffer_free(in);
	x->meter.now = 2000;              /* the proxy stamps each read */
	evbuffer_add(up, raw, strlen(raw));
	assert_int_equal(exchange_find_head(up, &pos, 65536, &len), 1);
	r = exchange_response_head(x, up, len, out, 0, v);
	return r;
}

static void test_response_heads(void **state)
{
	struct exchange x;
	struct exchange_verdict v;
	struct evbuffer *up = evbuffer_new(), *out = evbuffer_new();
	size_t len, pos = 0, used;
	char *s;
	(void)state;

	/* a 1xx, then the final head on the same exchange */
	assert_int_equal(response(&x, "HTTP/1.1 100 Continue\r\n\r\n", up, out, &v),
	    EXCHANGE_INTERIM);
	evbuffer_add_printf(up, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
	assert_int_equal(exchange_find_head(up, &pos, 65536, &len), 1);
	assert_int_equal(exchange_response_head(&x, up, len, out, 0, &v), EXCHANGE_BODY);
	assert_int_equal(exchange_parse_body(&x, up, &used), 0);
	assert_int_equal(used, 2);
	assert_true(x.res_done);
	/* an HTTP/1.0 upstream's connection is not kept; the client's is, and
	 * its status line says HTTP/1.1 */
	assert_false(exchange_reusable(&x));
	assert_true(x.keepalive);
	s = unit_take(out);
	assert_string_equal(s, "HTTP/1.1 100 Continue\r\n\r\n"
	    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n");
	free(s);
	exchange_abandon(&x);
	evbuffer_drain(up, evbuffer_get_length(up));

	/* a 204 ends at its head and says nothing of a body */
	assert_int_equal(response(&x, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
	    up, out, &v), EXCHANGE_DONE);
	assert_true(exchange_reusable(&x));
	s = unit_take(out);
	assert_string_equal(s, "HTTP/1.1 204 No Content\r\n\r\n");
	free(s);
	exchange_abandon(&x);

	/* framing named in Connection: a 502, nothing written */
	assert_int_equal(response(&x, "HTTP/1.1 200 OK\r\nConnection: content-length\r\n"
	    "Content-Length: 2\r\n\r\n", up, out, &v), -1);
	assert_int_equal(v.status, 502);
	assert_int_equal(v.end, METER_END_MALFORMED);
	assert_int_equal(evbuffer_get_length(out), 0);
	exchange_abandon(&x);
	evbuffer_free(up);
	evbuffer_free(out);
}

/* The outcome in the last access-log line. */
static void last_outcome(char *buf, size_t len)
{
	FILE *f = fopen(log_path, "r");
	char line[8192], *p, *q;

	assert_non_null(f);
	buf[0] = '\0';
	while (fgets(line, sizeof line, f) != NULL) {
		p = strstr(line, "\"outcome\":\"");
		assert_non_null(p);
		p += 11;
		q = strchr(p, '"');
		snprintf(buf, len, "%.*s", (int)(q - p), p);
	}
	fclose(f);
}

static void stream(const char *events, enum meter_end how, const char *want)
{
	struct exchange x;
	struct exchange_verdict v;
	struct evbuffer *up = evbuffer_new(), *out = evbuffer_new();
	size_t used;
	char got[64];

	assert_int_equal(response(&x, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", up, out, &v), EXCHANGE_BODY);
	evbuffer_add_printf(up, "%zx\r\n%s\r\n0\r\n\r\n", strlen(events), events);
	assert_int_equal(exchange_parse_body(&x, up, &used), 0);
	exchange_end(&x, how);
	last_outcome(got, sizeof got);
	assert_string_equal(got, want);
	evbuffer_free(up);
	evbuffer_free(out);
}

static void test_books_take_the_one_outcome_rule(void **state)
{
	(void)state;
	stream("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n",
	    METER_END_COMPLETE, "ok");
	/* framed to its end, but without the dialect's end marker: cut short */
	stream("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
	    METER_END_COMPLETE, "upstream_abort");
	stream("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
	    METER_END_CLIENT, "client_abort");
	stream("data: {\"error\":{\"message\":\"x\"}}\n\n", METER_END_COMPLETE,
	    "upstream_error");
}

/* The request of test_another_replica as sent to a replica. */
static void expect_sent(struct evbuffer *out, const char *base, const char *host)
{
	char want[512], *s = unit_take(out);
	snprintf(want, sizeof want, "POST %s/v1/chat HTTP/1.1\r\nContent-Length: 5\r\n"
	    "Host: %s\r\nX-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Proto: http\r\n"
	    "X-Request-Id: r1\r\n\r\nhello", base, host);
	assert_string_equal(s, want);
	free(s);
}

/* Another replica gets the request with a head of its own (Host, base
 * path), the body as it was sent, and a new copy for the attempt after;
 * a status of retry_on is not passed on, one with Retry-After is. */
static void test_another_replica(void **state)
{
	struct conf *keep = conf;
	struct exchange x;
	struct exchange_verdict v;
	struct http_head rq;
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new(), *out2 = evbuffer_new();
	struct evbuffer *client = evbuffer_new();
	size_t len;
	char *s;
	(void)state;

	conf = unit_conf("routes:\n  - name: pool\n    upstreams:\n"
	    "      - {url: http://10.0.0.1:8000/a}\n      - {url: http://10.0.0.2:9000/b/}\n");
	assert_int_equal(request(&x, in, "POST http://api.example/v1/chat HTTP/1.1\r\n"
	    "Host: other\r\nX-Request-Id: r1\r\nContent-Length: 5\r\n\r\nhello",
	    &rq, &len), 0);
	assert_int_equal(exchange_keep_head(&x, &rq, in, len), 0);
	exchange_write_request(&x, &rq, &x.route->upstreams[0], out, "http", 1);
	evbuffer_drain(in, len);
	assert_int_equal(exchange_request_body(&x, in, out, &v), 0);
	assert_true(x.req_done);
	expect_sent(out, "/a", "10.0.0.1:8000");
	assert_true(exchange_resendable(&x));
	assert_int_equal(exchange_redirect(&x, &x.route->upstreams[1], "http", NULL, out2, 1), 0);
	expect_sent(out2, "/b", "10.0.0.2:9000");
	/* and back: the new copy starts with the second replica's head */
	assert_true(exchange_resendable(&x));
	assert_int_equal(exchange_redirect(&x, &x.route->upstreams[0], "http", NULL, out2, 0), 0);
	s = unit_take(out2);
	assert_non_null(strstr(s, "Host: 10.0.0.1:8000\r\n"));
	assert_true(strncmp(s, "POST /a/v1/chat ", 16) == 0);
	assert_true(strlen(s) > 5 && strcmp(s + strlen(s) - 5, "hello") == 0);
	free(s);
	assert_false(exchange_resendable(&x));

	/* retry_on: with failover_ok a 503 head is read and not passed on */
	exchange_keep_request(&x, out2);
	evbuffer_add_printf(in, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
	x.failover_ok = 1;
	assert_int_equal(exchange_response_head(&x, in, evbuffer_get_length(in), client, 0, &v),
	    EXCHANGE_RETRY);
	assert_int_equal(x.retry_status, 503);
	assert_int_equal(evbuffer_get_length(client), 0);
	assert_int_equal(evbuffer_get_length(in), 0);
	assert_false(x.head_sent);
	/* a 429 asking to wait is the client's to see */
	exchange_restart(&x);
	evbuffer_add_printf(in, "HTTP/1.1 429 Slow down\r\nRetry-After: 5\r\n"
	    "Content-Length: 0\r\n\r\n");
	assert_int_equal(exchange_response_head(&x, in, evbuffer_get_length(in), client, 0, &v),
	    EXCHANGE_DONE);
	assert_int_equal(x.status, 429);
	assert_true(evbuffer_get_length(client) > 0);
	exchange_attempt(&x, "http://10.0.0.1:8000/a", "status", 503, 1500);
	assert_int_equal(x.n_attempts, 1);
	exchange_abandon(&x);
	conf_unref(conf);
	conf = keep;
	evbuffer_free(in);
	evbuffer_free(out);
	evbuffer_free(out2);
	evbuffer_free(client);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_verdicts),
		cmocka_unit_test(test_upstream_head_and_retry_copy),
		cmocka_unit_test(test_post_retried_only_unseen),
		cmocka_unit_test(test_another_replica),
		cmocka_unit_test(test_request_body_trailers_and_limit),
		cmocka_unit_test(test_response_heads),
		cmocka_unit_test(test_books_take_the_one_outcome_rule),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
