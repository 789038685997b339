/* SPDX-License-Identifier: Apache-2.0 */
/* framing: what tokentap refuses to forward, on heads built by hand. The
 * conformance corpus (tests/conformance) drives the same rules through the
 * proxy with raw bytes; these pin each rule and its boundary directly. */

#include "framing.h"

#include "unit.h"

#define H UNIT_FIELD

static int find(const char *p, size_t max, size_t *head_len)
{
	size_t pos = 0;
	return framing_find_head(p, strlen(p), &pos, max, head_len);
}

static void test_find_head(void **state)
{
	size_t n = 0, pos = 0;
	(void)state;
	assert_int_equal(find("GET / HTTP/1.1\r\nHost: h\r\n\r\nBODY", 100, &n), 1);
	assert_int_equal(n, 27);
	assert_int_equal(find("GET / HTTP/1.1\nHost: h\n\n", 100, &n), 1);
	assert_int_equal(n, 24);
	assert_int_equal(find("GET / HTTP/1.1\r\nHost: h\r\n", 100, &n), 0);
	assert_int_equal(find("GET / HTTP/1.1\r\nHost: h\r\n\r", 100, &n), 0);
	/* a CR that is not followed by LF */
	assert_int_equal(find("GET / HTTP/1.1\rHost: h\r\r", 100, &n), -2);
	assert_int_equal(find("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 100, &n), -2);
	assert_int_equal(find("GET / HTTP/1.1\r\n\rX", 100, &n), -2);
	/* a CR last is decided when more came */
	assert_int_equal(find("GET / HTTP/1.1\r", 100, &n), 0);
	assert_int_equal(find("GET / HTTP/1.1\r\nHost: h\r\n\r\n", 10, &n), -1);
	/* resumable: the scan goes on where it stopped */
	const char *p = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
	assert_int_equal(framing_find_head(p, 15, &pos, 100, &n), 0);
	assert_int_equal(framing_find_head(p, 26, &pos, 100, &n), 0);
	assert_int_equal(framing_find_head(p, 27, &pos, 100, &n), 1);
	assert_int_equal(n, 27);
}

static void test_leading_blank(void **state)
{
	(void)state;
	assert_int_equal(framing_leading_blank("\r\n\nGET", 6), 3);
	assert_int_equal(framing_leading_blank("\r", 1), 0);
	assert_int_equal(framing_leading_blank("GET", 3), 0);
	assert_int_equal(framing_leading_blank("\r\r\n", 3), 0);
}

static unsigned line(const char *s)
{
	struct framing_verdict v = { 0, NULL, NULL };
	return framing_request_line(s, strlen(s), &v) == 0 ? 0 : v.status;
}

static void test_request_line(void **state)
{
	(void)state;
	assert_int_equal(line("GET /v1/models HTTP/1.1"), 0);
	assert_int_equal(line("POST /x HTTP/1.0"), 0);
	assert_int_equal(line("GET /x HTTP/2.0"), 505);
	assert_int_equal(line("GET /x HTTP/1.2"), 505);
	assert_int_equal(line("GET /x HTTP/0.9"), 505);
	assert_int_equal(line("GET /x"), 400);        /* HTTP/0.9 */
	assert_int_equal(line("GET  /x HTTP/1.1"), 400);
	assert_int_equal(line("GET /x  HTTP/1.1"), 400);
	assert_int_equal(line("GET /x HTTP/1.1 "), 400);
	assert_int_equal(line("GET /x http/1.1"), 400);
	assert_int_equal(line("GET /x HTTP/1"), 400);
	assert_int_equal(line("GET /x HTTP/1.10"), 400);
	assert_int_equal(line(" GET /x HTTP/1.1"), 400);
	assert_int_equal(line("G(T /x HTTP/1.1"), 400);
	assert_int_equal(line(""), 400);
}

static void test_path(void **state)
{
	(void)state;
	static const char *const good[] = {
		"/", "/v1/chat/completions", "/v1/.../x", "/v1/.x/..y", "/a%2Fb",
		"/%41", "//x", "/v1/models/gpt-4o",
	};
	static const char *const bad[] = {
		"/..", "/v1/../admin", "/v1/.", "/./x", "/v1/%2e%2e/x", "/v1/%2E%2e",
		"/v1/.%2e/x", "/v1/..%2fx", "/v1/..%2Fx", "/v1/..%5cx", "/v1/..\\x",
		"//..", "/x%00", "/x%0d%0a", "/x%7f", "/x%zz", "/x%", "/x%4", "/x\x01",
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		assert_int_equal(framing_path(good[i], strlen(good[i])), 0);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (framing_path(bad[i], strlen(bad[i])) == 0)
			fail_msg("path %s was let through", bad[i]);
	}
}

static void test_host(void **state)
{
	(void)state;
	static const char *const good[] = {
		"h", "api.example.com", "h:8080", "127.0.0.1:80", "[::1]", "[::1]:443",
		"xn--bcher-kva.example", "a%41b", "h:",
	};
	static const char *const bad[] = {
		"", "h/admin", "u@h", "h x", "h:x", "h:123456", "h:65536", "[::1",
		"[]", "[::g]", "a, b", ":80", "h\t", "a%4", "a%zz",
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		if (framing_host(good[i], strlen(good[i])) != 0)
			fail_msg("host %s was refused", good[i]);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (framing_host(bad[i], strlen(bad[i])) == 0)
			fail_msg("host %s was let through", bad[i]);
}

static unsigned request(const char *method, const char *target, unsigned minor,
    const struct http_header *h, size_t n, struct http_head *rq)
{
	struct framing_verdict v = { 0, NULL, NULL };
	memset(rq, 0, sizeof *rq);
	rq->method = method;
	rq->method_len = strlen(method);
	rq->target = target;
	rq->target_len = strlen(target);
	rq->http_major = 1;
	rq->http_minor = minor;
	memcpy(rq->h, h, n * sizeof *h);
	rq->n = n;
	return framing_request(rq, &v) == 0 ? 0 : v.status;
}

#define REQ(m, t, minor, ...) ({ \
	const struct http_header hh_[] = { __VA_ARGS__ }; \
	request(m, t, minor, hh_, sizeof hh_ / sizeof hh_[0], &rq); })

static void test_request_rules(void **state)
{
	struct http_head rq;
	(void)state;
	assert_int_equal(REQ("GET", "/v1/x", 1, H("Host", "h")), 0);
	assert_int_equal(rq.path_len, 5);
	assert_int_equal(REQ("GET", "/v1/x?a=../b", 1, H("Host", "h")), 0);
	assert_int_equal(rq.path_len, 5);
	assert_int_equal(REQ("TRACE", "/", 1, H("Host", "h")), 405);
	assert_int_equal(REQ("CONNECT", "h:443", 1, H("Host", "h")), 405);
	assert_int_equal(REQ("GET", "/v1/../x", 1, H("Host", "h")), 400);
	assert_int_equal(REQ("GET", "/v1/x#f", 1, H("Host", "h")), 400);
	assert_int_equal(REQ("GET", "*", 1, H("Host", "h")), 400);
	/* Host: one, valid; HTTP/1.0 may omit it */
	assert_int_equal(REQ("GET", "/", 1, H("X", "y")), 400);
	assert_int_equal(REQ("GET", "/", 0, H("X", "y")), 0);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "a"), H("host", "a")), 400);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "")), 400);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "a/b")), 400);
	/* empty names, framing in disguise, framing named in Connection */
	assert_int_equal(REQ("GET", "/", 1, H("Host", "h"), H("", "x")), 400);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "h"), H("Content_Length", "3")), 400);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "h"), H("transfer_encoding", "x")), 400);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "h"), H("X_Other", "x")), 0);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "h"), H("Connection", "close, Host")), 400);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "h"),
	    H("Connection", "keep-alive"), H("Connection", "content-length")), 400);
	assert_int_equal(REQ("GET", "/", 1, H("Host", "h"), H("Connection", "close, te")), 0);
	/* Transfer-Encoding: exactly chunked, one list over every field */
	assert_int_equal(REQ("POST", "/", 1, H("Host", "h"), H("Transfer-Encoding", "Chunked")), 0);
	assert_int_equal(REQ("POST", "/", 0, H("Transfer-Encoding", "chunked")), 400);
	assert_int_equal(REQ("POST", "/", 1, H("Host", "h"), H("Transfer-Encoding", "")), 400);
	assert_int_equal(REQ("POST", "/", 1, H("Host", "h"),
	    H("Transfer-Encoding", "gzip, chunked")), 501);
	assert_int_equal(REQ("POST", "/", 1, H("Host", "h"),
	    H("Transfer-Encoding", "identity"), H("Transfer-Encoding", "chunked")), 501);
	assert_int_equal(REQ("POST", "/", 1, H("Host", "h"),
	    H("Transfer-Encoding", "chunked"), H("Transfer-Encoding", "chunked")), 501);
	assert_int_equal(REQ("POST", "/", 1, H("Host", "h"),
	    H("Transfer-Encoding", "chunked"), H("Content-Length", "3")), 400);
}

