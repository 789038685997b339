/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_shard.c: "I/N" is read and its errors refused; the
 * shards of a plan are a partition of it (each seq in exactly one, a
 * shard's k-th request the plan's k N + I); the shares of a count and of
 * users add up to it, whatever the warm-up before it; and a request's
 * draws depend on the seed and its seq, not on the shard. */
#include "load_shard.h"

#include "unit.h"

static void test_parse(void **state)
{
	static const char *const bad[] = {"", "1", "/3", "3/3", "4/3", "0/0", "-1/3",
		"1/-3", "1/3x", " 1/3", "1/ 3", "a/b", "0/4097", "99999999999999999999/3"};
	const char *err;
	uint32_t i, n;

	(void)state;
	assert_int_equal(load_shard_parse("0/1", &i, &n, &err), 0);
	assert_int_equal(i, 0);
	assert_int_equal(n, 1);
	assert_int_equal(load_shard_parse("2/3", &i, &n, &err), 0);
	assert_int_equal(i, 2);
	assert_int_equal(n, 3);
	assert_int_equal(load_shard_parse("4095/4096", &i, &n, &err), 0);
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		err = NULL;
		assert_int_equal(load_shard_parse(bad[k], &i, &n, &err), -1);
		assert_non_null(err);
	}
}

/* Every seq of the plan is one shard's, and shard i's k-th is k n + i. */
static void test_partition(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= 7; n++) {
		for (uint64_t seq = 0; seq < 100; seq++) {
			int owners = 0;
			for (uint32_t i = 0; i < n; i++)
				owners += load_shard_mine(seq, i, n);
			assert_int_equal(owners, 1);
		}
		for (uint32_t i = 0; i < n; i++)
			for (uint64_t k = 0; k < 50; k++)
				assert_true(load_shard_mine(load_shard_seq(k, i, n), i, n));
	}
	assert_int_equal(load_shard_seq(5, 0, 0), 5);
	assert_true(load_shard_mine(5, 0, 0));
}

/* The shares of [from, from + count) are the seqs each shard owns there. */
static void test_share(void **state)
{
	(void)state;
	for (uint32_t n = 1; n <= 6; n++)
		for (uint64_t from = 0; from < 9; from++)
			for (uint64_t count = 0; count < 20; count++) {
				uint64_t sum = 0;
				for (uint32_t i = 0; i < n; i++) {
					uint64_t mine = 0;
					for (uint64_t s = from; s < from + count; s++)
						mine += load_shard_mine(s, i, n);
					assert_int_equal(load_shard_share(from, count, i, n), mine);
					sum += mine;
				}
				assert_int_equal(sum, count);
			}
	assert_int_equal(load_shard_share(3, 10, 0, 0), 10);
	/* 10 users on 3 shards: 4, 3, 3 */
	assert_int_equal(load_shard_share(0, 10, 0, 3), 4);
	assert_int_equal(load_shard_share(0, 10, 2, 3), 3);
}

/* A request's state is the seed's and the seq's: equal for equal ones,
 * apart for neighbours and for other seeds. */
static void test_rng(void **state)
{
	(void)state;
	assert_true(load_shard_rng(1, 7) == load_shard_rng(1, 7));
	assert_true(load_shard_rng(1, 7) != load_shard_rng(1, 8));
	assert_true(load_shard_rng(1, 7) != load_shard_rng(2, 7));
	assert_true(load_shard_rng(0, 0) != 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_partition),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_rng),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
