/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_capfit.c: Student's t quantile against its tables,
 * and the capacity fitted on replications: a line's crossing exactly, an
 * interval that holds it and narrows with the runs, and none without a
 * rise. */
#include <math.h>

#include "load_capfit.h"

#include "unit.h"

static void near(double a, double b, double tol)
{
	if (!(fabs(a - b) <= tol))
		fail_msg("%.9g is not %.9g within %g", a, b, tol);
}

static void test_t(void **state)
{
	(void)state;
	near(load_t_quantile(0.975, 1), 12.7062, 1e-4);
	near(load_t_quantile(0.975, 2), 4.3027, 1e-4);
	near(load_t_quantile(0.975, 10), 2.2281, 1e-4);
	near(load_t_quantile(0.95, 5), 2.0150, 1e-4);
	near(load_t_quantile(0.975, 1e6), 1.95997, 1e-4);
	near(load_t_quantile(0.025, 4), -2.7764, 1e-4);
}

static void test_fit(void **state)
{
	/* log(p95 / limit) = (rate - 50) / 20, with a run's scatter of +-0.05 */
	double x[] = {40, 40, 45, 45, 50, 50, 55, 55, 60, 60};
	double y[10], est, lo, hi, w;

	(void)state;
	for (int i = 0; i < 10; i++)
		y[i] = (x[i] - 50) / 20;
	assert_int_equal(load_capfit(x, y, 10, 0.95, &est, &lo, &hi), 0);
	near(est, 50, 1e-9);
	near(lo, 50, 1e-6);                /* no scatter: no width */
	near(hi, 50, 1e-6);
	for (int i = 0; i < 10; i++)
		y[i] += i % 2 ? 0.05 : -0.05;
	assert_int_equal(load_capfit(x, y, 10, 0.95, &est, &lo, &hi), 0);
	near(est, 50, 1e-9);
	assert_true(lo < 50 && hi > 50);
	w = hi - lo;
	/* a run's scatter of 0.05 is 1 req/s; with 8 df the mean's about
	 * 2.3 x 1 / sqrt(10): an interval of about 1.5 req/s */
	assert_true(w > 0.8 && w < 3);
	/* the same scatter on 3 points (1 df): far wider */
	assert_int_equal(load_capfit(x + 2, y + 2, 3, 0.95, &est, &lo, &hi), 0);
	assert_true(isnan(lo) || hi - lo > 3 * w);
	/* no rise, or too few points: no fit */
	for (int i = 0; i < 10; i++)
		y[i] = 0.1 * (i % 2);
	assert_int_equal(load_capfit(x, y, 10, 0.95, &est, &lo, &hi), -1);
	assert_int_equal(load_capfit(x, y, 2, 0.95, &est, &lo, &hi), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_t),
		cmocka_unit_test(test_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
