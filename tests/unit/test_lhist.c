/* SPDX-License-Identifier: Apache-2.0 */
/* The coarse histogram: every value lands in the bucket that holds it, the
 * buckets tile the range without a gap, a bucket's middle is within 12 %
 * of its values, counts saturate, the median. */

#include "lhist.h"

#include "unit.h"

static void test_buckets_tile_the_range(void **state)
{
	const unsigned n = LHIST_LEN(32);

	(void)state;
	assert_int_equal(lhist_lo(0), 0);
	for (unsigned i = 0; i + 1 < n; i++) {
		assert_int_equal(lhist_hi(i), lhist_lo(i + 1));
		assert_true(lhist_lo(i) < lhist_hi(i));
		assert_int_equal(lhist_index(lhist_lo(i), n), i);
		assert_int_equal(lhist_index(lhist_hi(i) - 1, n), i);
		if (i >= 4)
			assert_true((lhist_hi(i) - lhist_mid(i)) / lhist_mid(i) < 0.12);
	}
	/* powers of two are bucket edges (Prometheus bounds line up) */
	for (unsigned b = 1; b < 32; b++)
		assert_int_equal(lhist_lo(lhist_index(1ull << b, n)), 1ull << b);
	assert_int_equal(lhist_index(UINT64_MAX, n), n - 1);
	assert_int_equal(lhist_index(5000, LHIST_LEN(8)), LHIST_LEN(8) - 1);
}

static void test_counts_and_median(void **state)
{
	uint16_t h[LHIST_LEN(20)] = { 0 };
	const unsigned n = LHIST_LEN(20);

	(void)state;
	assert_int_equal(lhist_median(h, n), -1);
	for (int i = 0; i < 70000; i++)
		lhist_add(h, n, 7);
	assert_int_equal(h[lhist_index(7, n)], UINT16_MAX);
	assert_int_equal(lhist_count(h, n), UINT16_MAX);
	memset(h, 0, sizeof h);
	for (int i = 0; i < 10; i++)
		lhist_add(h, n, 1000);
	for (int i = 0; i < 9; i++)
		lhist_add(h, n, 200000);
	assert_true(lhist_median(h, n) > 880 && lhist_median(h, n) < 1120);
	lhist_add(h, n, 200000);
	lhist_add(h, n, 200000);
	assert_true(lhist_median(h, n) > 176000 && lhist_median(h, n) < 224000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets_tile_the_range),
		cmocka_unit_test(test_counts_and_median),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
