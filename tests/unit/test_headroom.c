/* SPDX-License-Identifier: Apache-2.0 */
/* headroom.c: the least-squares line of TTFT on concurrency, and where it
 * reaches a threshold. */
#include <math.h>

#include "headroom.h"

#include "unit.h"

struct sums {
	double n, sx, sy, sxy, sxx, syy;
};

static void add(struct sums *s, double x, double y)
{
	s->n++;
	s->sx += x;
	s->sy += y;
	s->sxy += x * y;
	s->sxx += x * x;
	s->syy += y * y;
}

static void fit(const struct sums *s, struct headroom_fit *f)
{
	headroom_fit(s->n, s->sx, s->sy, s->sxy, s->sxx, s->syy, f);
}

static void test_a_line_and_its_headroom(void **state)
{
	struct sums s = { 0 };
	struct headroom_fit f;

	(void)state;
	/* TTFT = 50 ms + 20 ms per stream, with a little noise */
	for (int c = 0; c < 8; c++) {
		add(&s, c, 50 + 20 * c + 1);
		add(&s, c, 50 + 20 * c - 1);
	}
	fit(&s, &f);
	assert_true(f.ok);
	assert_true(fabs(f.slope - 20) < 1e-9);
	assert_true(fabs(f.intercept - 50) < 1e-9);
	assert_true(f.r2 > 0.99 && f.r2 <= 1);
	assert_true(fabs(headroom_streams(&f, 250) - 10) < 1e-9);
	assert_true(headroom_streams(&f, 30) == 0);      /* already past it */
	assert_true(headroom_streams(&f, 0) < 0);        /* no threshold */
}

static void test_no_trusted_line_no_headroom(void **state)
{
	struct sums s = { 0 }, flat = { 0 }, down = { 0 };
	struct headroom_fit f;

	(void)state;
	add(&s, 1, 10);
	add(&s, 2, 20);
	fit(&s, &f);
	assert_false(f.ok);                               /* two points */
	for (int i = 0; i < 20; i++)
		add(&flat, i % 4, i % 2 ? 100 : 10);          /* no relation: R² ~ 0 */
	fit(&flat, &f);
	assert_true(f.ok && f.r2 < 0.5);
	assert_true(headroom_streams(&f, 250) < 0);
	for (int c = 0; c < 5; c++)
		add(&down, c, 100 - 10 * c);
	fit(&down, &f);
	assert_true(f.ok && f.r2 > 0.99 && f.slope < 0);
	assert_true(headroom_streams(&f, 250) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_line_and_its_headroom),
		cmocka_unit_test(test_no_trusted_line_no_headroom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
