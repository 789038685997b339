/* SPDX-License-Identifier: Apache-2.0 */
/* rng.c: splitmix64 gives the reference outputs, and the draws built on it. */

#include "rng.h"

#include "unit.h"

/* Vigna's splitmix64.c from state 0 and from state 1. */
static void test_reference_outputs(void **state)
{
	static const uint64_t from0[] = {
		0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull,
		0x06c45d188009454full, 0xf88bb8a8724c81ecull,
	};
	static const uint64_t from1[] = {
		0x910a2dec89025cc1ull, 0xbeeb8da1658eec67ull,
		0xf893a2eefb32555eull, 0x71c18690ee42c90bull,
	};
	uint64_t s0 = 0, s1 = 1;

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		assert_true(rng_next(&s0) == from0[i]);
		assert_true(rng_next(&s1) == from1[i]);
	}
}

/* The top 53 bits of the next output, scaled: exactly, not about. */
static void test_units(void **state)
{
	uint64_t s = 0, t = 0;
	double top = (double)(0xe220a8397b1dcdafull >> 11);

	(void)state;
	assert_true(rng_unit(&s) == top / 9007199254740992.0);
	assert_true(rng_unit_open(&t) == (top + 0.5) / 9007199254740992.0);
	for (int i = 0; i < 100000; i++) {
		double u = rng_unit(&s), o = rng_unit_open(&t);
		assert_true(u >= 0 && u < 1);
		assert_true(o > 0 && o < 1);
	}
}

static void test_seed(void **state)
{
	uint64_t a = rng_seed(), b = rng_seed();

	(void)state;
	assert_true(a != 0 && b != 0);
	assert_true(a != b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_outputs),
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_seed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
