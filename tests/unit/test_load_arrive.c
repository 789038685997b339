/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_arrive.c: 200,000 gaps of each kind have the mean
 * 1/rate and the coefficient of variation of their definition (Poisson 1,
 * constant 0, gamma 1/sqrt(k)), within bounds some 6 standard errors
 * wide, and the gamma draws have the shape's mean and variance. */
#include <math.h>

#include "load_arrive.h"

#include "unit.h"

#define N 200000

static void moments(const struct load_conf *c, double *mean, double *cv)
{
	uint64_t rng = 42;
	double s = 0, ss = 0;

	for (int i = 0; i < N; i++) {
		double g = load_arrive_gap(c, &rng);
		assert_true(g >= 0);
		s += g;
		ss += g * g;
	}
	*mean = s / N;
	*cv = sqrt(fmax(0, ss / N - *mean * *mean)) / *mean;
}

static void test_gaps(void **state)
{
	static const double shapes[] = {0.25, 0.5, 1, 2, 4};
	struct load_conf c;
	double mean, cv;

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	c.rate = 50;                       /* 20 ms */
	c.arrivals = LOAD_ARR_POISSON;
	moments(&c, &mean, &cv);
	assert_true(fabs(mean - 20000) < 20000 * 0.015);
	assert_true(fabs(cv - 1) < 0.02);
	c.arrivals = LOAD_ARR_CONSTANT;
	moments(&c, &mean, &cv);
	assert_true(mean == 20000 && cv < 1e-6);
	c.arrivals = LOAD_ARR_GAMMA;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		double want = 1 / sqrt(shapes[i]);
		c.burstiness = shapes[i];
		moments(&c, &mean, &cv);
		if (fabs(mean - 20000) > 20000 * 0.03 || fabs(cv - want) > want * 0.04)
			fail_msg("k %.2f: mean %.1f us, cv %.4f (want %.4f)", shapes[i], mean,
			    cv, want);
	}
	load_conf_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gaps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
