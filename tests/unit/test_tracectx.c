/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of W3C traceparent reading and writing: the examples of the
 * recommendation, and each way a value can be wrong, which the reader
 * must ignore (§3.2: a vendor never passes on or repairs a broken one). */

#include "rng.h"
#include "tracectx.h"

#include "unit.h"

static int parses(const char *s, struct tracectx *t)
{
	return tracectx_parse(s, strlen(s), t);
}

static void test_good(void **state)
{
	struct tracectx t;
	char hex[33], back[TRACECTX_LEN + 1];
	const char *ex = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

	(void)state;
	assert_int_equal(parses(ex, &t), 0);
	tracectx_hex(t.trace_id, 16, hex);
	assert_string_equal(hex, "4bf92f3577b34da6a3ce929d0e0e4736");
	tracectx_hex(t.span_id, 8, hex);
	assert_string_equal(hex, "00f067aa0ba902b7");
	assert_int_equal(t.flags, TRACECTX_SAMPLED);
	tracectx_format(t.trace_id, t.span_id, t.flags, back);
	assert_string_equal(back, ex);
	/* not sampled; other flag bits are kept as read */
	assert_int_equal(parses("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	    &t), 0);
	assert_int_equal(t.flags, 0);
	/* a later version: the fields version 00 defines, and more after '-' */
	assert_int_equal(parses("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	    &t), 0);
	assert_int_equal(parses("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"
	    "what-the-future-will-be-like", &t), 0);
}

static void test_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"00",
		/* version ff is invalid; version 00 has exactly 55 bytes */
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
		"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e47366-0f067aa0ba902b7-01",
		/* upper case, non-hex, wrong separators */
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
		" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
		/* all-zero ids */
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		/* a later version must have '-' after the 55 bytes it shares */
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
	};
	struct tracectx t;

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (parses(bad[i], &t) == 0)
			fail_msg("accepted: \"%s\"", bad[i]);
}

static void test_random(void **state)
{
	uint64_t s = 0;
	uint8_t a[16], b[8];

	(void)state;
	tracectx_random(a, sizeof a, rng_next, &s);
	tracectx_random(b, sizeof b, rng_next, &s);
	assert_memory_not_equal(a, (uint8_t[16]){ 0 }, 16);
	assert_memory_not_equal(b, (uint8_t[8]){ 0 }, 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
