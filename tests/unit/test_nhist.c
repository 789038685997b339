/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of nhist.c's whole-microsecond path: nhist_index_us against
 * nhist_index of the value in seconds (every value below 2^22 µs, and the
 * few values around every bucket bound up to 2^32), buckets added by
 * index against as many single records, and nhist_record_us_n against
 * nhist_record_n. */
#include <math.h>

#include "nhist.h"
#include "rng.h"

#include "unit.h"

static uint64_t seed = 7;

static int32_t ref(uint64_t us)
{
	return nhist_index((double)us / 1e6);
}

static void test_index_us_small(void **state)
{
	(void)state;
	for (uint64_t us = 1; us < (1u << 22); us++)
		if (nhist_index_us(us) != ref(us))
			fail_msg("%llu us: %d, not %d", (unsigned long long)us,
			    nhist_index_us(us), ref(us));
}

/* Around every bound from 2^22 µs to 2^32, where a cell spans many values
 * and the cut inside it is what decides; and at random. */
static void test_index_us_bounds(void **state)
{
	(void)state;
	for (int32_t idx = ref(1u << 22) - 1; idx <= ref(UINT32_MAX); idx++) {
		uint64_t b = (uint64_t)(nhist_upper(idx) * 1e6);
		for (uint64_t us = b > 3 ? b - 3 : 1; us <= b + 3 && us <= UINT32_MAX; us++)
			if (nhist_index_us(us) != ref(us))
				fail_msg("%llu us: %d, not %d", (unsigned long long)us,
				    nhist_index_us(us), ref(us));
	}
	for (int i = 0; i < 1000000; i++) {
		uint64_t us = 1 + rng_next(&seed) % UINT32_MAX;
		assert_int_equal(nhist_index_us(us), ref(us));
	}
	/* past the table: the slow way, the same answer */
	assert_int_equal(nhist_index_us((uint64_t)1 << 33), ref((uint64_t)1 << 33));
}

/* Values counted by bucket elsewhere, added by index, make the same
 * histogram as recording each. */

/* a and b hold the same buckets, zeros and counts. */
static void same_hist(const struct nhist *a, const struct nhist *b)
{
	assert_int_equal(a->zero_count, b->zero_count);
	assert_int_equal(a->n, b->n);
	for (uint32_t i = 0; i < b->n; i++) {
		assert_int_equal(a->b[i].idx, b->b[i].idx);
		assert_int_equal(a->b[i].count, b->b[i].count);
	}
}

static void test_add_index(void **state)
{
	(void)state;
	for (int round = 0; round < 2000; round++) {
		struct nhist one = { 0 }, batch = { 0 };
		unsigned n = (unsigned)(rng_next(&seed) % 33);
		uint32_t base = (uint32_t)(rng_next(&seed) % 100000);

		for (unsigned i = 0; i < n; i++) {
			uint64_t r = rng_next(&seed);
			uint32_t v = round % 4 == 0 ? (uint32_t)r : round % 4 == 1 ?
			    (uint32_t)(r % 3) : base + (uint32_t)(r % 2000);
			assert_int_equal(nhist_record(&one, (double)v / 1e6), 0);
			if (v == 0)
				batch.zero_count++;
			else
				assert_int_equal(nhist_add_index(&batch, nhist_index_us(v), 1), 0);
		}
		same_hist(&batch, &one);
		nhist_free(&one);
		nhist_free(&batch);
	}
	/* the span the statistics' scratch counts in: 1 µs to 2^32 - 1 */
	assert_true(nhist_index_us(UINT32_MAX) - nhist_index_us(1) < 2112);
}

/* nhist_record_us_n (the Prometheus histograms of µs) makes the same
 * histogram as nhist_record_n of the value in seconds: 0, small, past the
 * table, n at once. */
static void test_record_us_n(void **state)
{
	(void)state;
	for (int round = 0; round < 2000; round++) {
		struct nhist one = { 0 }, us = { 0 };
		unsigned n = (unsigned)(rng_next(&seed) % 33);

		for (unsigned i = 0; i < n; i++) {
			uint64_t r = rng_next(&seed), k = 1 + r % 5;
			uint64_t v = round % 4 == 0 ? r >> (r % 40) : round % 4 == 1 ?
			    r % 3 : round % 4 == 2 ? r % 200000 : ((uint64_t)1 << 32) + r % 1000;
			assert_int_equal(nhist_record_n(&one, (double)v / 1e6, k), 0);
			assert_int_equal(nhist_record_us_n(&us, v, k), 0);
		}
		same_hist(&us, &one);
		nhist_free(&one);
		nhist_free(&us);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_us_small),
		cmocka_unit_test(test_index_us_bounds),
		cmocka_unit_test(test_add_index),
		cmocka_unit_test(test_record_us_n),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
