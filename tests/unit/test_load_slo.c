/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_slo.c: the targets' syntax and its errors, each
 * figure exact from the samples, its 95 % interval (a percentile's by
 * order statistics, the error rate's by Wilson), "within noise", the
 * binding target and goodput's per-request targets. */
#include <math.h>

#include "load_slo.h"

#include "unit.h"

static void near(double got, double want, double tol)
{
	if (!(fabs(got - want) <= tol))
		fail_msg("got %.9f, want %.9f (within %g)", got, want, tol);
}

static void test_parse(void **state)
{
	struct load_slo s;
	struct goodput_targets g;
	char err[200];

	(void)state;
	assert_int_equal(load_slo_parse(&s, "ttft_p95<=1s tpot_p99.9<=50ms,"
	    "error_rate<=1% e2e_mean<=2s itl_max<=300ms ttfo_p50<=800ms", err, sizeof err), 0);
	assert_int_equal(s.n, 6);
	assert_string_equal(s.v[0].name, "ttft_p95");
	assert_int_equal(s.v[0].stat, LOAD_SLO_PCT);
	near(s.v[0].pct, 95, 0);
	near(s.v[0].limit, 1000, 0);
	near(s.v[1].pct, 99.9, 1e-12);
	near(s.v[1].limit, 50, 0);
	assert_int_equal(s.v[2].metric, LOAD_SLO_ERROR_RATE);
	near(s.v[2].limit, 0.01, 1e-15);
	assert_int_equal(s.v[3].stat, LOAD_SLO_MEAN);
	assert_int_equal(s.v[4].stat, LOAD_SLO_MAX_STAT);
	load_slo_goodput(&s, &g);
	assert_int_equal(g.us[GOODPUT_TTFT], 1000000);
	assert_int_equal(g.us[GOODPUT_TPOT], 50000);
	assert_int_equal(g.us[GOODPUT_TTFO], 800000);

	assert_int_equal(load_slo_parse(&s, "ttft_p95<=0ms", err, sizeof err), -1);
	assert_non_null(strstr(err, "'ttft_p95<=0ms': no request can take 0"));
	assert_int_equal(load_slo_parse(&s, "ttft_p95<=5", err, sizeof err), -1);
	assert_non_null(strstr(err, "with its unit"));
	assert_int_equal(load_slo_parse(&s, "ttft_p101<=1s", err, sizeof err), -1);
	assert_non_null(strstr(err, "percentile"));
	assert_int_equal(load_slo_parse(&s, "speed_p50<=1s", err, sizeof err), -1);
	assert_non_null(strstr(err, "unknown target"));
	assert_int_equal(load_slo_parse(&s, "error_rate<=100%", err, sizeof err), -1);
	assert_int_equal(load_slo_parse(&s, "error_rate<=-1%", err, sizeof err), -1);
	assert_int_equal(load_slo_parse(&s, "ttft_p95>=1s", err, sizeof err), -1);
	assert_int_equal(load_slo_parse(&s, "ttft_p95<=1s ttft_p95<=2s", err, sizeof err), -1);
	assert_non_null(strstr(err, "twice"));
	assert_int_equal(load_slo_parse(&s, "  ", err, sizeof err), -1);
	assert_int_equal(load_slo_parse(&s, "error_rate<=0", err, sizeof err), 0);
}

static void add(struct loadstats *st, int64_t ttft_us, enum meter_outcome o)
{
	struct load_sample s;

	memset(&s, 0, sizeof(s));
	s.outcome = o;
	s.ttft_us = ttft_us;
	s.tpot_us = -1;
	s.duration_us = ttft_us;
	loadstats_record(st, &s, NULL, 0);
}

/* 1000 TTFTs 1..1000 ms: p95 is 950.05 ms; its interval holds the
 * order statistics 950 +- 1.96 sqrt(1000 x .95 x .05) ~ +-13.5 ranks. */
static void test_eval(void **state)
{
	struct load_slo s;
	struct load_slo_result r;
	struct loadstats st;
	char err[200];

	(void)state;
	loadstats_init(&st);
	for (int i = 1; i <= 1000; i++)
		add(&st, i * 1000, OUTCOME_OK);
	for (int i = 0; i < 10; i++)
		add(&st, 1, OUTCOME_TIMEOUT);
	assert_int_equal(load_slo_parse(&s, "ttft_p95<=940ms ttft_max<=2s "
	    "error_rate<=2%", err, sizeof err), 0);
	assert_int_equal(load_slo_eval(&s, &st, &r), 0);
	near(r.v[0].value, 950.05, 1e-9);
	assert_true(r.v[0].lo >= 935 && r.v[0].lo <= 938);
	assert_true(r.v[0].hi >= 962 && r.v[0].hi <= 965);
	assert_false(r.v[0].met);
	assert_true(r.v[0].noisy);                  /* 940 lies inside */
	assert_int_equal(r.v[0].n, 1000);
	assert_true(r.v[1].met && !r.v[1].noisy);   /* a max has no interval */
	near(r.v[2].value, 10.0 / 1010, 1e-12);
	assert_true(r.v[2].lo < r.v[2].value && r.v[2].hi > r.v[2].value);
	assert_true(r.v[2].met);
	assert_false(r.met);
	assert_true(r.noisy);
	assert_int_equal(r.binding, 0);             /* 950 / 940 is the worst */

	assert_int_equal(load_slo_parse(&s, "ttft_p95<=900ms", err, sizeof err), 0);
	assert_int_equal(load_slo_eval(&s, &st, &r), 0);
	assert_false(r.noisy);                      /* clearly over */
	assert_int_equal(load_slo_parse(&s, "ttft_mean<=600ms error_rate<=0",
	    err, sizeof err), 0);
	assert_int_equal(load_slo_eval(&s, &st, &r), 0);
	near(r.v[0].value, 500.5, 1e-9);
	assert_true(r.v[0].met && !r.v[0].noisy);
	assert_false(r.v[1].met);
	assert_int_equal(r.binding, 1);             /* errors with a limit of 0 */
	loadstats_free(&st);

	/* no sample: no value, not met */
	loadstats_init(&st);
	assert_int_equal(load_slo_eval(&s, &st, &r), 0);
	assert_true(isnan(r.v[0].value));
	assert_false(r.met);
	loadstats_free(&st);
}

/* The order statistics' ranks against the binomial law summed exactly
 * (Python's math.comb): never clamped to the sample. */
static void test_ranks(void **state)
{
	static const struct { size_t n; double pct, conf; size_t l, u; } want[] = {
		{10, 95, 0.95, 8, 11}, {59, 95, 0.95, 52, 60}, {71, 95, 0.95, 63, 72},
		{72, 95, 0.95, 64, 72}, {100, 95, 0.95, 90, 100}, {200, 95, 0.95, 184, 197},
		{1000, 95, 0.95, 936, 964}, {10, 50, 0.95, 2, 9}, {1000, 50, 0.95, 469, 532},
		{72, 99, 0.90, 70, 73}, {1000, 99, 0.90, 985, 996},
	};
	size_t l, u;

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		load_slo_ranks(want[i].n, want[i].pct, want[i].conf, &l, &u);
		assert_int_equal(l, want[i].l);
		assert_int_equal(u, want[i].u);
	}
	assert_int_equal(load_slo_min_n(95, 0.95), 72);
	assert_int_equal(load_slo_min_n(50, 0.95), 6);
	load_slo_ranks(1000000, 95, 0.95, &l, &u);  /* far in the tails: no underflow */
	assert_true(l > 949000 && l < 950000 && u > 950000 && u < 951000);
}

