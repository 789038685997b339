/* SPDX-License-Identifier: Apache-2.0 */
/* util.c: the duration text, the inverse of util_parse_duration_us; the
 * RFC 3339 time against gmtime_r. */
#include <time.h>

#include "rng.h"
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

/* What util_rfc3339_ms wrote before it did the arithmetic itself. */
static void ref_rfc3339(uint64_t wall_ms, char out[32])
{
	time_t secs = (time_t)(wall_ms / 1000);
	struct tm tm;

	gmtime_r(&secs, &tm);
	snprintf(out, 32, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
	    (unsigned)(tm.tm_year + 1900) % 10000u, (unsigned)(tm.tm_mon + 1) % 100u,
	    (unsigned)tm.tm_mday % 100u, (unsigned)tm.tm_hour % 100u,
	    (unsigned)tm.tm_min % 100u, (unsigned)tm.tm_sec % 100u,
	    (unsigned)(wall_ms % 1000));
}

static void test_rfc3339(void **state)
{
	/* the epoch, leap days (2000 is one, 2100 is not), a year's end */
	static const struct { uint64_t ms; const char *text; } known[] = {
		{ 0, "1970-01-01T00:00:00.000Z" },
		{ 951782400000ull, "2000-02-29T00:00:00.000Z" },
		{ 1709251199999ull, "2024-02-29T23:59:59.999Z" },
		{ 4107542400000ull, "2100-03-01T00:00:00.000Z" },
		{ 1798761599123ull, "2026-12-31T23:59:59.123Z" },
		{ 253402300799999ull, "9999-12-31T23:59:59.999Z" },
	};
	char a[32], b[32];
	uint64_t seed = 88172645463325252ull;

	(void)state;
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		util_rfc3339_ms(known[i].ms, a);
		assert_string_equal(a, known[i].text);
	}
	/* every day's first and last millisecond to year 2400, and at random */
	for (uint64_t day = 0; day < 157000; day++) {
		for (int end = 0; end < 2; end++) {
			uint64_t ms = day * 86400000ull + (end ? 86399999ull : 0);
			util_rfc3339_ms(ms, a);
			ref_rfc3339(ms, b);
			assert_string_equal(a, b);
		}
	}
	for (int i = 0; i < 200000; i++) {
		uint64_t ms = rng_next(&seed) % 253402300800000ull;
		util_rfc3339_ms(ms, a);
		ref_rfc3339(ms, b);
		assert_string_equal(a, b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration_text),
		cmocka_unit_test(test_rfc3339),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
