/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the OTLP sender's Retry-After reading (RFC 9110
 * §10.2.3): delay-seconds and an HTTP-date, and what is neither; and
 * what the sender waits for one: at most 60 s. */

#include "otlphttp.h"

#include "unit.h"

static void test_retry_after(void **state)
{
	/* Sun, 06 Nov 1994 08:49:37 GMT is 784111777 */
	const int64_t now = 784111777;

	(void)state;
	assert_int_equal(otlphttp_retry_after("1", now), 1000000);
	assert_int_equal(otlphttp_retry_after(" 120 ", now), 120000000);
	assert_int_equal(otlphttp_retry_after("0", now), 0);
	assert_int_equal(otlphttp_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), 10000000);
	/* a date past is no wait */
	assert_int_equal(otlphttp_retry_after("Sun, 06 Nov 1994 08:49:27 GMT", now), 0);
	assert_int_equal(otlphttp_retry_after(NULL, now), -1);
	assert_int_equal(otlphttp_retry_after("", now), -1);
	assert_int_equal(otlphttp_retry_after("soon", now), -1);
	assert_int_equal(otlphttp_retry_after("1.5", now), -1);
	assert_int_equal(otlphttp_retry_after("-1", now), -1);
	assert_int_equal(otlphttp_retry_after("Sun, 06 Nov 1994 08:49:47 GMT+1", now), -1);
}

static void test_retry_wait_is_capped(void **state)
{
	const int64_t now = 784111777;

	(void)state;
	assert_int_equal(otlphttp_retry_wait("2", now), 2000000);
	assert_int_equal(otlphttp_retry_wait("60", now), 60000000);
	/* #38: "Retry-After: 999999" held an export 300 s a try */
	assert_int_equal(otlphttp_retry_wait("999999", now), 60000000);
	assert_int_equal(otlphttp_retry_wait("61", now), 60000000);
	assert_int_equal(otlphttp_retry_wait("Mon, 07 Nov 1994 08:49:37 GMT", now), 60000000);
	assert_int_equal(otlphttp_retry_wait("Sun, 06 Nov 1994 08:49:47 GMT", now), 10000000);
	assert_int_equal(otlphttp_retry_wait("soon", now), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_retry_wait_is_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
