/* util.c: the duration text, the inverse of util_parse_duration_us. */

#include "util.h"

#include "unit.h"

static const char *duration(uint64_t us)
{
	static char buf[32];
	util_duration_text(us, buf, sizeof buf);
	return buf;
}

/* The largest unit that divides the duration, read back as the same
 * number of microseconds. */
static void test_duration_text(void **state)
{
	static const uint64_t us[] = {
		0, 1, 999, 1000, 1500, 999000, 1000000, 1500000, 59000000, 60000000,
		90000000, 300000000, 3540000000ull, 3600000000ull, 5400000000ull,
		86400000000ull, 3600000000001ull, 10000000000000000ull,
	};
	uint64_t back;

	(void)state;
	assert_string_equal(duration(0), "0s");
	assert_string_equal(duration(1), "1us");
	assert_string_equal(duration(1500), "1500us");
	assert_string_equal(duration(1000), "1ms");
	assert_string_equal(duration(1500000), "1500ms");
	assert_string_equal(duration(1000000), "1s");
	assert_string_equal(duration(90000000), "90s");
	assert_string_equal(duration(60000000), "1m");
	assert_string_equal(duration(300000000), "5m");
	assert_string_equal(duration(5400000000ull), "90m");
	assert_string_equal(duration(3600000000ull), "1h");
	assert_string_equal(duration(86400000000ull), "1d");
	assert_string_equal(duration(90000000000ull), "25h");
	assert_string_equal(duration(28 * 86400000000ull), "28d");
	assert_int_equal(util_parse_duration_us("28d", &back), 0);
	assert_int_equal(back, 28 * 86400000000ull);
	for (size_t i = 0; i < sizeof us / sizeof us[0]; i++) {
		assert_int_equal(util_parse_duration_us(duration(us[i]), &back), 0);
		assert_int_equal(back, us[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
