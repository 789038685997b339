/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_levels.c's pure parts: the sweep's keys and levels
 * and the saturation rule on figures a backend with a knee gives. */
#include <math.h>

#include "load_levels.h"

#include "unit.h"

static void test_plan(void **state)
{
	struct load_plan p;
	const char *err, *hint;

	(void)state;
	load_plan_init(&p);
	assert_int_equal(load_plan_key("concurrency", &hint), LOAD_KEY_CONCURRENCY);
	assert_int_equal(load_plan_key("prompt_tokens", &hint), LOAD_KEY_PROMPT_TOKENS);
	assert_int_equal(load_plan_key("concurency", &hint), LOAD_KEY_NONE);
	assert_string_equal(hint, "concurrency");
	assert_int_equal(load_plan_key("zzzzzzzzzz", &hint), LOAD_KEY_NONE);
	assert_null(hint);
	assert_int_equal(load_plan_levels(&p, "1,2,4,8", &err), 0);
	assert_int_equal(p.n, 4);
	assert_false(p.geometric);
	assert_int_equal(load_plan_levels(&p, "1..8", &err), 0);
	assert_true(p.geometric && p.from == 1 && p.to == 8 && p.factor == 2);
	assert_int_equal(load_plan_levels(&p, "0.5..100x1.5", &err), 0);
	assert_true(p.from == 0.5 && p.to == 100 && p.factor == 1.5);
	assert_int_equal(load_plan_levels(&p, "4..", &err), 0);
	assert_true(isinf(p.to));
	assert_int_equal(load_plan_levels(&p, "4..x3", &err), 0);
	assert_true(p.factor == 3 && isinf(p.to));
	assert_int_equal(load_plan_levels(&p, "4,2", &err), -1);
	assert_int_equal(load_plan_levels(&p, "8..4", &err), -1);
	assert_int_equal(load_plan_levels(&p, "1..8x1", &err), -1);
	assert_int_equal(load_plan_levels(&p, "0,1", &err), -1);
	assert_int_equal(load_plan_levels(&p, "1..8y", &err), -1);
	assert_int_equal(load_plan_levels(&p, "", &err), -1);
}

static struct load_summary level(double tokens_per_s, double e2e_p50)
{
	struct load_summary s;

	memset(&s, 0, sizeof(s));
	s.output_tokens_per_s = tokens_per_s;
	s.e2e.median = e2e_p50;
	return s;
}

/* A closed loop at a backend of 16 slots (ttft 20 ms, 32 tokens at 10 ms
 * + 0.5 ms per other stream): 8 -> 16 users still buys 56 % more tokens;
 * 16 -> 32 none, and the latency doubles. An open loop past its capacity
 * the same. A plateau without waiting is not saturation. */
static void test_saturation(void **state)
{
	struct load_summary c8 = level(584, 438), c16 = level(911, 562),
	    c32 = level(912, 1124), c24 = level(915, 843);

	(void)state;
	assert_false(load_levels_saturated(&c8, 8, &c16, 16, 0.1));
	assert_true(load_levels_saturated(&c16, 16, &c32, 32, 0.1));
	/* a smaller step is held to its own growth: x1.5 must buy 5 % */
	assert_true(load_levels_saturated(&c16, 16, &c24, 24, 0.1));
	c24.output_tokens_per_s = 990;
	assert_false(load_levels_saturated(&c16, 16, &c24, 24, 0.1));
	/* throughput flat, latency flat: the load never arrived (a client
	 * limit, a cap); not the backend's knee */
	c32.e2e.median = 570;
	assert_false(load_levels_saturated(&c16, 16, &c32, 32, 0.1));
	assert_false(load_levels_saturated(&c16, 16, &c16, 16, 0.1));
}

/* An open loop: the level, offered 16 req/s and carried 8.8 with
 * TTFT growing, is saturated; one that carried 15.5 of 16 with a flat TTFT
 * is not; one that carried its load while its TTFT rose steadily, from
 * 40 to 400 ms over a minute, is (a queue growing without end); noise
 * about a flat TTFT is not. */
static void test_open_saturation(void **state)
{
	struct load_summary s;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.window_s = 60;
	s.requests = 960;
	s.requests_per_s = 8.8;
	s.ttft.median = 4300;
	assert_true(load_levels_open_saturated(&s, 0.9));
	s.requests_per_s = 15.5;
	s.ttft.median = 60;
	s.drift.n = 930;
	s.drift.slope = 0.5;            /* ms per minute: within noise */
	s.drift.r2 = 0.001;
	assert_false(load_levels_open_saturated(&s, 0.9));
	s.drift.slope = 360;            /* 40 -> 400 ms over the minute */
	s.drift.r2 = 0.6;
	s.ttft.median = 220;
	assert_true(load_levels_open_saturated(&s, 0.9));
	s.drift.r2 = 0.02;              /* t = 4.3: not significant enough */
	assert_false(load_levels_open_saturated(&s, 0.9));
	s.requests = 0;                 /* nothing offered: nothing to say */
	assert_false(load_levels_open_saturated(&s, 0.9));
}

/* Repeats are independent replications: seeds of their own. */
static void test_seed(void **state)
{
	(void)state;
	assert_true(load_levels_seed(1, 0) == 1);
	assert_true(load_levels_seed(1, 1) != 1);
	assert_true(load_levels_seed(1, 1) != load_levels_seed(1, 2));
	assert_true(load_levels_seed(1, 1) != load_levels_seed(2, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_saturation),
		cmocka_unit_test(test_open_saturation),
		cmocka_unit_test(test_seed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
