/* SPDX-License-Identifier: Apache-2.0 */
/* mock_prefix.c: the leading 64-byte blocks seen within the window are
 * hits, up to the first miss; the chain makes a block's hit depend on
 * every byte before it; a full set gives up its least recently used. */

#include "mock_prefix.h"

#include "unit.h"

#define S 1000000ull   /* a second, in µs */

static void fill(char *b, size_t n, char c)
{
	memset(b, c, n);
}

static void test_leading_blocks(void **state)
{
	struct mock_prefix_table t;
	char a[64 * 10 + 30], b[64 * 10 + 30];

	(void)state;
	assert_int_equal(mock_prefix_table_init(&t, 16, 10 * S), 0);
	fill(a, sizeof a, 'a');
	/* cold: nothing found; a partial last block is never entered */
	assert_int_equal(mock_prefix_table_use(&t, a, sizeof a, 0), 0);
	assert_int_equal(mock_prefix_table_use(&t, a, sizeof a, 1), 10);
	/* the same first 6 blocks, then a difference in block 6 */
	memcpy(b, a, sizeof b);
	b[64 * 6 + 5] = 'b';
	assert_int_equal(mock_prefix_table_use(&t, b, sizeof b, 2), 6);
	/* a difference in block 0: nothing after it matches either (chained) */
	memcpy(b, a, sizeof b);
	b[3] = 'c';
	assert_int_equal(mock_prefix_table_use(&t, b, sizeof b, 3), 0);
	/* shorter than a block: never cached */
	assert_int_equal(mock_prefix_table_use(&t, a, 63, 4), 0);
	assert_int_equal(mock_prefix_table_use(&t, a, 64, 4), 1);
	mock_prefix_table_free(&t);
}

static void test_window(void **state)
{
	struct mock_prefix_table t;
	char a[64 * 4];

	(void)state;
	assert_int_equal(mock_prefix_table_init(&t, 16, 10 * S), 0);
	fill(a, sizeof a, 'x');
	assert_int_equal(mock_prefix_table_use(&t, a, sizeof a, 100 * S), 0);
	/* within the window from the last use: found, and refreshed */
	assert_int_equal(mock_prefix_table_use(&t, a, sizeof a, 110 * S), 4);
	assert_int_equal(mock_prefix_table_use(&t, a, sizeof a, 120 * S), 4);
	/* past it: expired */
	assert_int_equal(mock_prefix_table_use(&t, a, sizeof a, 130 * S + 1), 0);
	assert_int_equal(mock_prefix_table_use(&t, a, sizeof a, 130 * S + 2), 4);
	mock_prefix_table_free(&t);
}

/* One set of 8 ways: 9 one-block bodies; the ninth evicts the least
 * recently used, which the others keep live. */
static void test_lru(void **state)
{
	struct mock_prefix_table t;
	char blk[9][64];

	(void)state;
	assert_int_equal(mock_prefix_table_init(&t, 1, 1000 * S), 0);
	for (int i = 0; i < 9; i++)
		fill(blk[i], 64, (char)('a' + i));
	for (int i = 0; i < 8; i++)
		assert_int_equal(mock_prefix_table_use(&t, blk[i], 64, (uint64_t)i), 0);
	/* touch 0: 1 is now the least recently used */
	assert_int_equal(mock_prefix_table_use(&t, blk[0], 64, 10), 1);
	assert_int_equal(mock_prefix_table_use(&t, blk[8], 64, 11), 0);
	assert_int_equal(mock_prefix_table_use(&t, blk[0], 64, 12), 1);
	assert_int_equal(mock_prefix_table_use(&t, blk[2], 64, 13), 1);
	assert_int_equal(mock_prefix_table_use(&t, blk[1], 64, 14), 0);
	mock_prefix_table_free(&t);
}

static void test_hash_chain(void **state)
{
	char a[64];

	(void)state;
	fill(a, 64, 'q');
	assert_true(mock_prefix_hash(0, a, 64) != 0);
	assert_true(mock_prefix_hash(0, a, 64) == mock_prefix_hash(0, a, 64));
	assert_true(mock_prefix_hash(0, a, 64) != mock_prefix_hash(1, a, 64));
}

/* The server's table: off until configured, tokens = 16 x blocks. */
static void test_server(void **state)
{
	char a[64 * 5];

	(void)state;
	fill(a, sizeof a, 'z');
	assert_false(mock_prefix_enabled());
	assert_int_equal(mock_prefix_lookup(a, sizeof a, 0), 0);
	assert_int_equal(mock_prefix_lookup(a, sizeof a, 1), 0);
	assert_int_equal(mock_prefix_configure(5 * S, 0.25), 0);
	assert_true(mock_prefix_enabled());
	assert_true(mock_prefix_cost() == 0.25);
	assert_int_equal(mock_prefix_lookup(a, sizeof a, 2), 0);
	assert_int_equal(mock_prefix_lookup(a, sizeof a, 3), 5 * 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_leading_blocks),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_lru),
		cmocka_unit_test(test_hash_chain),
		cmocka_unit_test(test_server),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
