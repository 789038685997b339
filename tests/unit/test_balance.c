/* SPDX-License-Identifier: Apache-2.0 */
/* Choosing a replica: power of two choices on open streams, weighted round
 * robin, rendezvous hashing (a joining replica moves about 1/N of the keys). */

#include "balance.h"

#include "unit.h"

static void test_least_prefers_fewer_streams(void **state)
{
	(void)state;
	struct balance_cand c[3] = { { 1, 10, 0 }, { 1, 0, 0 }, { 1, 10, 0 } };
	uint64_t rng = 1;
	int n1 = 0;

	/* two draws out of three always include the idle one but 1/3 of the
	 * time; when it is drawn, it wins */
	for (int i = 0; i < 3000; i++)
		n1 += balance_least(c, 3, &rng) == 1;
	assert_true(n1 > 1800 && n1 < 2200);
	/* never the same candidate twice: with two, the idle one always wins */
	for (int i = 0; i < 100; i++)
		assert_int_equal(balance_least(c, 2, &rng), 1);
	assert_int_equal(balance_least(c, 1, &rng), 0);
	assert_int_equal(balance_least(c, 0, &rng), -1);
}

/* Requests that stay open: the counts, fed back, stay even. */
static void test_least_spreads_evenly(void **state)
{
	(void)state;
	struct balance_cand c[3] = { { 1, 0, 0 }, { 1, 0, 0 }, { 1, 0, 0 } };
	uint64_t rng = 7;

	for (int i = 0; i < 300; i++)
		c[balance_least(c, 3, &rng)].load++;
	for (int i = 0; i < 3; i++)
		assert_in_range(c[i].load, 95, 105);
}

/* Per unit of weight: weight 3 takes three times the streams. */
static void test_least_weights(void **state)
{
	(void)state;
	struct balance_cand c[2] = { { 3, 0, 0 }, { 1, 0, 0 } };
	uint64_t rng = 3;

	for (int i = 0; i < 400; i++)
		c[balance_least(c, 2, &rng)].load++;
	assert_in_range(c[0].load, 290, 310);
}

static void test_round_robin(void **state)
{
	(void)state;
	struct balance_cand c[3] = { { 1, 0, 0 }, { 2, 0, 0 }, { 1, 0, 0 } };
	int seen[3] = { 0 };

	for (uint64_t t = 0; t < 8; t++)
		seen[balance_round_robin(c, 3, t)]++;
	assert_int_equal(seen[0], 2);
	assert_int_equal(seen[1], 4);
	assert_int_equal(seen[2], 2);
	assert_int_equal(balance_round_robin(c, 3, 0), 0);
	assert_int_equal(balance_round_robin(c, 3, 1), 1);
	assert_int_equal(balance_round_robin(c, 3, 3), 2);
	assert_int_equal(balance_round_robin(c, 0, 3), -1);
}

static void ids(struct balance_cand *c, size_t n)
{
	char name[32];
	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof name, "http://10.0.0.%zu:8000", i + 1);
		c[i] = (struct balance_cand){ 1, 0, balance_key(name, strlen(name)) };
	}
}

/* The same key, the same replica; a fourth replica takes about a quarter
 * of the keys, all of them its own (none move between the three). */
static void test_hash_affinity_and_join(void **state)
{
	(void)state;
	struct balance_cand c[4];
	int per[4] = { 0 }, moved = 0, elsewhere = 0;
	char key[32];

	ids(c, 4);
	for (int k = 0; k < 3000; k++) {
		long a, b;
		snprintf(key, sizeof key, "tenant-%d", k);
		a = balance_hash(c, 3, balance_key(key, strlen(key)));
		assert_int_equal(a, balance_hash(c, 3, balance_key(key, strlen(key))));
		b = balance_hash(c, 4, balance_key(key, strlen(key)));
		per[a]++;
		moved += a != b;
		elsewhere += a != b && b != 3;
	}
	for (int i = 0; i < 3; i++)
		assert_in_range(per[i], 900, 1100);
	assert_in_range(moved, 650, 850);       /* 3000 / 4 */
	assert_int_equal(elsewhere, 0);
}

/* A replica that leaves: only its keys move. */
static void test_hash_leave(void **state)
{
	(void)state;
	struct balance_cand c[3], rest[2];
	char key[32];

	ids(c, 3);
	rest[0] = c[0];
	rest[1] = c[2];
	for (int k = 0; k < 1000; k++) {
		uint64_t h;
		long a, b;
		snprintf(key, sizeof key, "s%d", k);
		h = balance_key(key, strlen(key));
		a = balance_hash(c, 3, h);
		b = balance_hash(rest, 2, h);
		if (a != 1)
			assert_int_equal(b, a == 0 ? 0 : 1);
	}
}

static void test_hash_weights(void **state)
{
	(void)state;
	struct balance_cand c[2];
	char key[32];
	int n0 = 0;

	ids(c, 2);
	c[0].weight = 3;
	for (int k = 0; k < 4000; k++) {
		snprintf(key, sizeof key, "k%d", k);
		n0 += balance_hash(c, 2, balance_key(key, strlen(key))) == 0;
	}
	assert_in_range(n0, 2850, 3150);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_least_prefers_fewer_streams),
		cmocka_unit_test(test_least_spreads_evenly),
		cmocka_unit_test(test_least_weights),
		cmocka_unit_test(test_round_robin),
		cmocka_unit_test(test_hash_affinity_and_join),
		cmocka_unit_test(test_hash_leave),
		cmocka_unit_test(test_hash_weights),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