static void test_absolute_form(void **state)
{
	struct http_head rq;
	(void)state;
	assert_int_equal(REQ("GET", "http://api.example.com:8080/v1/x?q", 1,
	    H("Host", "other")), 0);
	assert_int_equal(rq.target_len, 7);
	assert_memory_equal(rq.target, "/v1/x?q", 7);
	assert_int_equal(rq.path_len, 5);
	assert_int_equal(rq.h[0].value_len, 20);
	assert_memory_equal(rq.h[0].value, "api.example.com:8080", 20);
	/* no Host at all (HTTP/1.0): the authority is added as one */
	assert_int_equal(REQ("GET", "HTTPS://h", 0, H("X", "y")), 0);
	assert_int_equal(rq.n, 2);
	assert_memory_equal(rq.h[1].name, "Host", 4);
	assert_memory_equal(rq.h[1].value, "h", 1);
	assert_memory_equal(rq.target, "/", 1);
	assert_int_equal(REQ("GET", "http://u:p@h/", 1, H("Host", "h")), 400);
	assert_int_equal(REQ("GET", "ftp://h/", 1, H("Host", "h")), 400);
	assert_int_equal(REQ("GET", "http:///x", 1, H("Host", "h")), 400);
	assert_int_equal(REQ("GET", "http://h?q", 1, H("Host", "h")), 400);
	assert_int_equal(REQ("GET", "http://h/../x", 1, H("Host", "h")), 400);
}

