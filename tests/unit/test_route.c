/* SPDX-License-Identifier: Apache-2.0 */
/* Routing and the header rules of the upstream request and the response. */

#include <event2/buffer.h>

#include "config.h"
#include "httphead.h"
#include "route.h"

#include "unit.h"

#define H UNIT_FIELD

static void test_first_match_wins(void **state)
{
	(void)state;
	struct conf *c = unit_conf(
	    "routes:\n"
	    "  - {name: a, match: {path_prefix: /v1/, host: api.example.com}, upstream: http://127.0.0.1:1}\n"
	    "  - {name: b, match: {header: {X-Backend: b}}, upstream: http://127.0.0.1:2}\n"
	    "  - {name: c, match: {path_prefix: /v1/}, upstream: http://127.0.0.1:3}\n");
	struct http_header h1[] = { H("Host", "API.example.com:8080") };
	struct http_header h2[] = { H("Host", "other"), H("x-backend", "b") };
	struct http_header h3[] = { H("Host", "other") };

	assert_string_equal(route_match(c, "/v1/chat", 8, h1, 1)->name, "a");
	assert_string_equal(route_match(c, "/v1/chat", 8, h2, 2)->name, "b");
	assert_string_equal(route_match(c, "/v1/chat", 8, h3, 1)->name, "c");
	assert_null(route_match(c, "/v2/chat", 8, h3, 1));
	/* a header value must match exactly */
	struct http_header h4[] = { H("X-Backend", "bb") };
	assert_null(route_match(c, "/x", 2, h4, 1));
	conf_unref(c);
}

static char *drain(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}

static void test_request_rewrite(void **state)
{
	(void)state;
	struct conf *c = unit_conf(
	    "routes:\n"
	    "  - name: a\n"
	    "    match: {path_prefix: /openai/}\n"
	    "    upstream: http://10.0.0.1:8000/base\n"
	    "    strip_prefix: true\n"
	    "    set_headers: {Authorization: Bearer up}\n");
	struct http_head rq;
	memset(&rq, 0, sizeof rq);
	rq.method = "POST";
	rq.method_len = 4;
	rq.target = "/openai/v1/chat?stream=1";
	rq.target_len = strlen(rq.target);
	rq.path_len = strlen("/openai/v1/chat");
	struct http_header h[] = {
		H("Host", "front"), H("Authorization", "Bearer client"),
		H("Connection", "keep-alive, X-Secret"), H("X-Secret", "1"),
		H("Upgrade", "websocket"), H("Content-Length", "2"),
		H("X-Forwarded-For", "1.2.3.4"), H("X-Request-Id", "old"),
	};
	memcpy(rq.h, h, sizeof h);
	rq.n = sizeof h / sizeof h[0];

	struct evbuffer *out = evbuffer_new();
	httphead_write_request(out, &rq, &c->routes[0], &c->routes[0].upstreams[0], "127.0.0.1", "https", "rid1", 4, 0, NULL);
	char *s = drain(out);
	assert_string_equal(s,
	    "POST /base/v1/chat?stream=1 HTTP/1.1\r\n"
	    "Content-Length: 2\r\n"
	    "Host: 10.0.0.1:8000\r\n"
	    "Authorization: Bearer up\r\n"
	    "X-Forwarded-For: 1.2.3.4, 127.0.0.1\r\n"
	    "X-Forwarded-Proto: https\r\n"
	    "X-Request-Id: rid1\r\n\r\n");
	free(s);
	evbuffer_free(out);
	conf_unref(c);
}

static void test_preserve_host_and_default_port(void **state)
{
	(void)state;
	struct conf *c = unit_conf(
	    "routes:\n"
	    "  - {name: a, upstream: http://example.com, preserve_host: true}\n"
	    "  - {name: b, upstream: http://example.com}\n");
	struct http_head rq;
	memset(&rq, 0, sizeof rq);
	rq.method = "GET";
	rq.method_len = 3;
	rq.target = "/";
	rq.target_len = rq.path_len = 1;
	struct http_header h[] = { H("Host", "front:8080") };
	memcpy(rq.h, h, sizeof h);
	rq.n = 1;

	struct evbuffer *out = evbuffer_new();
	httphead_write_request(out, &rq, &c->routes[0], &c->routes[0].upstreams[0], "::1", "http", "r", 1, 0, NULL);
	char *s = drain(out);
	assert_non_null(strstr(s, "Host: front:8080\r\n"));
	free(s);
	httphead_write_request(out, &rq, &c->routes[1], &c->routes[1].upstreams[0], "::1", "http", "r", 1, 0, NULL);
	s = drain(out);
	assert_non_null(strstr(s, "Host: example.com\r\n"));
	assert_null(strstr(s, "front"));
	free(s);
	evbuffer_free(out);
	conf_unref(c);
}

