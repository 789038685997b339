/* SPDX-License-Identifier: Apache-2.0 */
/* load_prefix.c: the distribution's text form, the draws' frequencies
 * against uniform and zipf's weights 1 / (k + 1)^S, and a draw that is a
 * function of the level and the request's number alone. */

#include <math.h>

#include "load_conf.h"
#include "load_prefix.h"

#include "unit.h"

static void test_parse(void **state)
{
	const char *err = NULL;
	double z = -1;
	char name[32];

	(void)state;
	assert_int_equal(load_prefix_parse_dist("uniform", &z, &err), 0);
	assert_true(z == 0);
	assert_int_equal(load_prefix_parse_dist("zipf:1.1", &z, &err), 0);
	assert_true(z == 1.1);
	load_prefix_dist_name(z, name, sizeof name);
	assert_string_equal(name, "zipf:1.1");
	load_prefix_dist_name(0, name, sizeof name);
	assert_string_equal(name, "uniform");
	const char *bad[] = {"zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:11",
	    "zipf:1x", "normal", "zipf:nan", ""};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err = NULL;
		assert_int_equal(load_prefix_parse_dist(bad[i], &z, &err), -1);
		assert_non_null(err);
	}
}

/* n draws of P prefixes; each frequency within tol of want(k). */
static void check_freq(struct load_conf *c, uint32_t n, const double *want, double tol)
{
	struct load_prefix_dist d;
	uint32_t count[16] = {0};

	assert_int_equal(load_prefix_dist_init(&d, c), 0);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = load_prefix_pick(&d, i);
		assert_true(k < c->prefixes);
		count[k]++;
	}
	for (uint32_t k = 0; k < c->prefixes; k++)
		assert_true(fabs((double)count[k] / n - want[k]) < tol);
	load_prefix_dist_free(&d);
}

static void test_frequencies(void **state)
{
	struct load_conf c;
	double want[16], h = 0;

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	c.prefixes = 8;
	for (int k = 0; k < 8; k++)
		want[k] = 1.0 / 8;
	/* 200,000 draws: a share's standard deviation is under 0.0011 */
	check_freq(&c, 200000, want, 0.006);
	/* zipf:1 over 5: 1/k over the 5th harmonic number */
	c.prefixes = 5;
	c.prefix_zipf = 1;
	for (int k = 1; k <= 5; k++)
		h += 1.0 / k;
	for (int k = 0; k < 5; k++)
		want[k] = 1.0 / (k + 1) / h;
	check_freq(&c, 200000, want, 0.006);
	/* zipf:2 over 3: 1, 1/4, 1/9 */
	c.prefixes = 3;
	c.prefix_zipf = 2;
	h = 1 + 0.25 + 1.0 / 9;
	want[0] = 1 / h;
	want[1] = 0.25 / h;
	want[2] = 1.0 / 9 / h;
	check_freq(&c, 200000, want, 0.006);
	/* one prefix: always it */
	c.prefixes = 1;
	want[0] = 1;
	check_freq(&c, 1000, want, 1e-9);
	load_conf_free(&c);
}

/* The same level and number: the same prefix and text; another level's
 * load (a sweep's next level) or seed: other texts. */
static void test_repeatable(void **state)
{
	struct load_conf c;
	struct load_prefix_dist a, b;
	int differ = 0;

	(void)state;
	assert_int_equal(load_conf_init(&c), 0);
	c.prefixes = 100;
	c.prefix_zipf = 1.2;
	assert_int_equal(load_prefix_dist_init(&a, &c), 0);
	assert_int_equal(load_prefix_dist_init(&b, &c), 0);
	for (uint64_t i = 0; i < 1000; i++)
		assert_int_equal(load_prefix_pick(&a, i), load_prefix_pick(&b, i));
	assert_true(load_prefix_text_seed(&a, 3) == load_prefix_text_seed(&b, 3));
	assert_true(load_prefix_text_seed(&a, 3) != load_prefix_text_seed(&a, 4));
	load_prefix_dist_free(&b);
	c.concurrency++;
	assert_int_equal(load_prefix_dist_init(&b, &c), 0);
	assert_true(load_prefix_text_seed(&a, 3) != load_prefix_text_seed(&b, 3));
	for (uint64_t i = 0; i < 100; i++)
		differ += load_prefix_pick(&a, i) != load_prefix_pick(&b, i);
	assert_true(differ > 10);
	load_prefix_dist_free(&b);
	c.concurrency--;
	c.seed++;
	assert_int_equal(load_prefix_dist_init(&b, &c), 0);
	assert_true(load_prefix_text_seed(&a, 3) != load_prefix_text_seed(&b, 3));
	load_prefix_dist_free(&a);
	load_prefix_dist_free(&b);
	load_conf_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_frequencies),
		cmocka_unit_test(test_repeatable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