static unsigned response(unsigned major, unsigned minor, unsigned status,
    const struct http_header *h, size_t n)
{
	struct http_head rs;
	struct framing_verdict v = { 0, NULL, NULL };
	memset(&rs, 0, sizeof rs);
	rs.http_major = major;
	rs.http_minor = minor;
	rs.status = status;
	memcpy(rs.h, h, n * sizeof *h);
	rs.n = n;
	return framing_response(&rs, &v) == 0 ? 0 : v.status;
}

#define RES(maj, min, st, ...) ({ \
	const struct http_header hh_[] = { __VA_ARGS__ }; \
	response(maj, min, st, hh_, sizeof hh_ / sizeof hh_[0]); })

static void test_response_rules(void **state)
{
	(void)state;
	assert_int_equal(RES(1, 1, 200, H("Transfer-Encoding", "chunked")), 0);
	assert_int_equal(RES(1, 0, 200, H("Content-Length", "2")), 0);
	assert_int_equal(RES(2, 0, 200, H("Content-Length", "2")), 502);
	assert_int_equal(RES(1, 1, 200, H("Connection", "Content-Length")), 502);
	assert_int_equal(RES(1, 1, 200, H("Connection", "transfer-encoding")), 502);
	assert_int_equal(RES(1, 1, 200, H("Transfer-Encoding", "gzip")), 502);
	assert_int_equal(RES(1, 1, 200, H("Transfer-Encoding", "chunked"),
	    H("Transfer-Encoding", "chunked")), 502);
	/* a bodiless status carries no body, whatever its fields say */
	assert_int_equal(RES(1, 1, 204, H("Transfer-Encoding", "gzip")), 0);
	assert_true(framing_bodiless_status(100));
	assert_true(framing_bodiless_status(204));
	assert_true(framing_bodiless_status(304));
	assert_false(framing_bodiless_status(200));
	assert_false(framing_bodiless_status(205));
}

static unsigned switched(const struct conf_route *r, unsigned offer,
    const struct http_header *h, size_t n)
{
	struct http_head rs;
	struct framing_verdict v = { 0, NULL, NULL };
	memset(&rs, 0, sizeof rs);
	rs.http_major = rs.http_minor = 1;
	rs.status = 101;
	memcpy(rs.h, h, n * sizeof *h);
	rs.n = n;
	return framing_switch(&rs, r, offer, &v) == 0 ? 0 : v.status;
}

#define SWITCH(r, offer, ...) ({ \
	const struct http_header hh_[] = { __VA_ARGS__ }; \
	switched(r, offer, hh_, sizeof hh_ / sizeof hh_[0]); })

/* A 101 only to a protocol the client asked for and the route forwarded */
static void test_switch(void **state)
{
	(void)state;
	struct conf *c = unit_conf("routes:\n  - {name: a, upstream: http://127.0.0.1:1, "
	    "upgrades: [websocket, example]}\n");
	const struct conf_route *r = &c->routes[0];

	assert_int_equal(SWITCH(r, 1, H("Upgrade", "websocket")), 0);
	assert_int_equal(SWITCH(r, 1, H("Upgrade", "WebSocket/13")), 0);
	assert_int_equal(SWITCH(r, 3, H("Upgrade", "example/2, websocket")), 0);
	/* nobody asked */
	assert_int_equal(SWITCH(r, 0, H("Upgrade", "websocket")), 502);
	/* asked for the other one */
	assert_int_equal(SWITCH(r, 2, H("Upgrade", "websocket")), 502);
	/* never forwarded: h2c */
	assert_int_equal(SWITCH(r, 1, H("Upgrade", "h2c")), 502);
	assert_int_equal(SWITCH(r, 1, H("Upgrade", "websocket, h2c")), 502);
	/* says nothing of where it goes */
	assert_int_equal(SWITCH(r, 1, H("Connection", "Upgrade")), 502);
	assert_int_equal(SWITCH(r, 1, H("Upgrade", " , ")), 502);
	conf_unref(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_head),
		cmocka_unit_test(test_leading_blank),
		cmocka_unit_test(test_request_line),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_request_rules),
		cmocka_unit_test(test_absolute_form),
		cmocka_unit_test(test_response_rules),
		cmocka_unit_test(test_switch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
