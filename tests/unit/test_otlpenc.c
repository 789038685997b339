/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the OTLP encoder: one description of a message written as
 * protobuf (bytes checked by hand against the wire format) and as
 * OTLP/JSON (repeated fields as arrays, ids in hex, 64-bit integers as
 * strings), client text made valid UTF-8 in both. */

#include <event2/buffer.h>

#include "otlpenc.h"

#include "unit.h"

/* The message both tests write: {1 "ab", 2 [{1 id}, {1 id}], 3 fixed64 5,
 * 4 u64 300, attribute 9 k="v"}. */
static void write_msg(struct otlpenc *e)
{
	static const uint8_t id[2] = { 0xab, 0x01 };
	size_t m;

	otlpenc_str(e, 1, "name", "ab", 2);
	for (int i = 0; i < 2; i++) {
		m = otlpenc_open(e, 2, "items", 1);
		otlpenc_id(e, 1, "spanId", id, 2);
		otlpenc_close(e, m);
	}
	otlpenc_fixed64(e, 3, "timeUnixNano", 5);
	otlpenc_u64(e, 4, "count", 300);
	otlpenc_attr_str(e, 9, "k", "v");
}

static char *take(struct evbuffer *b, size_t *n)
{
	char *s;
	*n = evbuffer_get_length(b);
	s = malloc(*n + 1);
	evbuffer_remove(b, s, *n);
	s[*n] = '\0';
	return s;
}

static void test_protobuf(void **state)
{
	static const uint8_t want[] = {
		0x0a, 2, 'a', 'b',                     /* 1: "ab" */
		0x12, 4, 0x0a, 2, 0xab, 0x01,          /* 2: {1: ab01} */
		0x12, 4, 0x0a, 2, 0xab, 0x01,
		0x19, 5, 0, 0, 0, 0, 0, 0, 0,          /* 3: fixed64 5 */
		0x20, 0xac, 0x02,                      /* 4: varint 300 */
		0x4a, 8, 0x0a, 1, 'k', 0x12, 3, 0x0a, 1, 'v',   /* 9: {1 "k", 2 {1 "v"}} */
	};
	struct otlpenc e;
	struct evbuffer *out = evbuffer_new();
	size_t n;
	char *got;

	(void)state;
	assert_int_equal(otlpenc_begin(&e, 0), 0);
	write_msg(&e);
	assert_int_equal(otlpenc_finish(&e, out), 0);
	got = take(out, &n);
	assert_int_equal(n, sizeof want);
	assert_memory_equal(got, want, sizeof want);
	free(got);
	evbuffer_free(out);
}

static void test_json(void **state)
{
	struct otlpenc e;
	struct evbuffer *out = evbuffer_new();
	size_t n;
	char *got;

	(void)state;
	assert_int_equal(otlpenc_begin(&e, 1), 0);
	write_msg(&e);
	assert_int_equal(otlpenc_finish(&e, out), 0);
	got = take(out, &n);
	assert_string_equal(got, "{\"name\":\"ab\",\"items\":[{\"spanId\":\"ab01\"},"
	    "{\"spanId\":\"ab01\"}],\"timeUnixNano\":\"5\",\"count\":\"300\","
	    "\"attributes\":[{\"key\":\"k\",\"value\":{\"stringValue\":\"v\"}}]}");
	free(got);
	evbuffer_free(out);
}

/* A client's bytes (a model name) are valid UTF-8 without control bytes
 * in both encodings. */
static void test_client_text(void **state)
{
	static const char bad[] = "m\xff\x01\"x";
	struct otlpenc e;
	struct evbuffer *out = evbuffer_new();
	size_t n;
	char *got;

	(void)state;
	otlpenc_begin(&e, 0);
	otlpenc_str(&e, 1, "s", bad, sizeof bad - 1);
	otlpenc_finish(&e, out);
	got = take(out, &n);
	assert_int_equal(got[1], (char)(n - 2));
	assert_memory_equal(got + 2, "m\xef\xbf\xbd?\"x", n - 2);
	free(got);
	otlpenc_begin(&e, 1);
	otlpenc_str(&e, 1, "s", bad, sizeof bad - 1);
	otlpenc_finish(&e, out);
	got = take(out, &n);
	assert_string_equal(got, "{\"s\":\"m\xef\xbf\xbd\\u0001\\\"x\"}");
	free(got);
	evbuffer_free(out);
}

/* A string array attribute (gen_ai.response.finish_reasons): KeyValue {1
 * key, 2 AnyValue {5 ArrayValue {1 AnyValue {1 string}, ...}}}, the field
 * numbers of common.proto. */
static void test_string_array(void **state)
{
	static const char *const v[] = { "stop", "length" };
	static const uint8_t want[] = {
		0x4a, 26,                               /* 9: KeyValue */
		0x0a, 2, 'f', 'r',                      /* 1: key */
		0x12, 20,                               /* 2: AnyValue */
		0x2a, 18,                               /* 5: ArrayValue */
		0x0a, 6, 0x0a, 4, 's', 't', 'o', 'p',   /* 1: AnyValue {1 "stop"} */
		0x0a, 8, 0x0a, 6, 'l', 'e', 'n', 'g', 't', 'h',
	};
	struct otlpenc e;
	struct evbuffer *out = evbuffer_new();
	size_t n;
	char *got;

	(void)state;
	assert_int_equal(otlpenc_begin(&e, 0), 0);
	otlpenc_attr_strs(&e, 9, "fr", v, 2);
	assert_int_equal(otlpenc_finish(&e, out), 0);
	got = take(out, &n);
	assert_int_equal(n, sizeof want);
	assert_memory_equal(got, want, sizeof want);
	free(got);
	assert_int_equal(otlpenc_begin(&e, 1), 0);
	otlpenc_attr_strs(&e, 9, "fr", v, 2);
	assert_int_equal(otlpenc_finish(&e, out), 0);
	got = take(out, &n);
	assert_string_equal(got, "{\"attributes\":[{\"key\":\"fr\",\"value\":"
	    "{\"arrayValue\":{\"values\":[{\"stringValue\":\"stop\"},"
	    "{\"stringValue\":\"length\"}]}}}]}");
	free(got);
	evbuffer_free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_protobuf),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_client_text),
		cmocka_unit_test(test_string_array),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
