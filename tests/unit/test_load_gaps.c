/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_gaps.c: a request's gaps kept whole up to
 * LOAD_GAPS_MAX, a uniform sample of them past it, in bounded memory. */
#include "load_gaps.h"

#include "unit.h"

static void test_exact_up_to_the_bound(void **state)
{
	struct load_gaps g;

	(void)state;
	load_gaps_init(&g, 1);
	for (uint64_t i = 0; i < LOAD_GAPS_MAX; i++)
		load_gaps_add(&g, i * 3);
	assert_int_equal(g.n, LOAD_GAPS_MAX);
	for (size_t i = 0; i < LOAD_GAPS_MAX; i++)
		assert_int_equal(g.v[i], i * 3);
	/* the next request starts empty, on the same memory */
	load_gaps_reset(&g);
	load_gaps_add(&g, (uint64_t)1 << 40);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.v[0], UINT32_MAX);
	load_gaps_free(&g);
}

/* 16 M gaps (a hostile stream of one-token events: 96 MB of them were
 * kept) in 256 KiB: a sample of the gaps offered, uniform over them. The
 * gaps are 1 µs for the first half, 1001 µs for the second: a prefix
 * would hold only 1s, the sample holds both halves evenly (65,536 draws:
 * the share's standard deviation is 0.2 %; 2 % is 10 of them, and the
 * seed is fixed). */
static void test_a_sample_past_it(void **state)
{
	const uint64_t n = 16u << 20;
	struct load_gaps g;
	size_t late = 0;

	(void)state;
	load_gaps_init(&g, 42);
	for (uint64_t i = 0; i < n; i++)
		load_gaps_add(&g, i < n / 2 ? 1 : 1001);
	assert_int_equal(g.n, LOAD_GAPS_MAX);
	assert_true(g.cap <= LOAD_GAPS_MAX);
	assert_int_equal(g.seen, n);
	for (size_t i = 0; i < g.n; i++) {
		assert_true(g.v[i] == 1 || g.v[i] == 1001);
		late += g.v[i] == 1001;
	}
	assert_true(late > LOAD_GAPS_MAX * 0.48 && late < LOAD_GAPS_MAX * 0.52);
	load_gaps_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_up_to_the_bound),
		cmocka_unit_test(test_a_sample_past_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
