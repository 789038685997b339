/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_settle.c: the warm-up a rate needs grows as the
 * square of its nearness to the service rate, is none without variance,
 * and never ends at or past the service rate. */
#include <math.h>
#include <string.h>

#include "load_settle.h"

#include "unit.h"

static void test_settle(void **state)
{
	(void)state;
	/* 32 slots of 100 ms: 320/s; Poisson at 300/s: 2 x 300 / 20^2 */
	assert_true(fabs(load_settle_s(300, 320, 1) - 1.5) < 1e-12);
	/* twice as near: four times as long (and a little more rate) */
	assert_true(fabs(load_settle_s(310, 320, 1) - 6.2) < 1e-12);
	assert_true(load_settle_s(40, 320, 1) < 0.01);
	assert_true(load_settle_s(300, 320, 0) == 0);
	assert_true(isinf(load_settle_s(320, 320, 1)));
	assert_true(isinf(load_settle_s(400, 320, 0)));
	assert_true(isnan(load_settle_s(300, NAN, 1)));
}

static void test_ca2(void **state)
{
	struct load_conf c;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.arrivals = LOAD_ARR_POISSON;
	assert_true(load_settle_ca2(&c) == 1);
	c.arrivals = LOAD_ARR_CONSTANT;
	assert_true(load_settle_ca2(&c) == 0);
	c.arrivals = LOAD_ARR_GAMMA;
	c.burstiness = 0.25;
	assert_true(load_settle_ca2(&c) == 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_settle),
		cmocka_unit_test(test_ca2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
