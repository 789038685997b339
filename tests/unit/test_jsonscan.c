/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the request body's scanner (jsonscan.h): the top-level
 * "model" string and "stream" literal, in any order, fed in pieces of
 * any size; keys and values inside objects, arrays and strings are not
 * theirs; the first of each wins; it stops once it has both. */

#include <string.h>

#include "jsonscan.h"

#include "unit.h"

/* body fed `step` bytes at a time (0: whole) */
static void scan(struct json_model_scan *js, const char *body, size_t step)
{
	size_t n = strlen(body);

	jsonscan_init(js);
	if (step == 0)
		step = n;
	for (size_t i = 0; i < n; i += step)
		jsonscan_feed(js, body + i, n - i < step ? n - i : step);
}

static void expect(const char *body, const char *model, int stream)
{
	struct json_model_scan js;

	for (size_t step = 0; step < 8; step++) {
		scan(&js, body, step);
		if (model == NULL) {
			assert_false(js.found);
		} else {
			assert_true(js.found);
			assert_int_equal(js.value_len, strlen(model));
			assert_memory_equal(js.value, model, js.value_len);
		}
		assert_int_equal(js.stream, stream);
	}
}

static void test_model_and_stream(void **state)
{
	(void)state;
	expect("{\"model\":\"gpt-4o\",\"stream\":true}", "gpt-4o", 1);
	expect("{\"stream\": false, \"model\": \"m\"}", "m", 0);
	expect(" { \"messages\" : [ {\"role\":\"user\",\"content\":\"x\"} ] ,\n"
	    "\t\"model\" : \"m\" , \"stream\" : true } ", "m", 1);
	expect("{\"model\":\"m\"}", "m", -1);               /* said nothing */
	expect("{\"stream\":true}", NULL, 1);
	expect("{\"stream\":null,\"model\":\"m\"}", "m", -1);
}

static void test_not_theirs(void **state)
{
	(void)state;
	/* nested, or the text of a string: not the request's */
	expect("{\"messages\":[{\"stream\":true,\"model\":\"x\"}],\"model\":\"m\"}", "m", -1);
	expect("{\"o\":{\"stream\":false},\"stream\":true,\"model\":\"m\"}", "m", 1);
	expect("{\"content\":\"\\\"stream\\\":true\",\"stream\":false}", NULL, 0);
	/* a string is no stream's value; a key with an escape is not the key */
	expect("{\"stream\":\"true\",\"model\":\"m\"}", "m", -1);
	expect("{\"str\\u0065am\":true,\"streams\":true,\"strea\":true}", NULL, -1);
	/* escapes in text skipped over (skip_text): a quote after a
	 * backslash, a backslash before a quote that ends the string, and
	 * keys in the text */
	expect("{\"messages\":[{\"content\":\"p \\\\ q \\\" r \\\\\\\" s \\\\\"},"
	    "{\"content\":\"t \\\"model\\\":\\\"x\\\" u\"}],\"stream\":true,\"model\":\"m\"}",
	    "m", 1);
	expect("{\"messages\":[{\"content\":\"a \\\" b\"}],\"model\":\"m\"}", "m", -1);
	expect("{\"messages\":[{\"content\":\"a \\\\\"}],\"model\":\"m\"}", "m", -1);
	expect("{\"prompt\":\"\\\"},\\\"model\\\":\\\"x\\\\\",\"model\":\"m\"}", "m", -1);
	/* the first of each wins */
	expect("{\"model\":\"a\",\"stream\":false,\"model\":\"b\",\"stream\":true}", "a", 0);
}

static void test_stops_with_both(void **state)
{
	struct json_model_scan js;
	static const char body[] = "{\"model\":\"m\",\"stream\":true,\"x\":\"";

	(void)state;
	scan(&js, body, 0);
	assert_true(jsonscan_done(&js));
	/* what follows is not read: an unterminated string changes nothing */
	jsonscan_feed(&js, "}\"model\":\"z\"", 12);
	assert_int_equal(js.value_len, 1);
	assert_false(js.in_string);
	scan(&js, "{\"model\":\"m\"", 0);
	assert_false(jsonscan_done(&js));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_and_stream),
		cmocka_unit_test(test_not_theirs),
		cmocka_unit_test(test_stops_with_both),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
