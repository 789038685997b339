/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the spans' encoding (otlpspan.h): one request's record
 * is two spans, the SERVER span of the request tokentap received (the
 * client's span its parent) and the CLIENT span of its call to the model
 * (the SERVER span its parent), as OTLP/JSON; the client's bytes in the
 * SERVER span's attributes made valid; gen_ai.request.stream the
 * request's; time_to_first_chunk the sample's. */

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "otlpspan.h"

#include "unit.h"

static void fill(struct span *s)
{
	memset(s, 0, sizeof *s);
	memset(s->trace_id, 0x11, sizeof s->trace_id);
	memset(s->span_id, 0xcc, sizeof s->span_id);
	memset(s->server_id, 0x55, sizeof s->server_id);
	memset(s->parent_id, 0xaa, sizeof s->parent_id);
	s->flags = 1;
	s->stream = 0;                     /* a 500 in JSON ... */
	s->stream_asked = 1;               /* ... to a request for a stream */
	snprintf(s->method, sizeof s->method, "POST");
	snprintf(s->path, sizeof s->path, "/v1/chat/\xff\x01x");
	snprintf(s->host, sizeof s->host, "[::1]:8080");
	snprintf(s->client, sizeof s->client, "10.0.0.7");
	s->t0 = 1000;
	s->mono_end_us = 2000;
	s->wall_end_ns = 5000000000ull;
	s->reasoning_tokens = -1;
	snprintf(s->key.route, sizeof s->key.route, "chat");
	snprintf(s->key.tenant, sizeof s->key.tenant, "-");
	snprintf(s->key.model, sizeof s->key.model, "m");
	snprintf(s->key.upstream, sizeof s->key.upstream, "-");
	s->key.op = 1;                     /* chat */
	s->s.outcome = OUTCOME_UPSTREAM_ERROR;
	s->s.status = 500;
	s->s.input_tokens = s->s.output_tokens = -1;
	s->s.ttft_us = s->s.ttfo_us = s->s.tpot_us = -1;
	s->s.ttfc_us = -1;
}

static char *encode(const struct span *s)
{
	const struct span *one[1] = { s };
	struct otlpenc e;
	struct evbuffer *out = evbuffer_new();
	size_t n;
	char *got;

	assert_int_equal(otlpenc_begin(&e, 1), 0);
	otlpspan_request(&e, NULL, 0, one, 1);
	assert_int_equal(otlpenc_finish(&e, out), 0);
	n = evbuffer_get_length(out);
	got = malloc(n + 1);
	evbuffer_remove(out, got, n);
	got[n] = '\0';
	evbuffer_free(out);
	return got;
}

/* The span whose spanId is id: its JSON, up to the next span's. */
static char *span_of(const char *all, const char *id)
{
	char key[64], *s, *end;
	const char *at;

	snprintf(key, sizeof key, "\"spanId\":\"%s\"", id);
	at = strstr(all, key);
	assert_non_null(at);
	while (at > all && strncmp(at, "{\"traceId\"", 10) != 0)
		at--;
	s = strdup(at);
	end = strstr(s + 1, "{\"traceId\"");
	if (end != NULL)
		*end = '\0';
	return s;
}

static void test_two_spans(void **state)
{
	struct span s;
	char *all, *srv, *cli;

	(void)state;
	fill(&s);
	all = encode(&s);
	srv = span_of(all, "5555555555555555");
	cli = span_of(all, "cccccccccccccccc");
	/* client's span -> SERVER -> CLIENT, one trace */
	assert_non_null(strstr(srv, "\"traceId\":\"11111111111111111111111111111111\""));
	assert_non_null(strstr(srv, "\"parentSpanId\":\"aaaaaaaaaaaaaaaa\""));
	assert_non_null(strstr(srv, "\"kind\":2"));
	assert_non_null(strstr(cli, "\"parentSpanId\":\"5555555555555555\""));
	assert_non_null(strstr(cli, "\"kind\":3"));
	/* the HTTP server conventions' attributes; the client's bytes valid */
	assert_non_null(strstr(srv, "\"name\":\"POST chat\""));
	assert_non_null(strstr(srv, "{\"key\":\"url.scheme\",\"value\":"
	    "{\"stringValue\":\"http\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"network.protocol.version\",\"value\":"
	    "{\"stringValue\":\"1.1\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"url.path\",\"value\":{\"stringValue\":"
	    "\"/v1/chat/\xef\xbf\xbd\\u0001x\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"server.address\",\"value\":"
	    "{\"stringValue\":\"::1\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"server.port\",\"value\":"
	    "{\"intValue\":\"8080\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"client.address\",\"value\":"
	    "{\"stringValue\":\"10.0.0.7\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"http.route\",\"value\":"
	    "{\"stringValue\":\"chat\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"http.response.status_code\",\"value\":"
	    "{\"intValue\":\"500\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"error.type\",\"value\":"
	    "{\"stringValue\":\"500\"}}"));
	assert_null(strstr(srv, "gen_ai."));
	/* the request asked for a stream; the answer was none */
	assert_non_null(strstr(cli, "{\"key\":\"gen_ai.request.stream\",\"value\":"
	    "{\"boolValue\":true}}"));
	assert_null(strstr(cli, "time_to_first_chunk"));
	free(srv);
	free(cli);
	free(all);
}

/* A Host without a port, and a name with one; time_to_first_chunk is the
 * sample's, in seconds. */
static void test_host_and_first_chunk(void **state)
{
	struct span s;
	char *all, *srv, *cli;

	(void)state;
	fill(&s);
	snprintf(s.host, sizeof s.host, "api.example.com");
	s.https = 1;
	s.http10 = 1;
	s.stream = 1;
	s.s.outcome = OUTCOME_OK;
	s.s.status = 200;
	s.s.ttfc_us = 200500;
	all = encode(&s);
	srv = span_of(all, "5555555555555555");
	cli = span_of(all, "cccccccccccccccc");
	assert_non_null(strstr(srv, "{\"key\":\"server.address\",\"value\":"
	    "{\"stringValue\":\"api.example.com\"}}"));
	assert_null(strstr(srv, "server.port"));
	assert_null(strstr(srv, "error.type"));
	assert_non_null(strstr(srv, "{\"key\":\"url.scheme\",\"value\":"
	    "{\"stringValue\":\"https\"}}"));
	assert_non_null(strstr(srv, "{\"key\":\"network.protocol.version\",\"value\":"
	    "{\"stringValue\":\"1.0\"}}"));
	assert_non_null(strstr(cli, "{\"key\":\"gen_ai.response.time_to_first_chunk\","
	    "\"value\":{\"doubleValue\":0.2005}}"));
	free(srv);
	free(cli);
	free(all);
	fill(&s);
	snprintf(s.host, sizeof s.host, "h:99999");   /* no port: out of range */
	all = encode(&s);
	srv = span_of(all, "5555555555555555");
	assert_non_null(strstr(srv, "{\"key\":\"server.address\",\"value\":"
	    "{\"stringValue\":\"h\"}}"));
	assert_null(strstr(srv, "server.port"));
	free(srv);
	free(all);
	otlpspan_release();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_spans),
		cmocka_unit_test(test_host_and_first_chunk),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
