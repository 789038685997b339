/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the OTLP sender's Retry-After reading (RFC 9110
 * §10.2.3): delay-seconds and an HTTP-date, and what is neither. */

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retry_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
