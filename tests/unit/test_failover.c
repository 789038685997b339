/* SPDX-License-Identifier: Apache-2.0 */
/* When a request may go to another replica, and what counts against one. */

#include "config.h"
#include "failover.h"

#include "unit.h"

static void test_resend_by_reason(void **state)
{
	(void)state;
	/* nothing reached the backend, or it answered / was stopped before
	 * any token: any method */
	assert_true(failover_resend_ok(FAILOVER_CONNECT, 0));
	assert_true(failover_resend_ok(FAILOVER_CONNECT_TIMEOUT, 0));
	assert_true(failover_resend_ok(FAILOVER_STATUS, 0));
	assert_true(failover_resend_ok(FAILOVER_FIRST_TOKEN, 0));
	/* the backend had it and may have acted: idempotent methods only */
	assert_false(failover_resend_ok(FAILOVER_CLOSED, 0));
	assert_false(failover_resend_ok(FAILOVER_FIRST_BYTE, 0));
	assert_true(failover_resend_ok(FAILOVER_CLOSED, 1));
	assert_true(failover_resend_ok(FAILOVER_FIRST_BYTE, 1));
	assert_string_equal(failover_reason_name(FAILOVER_FIRST_TOKEN), "first_token_timeout");
	assert_string_equal(failover_reason_name(FAILOVER_CONNECT), "connect_error");
}

static void test_retry_on(void **state)
{
	(void)state;
	struct conf *c = unit_conf("routes:\n  - {name: a, upstream: http://127.0.0.1:1}\n"
	    "  - {name: b, upstream: http://127.0.0.1:1, retry_on: [500, 429]}\n");
	const struct conf_route *a = &c->routes[0], *b = &c->routes[1];

	/* the default: 502, 503, and 429 without Retry-After or with 0 */
	assert_true(failover_status(a, 502, NULL, 0));
	assert_true(failover_status(a, 503, NULL, 0));
	assert_true(failover_status(a, 429, NULL, 0));
	assert_true(failover_status(a, 429, "0", 1));
	assert_true(failover_status(a, 429, " 0 ", 3));
	assert_false(failover_status(a, 429, "2", 1));
	assert_false(failover_status(a, 429, "10", 2));
	assert_false(failover_status(a, 429, "Wed, 21 Oct 2015 07:28:00 GMT", 29));
	assert_false(failover_status(a, 500, NULL, 0));
	assert_false(failover_status(a, 504, NULL, 0));
	assert_false(failover_status(a, 200, NULL, 0));
	assert_true(failover_status(b, 500, NULL, 0));
	assert_false(failover_status(b, 502, NULL, 0));
	conf_unref(c);
}

static void test_unhealthy(void **state)
{
	(void)state;
	assert_true(failover_unhealthy(FAILOVER_CONNECT, 0));
	assert_true(failover_unhealthy(FAILOVER_FIRST_TOKEN, 0));
	assert_true(failover_unhealthy(FAILOVER_STATUS, 503));
	/* the replica is well; it says its client sent too much */
	assert_false(failover_unhealthy(FAILOVER_STATUS, 429));
	assert_true(failover_unhealthy_status(504));
	assert_false(failover_unhealthy_status(500));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resend_by_reason),
		cmocka_unit_test(test_retry_on),
		cmocka_unit_test(test_unhealthy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