/* 10 samples cannot bound a p95 from above: the level is undecided, not
 * met, however far under the limit its figure; with 100 it is decided. */
static void test_undecided(void **state)
{
	struct load_slo s;
	struct load_slo_result r;
	struct loadstats st;
	char err[200];

	(void)state;
	loadstats_init(&st);
	for (int i = 1; i <= 10; i++)
		add(&st, i * 1000, OUTCOME_OK);
	assert_int_equal(load_slo_parse(&s, "ttft_p95<=50ms", err, sizeof err), 0);
	assert_true(s.confidence == 0.95);
	assert_int_equal(load_slo_eval(&s, &st, &r), 0);
	assert_true(r.v[0].met);                    /* 9.55 <= 50 ... */
	assert_true(isinf(r.v[0].hi));              /* ... but unbounded */
	assert_false(r.v[0].decided);
	assert_false(r.decided);
	assert_true(r.noisy);
	for (int i = 11; i <= 100; i++)
		add(&st, (i % 10 + 1) * 1000, OUTCOME_OK);
	assert_int_equal(load_slo_eval(&s, &st, &r), 0);
	assert_true(r.v[0].decided && r.decided && r.met);
	/* one target surely missed decides the level, whatever the others */
	assert_int_equal(load_slo_parse(&s, "ttft_p50<=2ms ttft_p99<=1s", err, sizeof err), 0);
	assert_int_equal(load_slo_eval(&s, &st, &r), 0);
	assert_false(r.v[1].decided);               /* a p99 of 100 samples */
	assert_true(r.v[0].decided && !r.v[0].met);
	assert_true(r.decided && !r.met);
	loadstats_free(&st);
}

static void add_at(struct loadstats *st, int64_t ttft_us, uint64_t start_us)
{
	struct load_sample s;

	memset(&s, 0, sizeof(s));
	s.outcome = OUTCOME_OK;
	s.ttft_us = ttft_us;
	s.tpot_us = -1;
	s.duration_us = ttft_us;
	s.start_us = start_us;
	loadstats_record(st, &s, NULL, 0);
}

/* A queue's requests are not independent: the same 1000 TTFTs, once
 * interleaved in time (every 20th slow) and once in bursts (the slow ones
 * 50 in a row, as a queue behind a burst makes them): the burst's interval
 * for the p95 is wider, by the batch means' inflation. */
static void test_dependence(void **state)
{
	struct load_slo s;
	struct load_slo_result a, b;
	struct loadstats st;
	char err[200];

	(void)state;
	assert_int_equal(load_slo_parse(&s, "ttft_p95<=1s", err, sizeof err), 0);
	loadstats_init(&st);
	for (int i = 0; i < 1000; i++)
		add_at(&st, (i % 20 == 0 ? 500 + i / 20 : 10 + i % 20) * 1000, (uint64_t)i * 1000);
	assert_int_equal(load_slo_eval(&s, &st, &a), 0);
	loadstats_free(&st);
	loadstats_init(&st);
	for (int i = 0; i < 1000; i++)
		add_at(&st, (i >= 400 && i < 450 ? 500 + (i - 400) : 10 + i % 20) * 1000,
		    (uint64_t)i * 1000);
	assert_int_equal(load_slo_eval(&s, &st, &b), 0);
	loadstats_free(&st);
	assert_true(a.v[0].value == b.v[0].value);
	assert_true(a.v[0].inflation < 1.5);
	assert_true(b.v[0].inflation > 10);
	assert_true(b.v[0].lo < a.v[0].lo || b.v[0].hi > a.v[0].hi);
	assert_true(isinf(b.v[0].hi));    /* 1000 / 40 requests bound no p95 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_eval),
		cmocka_unit_test(test_ranks),
		cmocka_unit_test(test_undecided),
		cmocka_unit_test(test_dependence),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