static void test_response_hop_by_hop(void **state)
{
	(void)state;
	struct http_head rs;
	memset(&rs, 0, sizeof rs);
	rs.start_line = "HTTP/1.1 200 Fine Thanks";
	rs.start_len = strlen(rs.start_line);
	rs.status = 200;
	struct http_header h[] = {
		H("Content-Type", "text/event-stream"), H("Transfer-Encoding", "chunked"),
		H("Connection", "Keep-Alive, X-Hop"), H("Keep-Alive", "timeout=5"),
		H("X-Hop", "1"), H("X-End", "2"),
	};
	memcpy(rs.h, h, sizeof h);
	rs.n = sizeof h / sizeof h[0];
	struct evbuffer *out = evbuffer_new();

	httphead_write_response(out, &rs, 0, 0);
	char *s = drain(out);
	assert_string_equal(s, "HTTP/1.1 200 Fine Thanks\r\nContent-Type: text/event-stream\r\n"
	    "Transfer-Encoding: chunked\r\nX-End: 2\r\n\r\n");
	free(s);
	/* an HTTP/1.0 client gets the decoded body and a closing connection */
	httphead_write_response(out, &rs, 1, 1);
	s = drain(out);
	assert_string_equal(s, "HTTP/1.1 200 Fine Thanks\r\nContent-Type: text/event-stream\r\n"
	    "X-End: 2\r\nConnection: close\r\n\r\n");
	free(s);
	evbuffer_free(out);
}

static void test_upgrade(void **state)
{
	(void)state;
	struct conf *c = unit_conf(
	    "routes:\n"
	    "  - {name: a, match: {path_prefix: /a/}, upstream: http://10.0.0.1:8000}\n"
	    "  - {name: b, upstream: http://10.0.0.1:8000, upgrades: [Example, websocket]}\n"
	    "  - {name: none, upstream: http://10.0.0.1:8000, upgrades: []}\n");
	const struct conf_route *a = &c->routes[0], *b = &c->routes[1], *none = &c->routes[2];
	struct http_head rq;
	memset(&rq, 0, sizeof rq);
	struct http_header ws[] = {
		H("Connection", "keep-alive, Upgrade"), H("Upgrade", "WebSocket"),
	};
	struct http_header h2c[] = {
		H("Connection", "Upgrade, HTTP2-Settings"), H("Upgrade", "h2c"),
	};
	struct http_header unnamed[] = { H("Upgrade", "websocket") };

	/* websocket by default, on every route that does not say otherwise */
	memcpy(rq.h, ws, sizeof ws);
	rq.n = 2;
	assert_int_equal(httphead_upgrade_offer(&rq, a), 1);
	assert_int_equal(httphead_upgrade_offer(&rq, b), 2);
	assert_int_equal(httphead_upgrade_offer(&rq, none), 0);
	/* h2c is no route's unless named; beside another, only that one */
	memcpy(rq.h, h2c, sizeof h2c);
	assert_int_equal(httphead_upgrade_offer(&rq, a), 0);
	h2c[1].value = "h2c, example/2, websocket";
	h2c[1].value_len = strlen(h2c[1].value);
	memcpy(rq.h, h2c, sizeof h2c);
	assert_int_equal(httphead_upgrade_offer(&rq, a), 1);
	assert_int_equal(httphead_upgrade_offer(&rq, b), 3);
	memcpy(rq.h, unnamed, sizeof unnamed);
	rq.n = 1;
	assert_int_equal(httphead_upgrade_offer(&rq, a), 0);

	/* the backend gets the allowed protocols only, in the client's order */
	struct http_header mixed[] = {
		H("Host", "x"), H("Connection", "Upgrade"), H("Upgrade", "h2c, WebSocket/13"),
		H("Upgrade", "example/2"),
	};
	memcpy(rq.h, mixed, sizeof mixed);
	rq.n = 4;
	rq.method = "GET";
	rq.method_len = 3;
	rq.target = "/chat";
	rq.target_len = rq.path_len = 5;
	struct evbuffer *out = evbuffer_new();
	httphead_write_request(out, &rq, a, &a->upstreams[0], "127.0.0.1", "http", "r", 1,
	    HTTPHEAD_UPGRADE, NULL);
	char *s = drain(out);
	assert_string_equal(s, "GET /chat HTTP/1.1\r\nUpgrade: WebSocket/13\r\n"
	    "Connection: Upgrade\r\nHost: 10.0.0.1:8000\r\nX-Forwarded-For: 127.0.0.1\r\n"
	    "X-Forwarded-Proto: http\r\nX-Request-Id: r\r\n\r\n");
	/* (the forwarded Upgrade is where the client's first one was) */
	free(s);
	httphead_write_request(out, &rq, b, &b->upstreams[0], "127.0.0.1", "http", "r", 1,
	    HTTPHEAD_UPGRADE, NULL);
	s = drain(out);
	assert_non_null(strstr(s, "\r\nUpgrade: WebSocket/13, example/2\r\n"));
	free(s);
	evbuffer_free(out);
	conf_unref(c);
}

static void test_upgrade_response(void **state)
{
	(void)state;
	/* the 101 keeps Upgrade and says Connection: Upgrade, once */
	struct http_head rs;
	memset(&rs, 0, sizeof rs);
	rs.start_line = "HTTP/1.1 101 Switching Protocols";
	rs.start_len = strlen(rs.start_line);
	rs.status = 101;
	struct http_header h[] = {
		H("Upgrade", "websocket"), H("Connection", "Upgrade"),
		H("Sec-WebSocket-Accept", "k"),
	};
	memcpy(rs.h, h, sizeof h);
	rs.n = 3;
	struct evbuffer *out = evbuffer_new();
	httphead_write_response(out, &rs, 0, 1);
	char *s = drain(out);
	assert_string_equal(s, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Sec-WebSocket-Accept: k\r\nConnection: Upgrade\r\n\r\n");
	free(s);
	evbuffer_free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_match_wins),
		cmocka_unit_test(test_request_rewrite),
		cmocka_unit_test(test_preserve_host_and_default_port),
		cmocka_unit_test(test_response_hop_by_hop),
		cmocka_unit_test(test_upgrade),
		cmocka_unit_test(test_upgrade_response),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
