/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_summary.c: every figure against the same figure
 * computed here another way (percentiles by numpy's rule written out from
 * a sorted copy, the standard deviation in one pass of sums), throughput
 * over the window with each request's tokens spread over its token span,
 * goodput by the one rule, slices, drift and the input-length fit. */
#include <math.h>

#include "load_summary.h"
#include "rng.h"

#include "unit.h"

static void near(double got, double want, double tol)
{
	if (!(fabs(got - want) <= tol))
		fail_msg("got %.9f, want %.9f (within %g)", got, want, tol);
}

static struct load_sample ok_at(uint64_t start_us, int64_t ttft, double tpot)
{
	struct load_sample s;

	memset(&s, 0, sizeof(s));
	s.outcome = OUTCOME_OK;
	s.start_us = start_us;
	s.ttft_us = s.ttfo_us = ttft;
	s.tpot_us = tpot;
	s.duration_us = ttft + 1000;
	s.first_token_us = (int64_t)start_us + ttft;
	s.last_token_us = s.first_token_us + 900;
	s.output_tokens = 10;
	s.input_tokens = -1;
	s.first_chunk_tokens = -1;
	s.output_speed = -1;
	s.events = 12;
	s.token_chunks = 10;
	s.lag_us = 0;
	return s;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* numpy.percentile(v, p) (method "linear") of unsorted v, by its formula
 * h = (n - 1) p / 100, v[floor h] + (h - floor h)(v[floor h + 1] - v[floor h]). */
static double numpy_pct(const double *in, size_t n, double p)
{
	double *v = malloc(n * sizeof(*v)), h, out;
	size_t lo;

	memcpy(v, in, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp);
	h = (double)(n - 1) * p / 100;
	lo = (size_t)floor(h);
	out = lo + 1 < n ? v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]) : v[lo];
	free(v);
	return out;
}

/* The case: TPOT samples spanning 19.71 to 20.17 ms, whose exact
 * p50 / p99 a bucketed histogram cannot tell apart; and log-uniform TTFTs
 * from 1 ms to 20 s. Every percentile, the mean and the std exact. */
static void test_exact_percentiles(void **state)
{
	enum { N = 5001 };
	static double ttft[N], tpot[N], buf[N];
	struct loadstats st;
	struct load_pcts p;
	struct load_summary sum;
	struct load_sum_in in;
	const char *err;
	uint64_t rng = 7;
	double s1 = 0, s2 = 0;

	(void)state;
	assert_int_equal(load_pcts_parse("50,90,95,99,99.9", &p, &err), 0);
	loadstats_init(&st);
	for (size_t i = 0; i < N; i++) {
		double u = rng_unit(&rng);
		struct load_sample s;
		ttft[i] = floor(exp(log(1000.0) + (log(2e7) - log(1000.0)) * u));
		tpot[i] = 19710 + 460 * rng_unit(&rng);
		s = ok_at(i * 1000, (int64_t)ttft[i], tpot[i]);
		assert_int_equal(loadstats_record(&st, &s, NULL, 0), 0);
	}
	memset(&in, 0, sizeof(in));
	in.st = &st;
	in.pcts = &p;
	in.window_end_us = N * 1000;
	assert_int_equal(load_summary(&in, &sum), 0);
	for (size_t k = 0; k < p.n; k++) {
		for (size_t i = 0; i < N; i++)
			buf[i] = ttft[i] / 1e3;
		near(sum.ttft.q[k], numpy_pct(buf, N, p.p[k]), 1e-9);
		for (size_t i = 0; i < N; i++)
			buf[i] = tpot[i] / 1e3;
		near(sum.tpot.q[k], numpy_pct(buf, N, p.p[k]), 1e-9);
	}
	/* the tails tell apart: p50 and p99 are not one bucket */
	assert_true(sum.tpot.q[3] - sum.tpot.q[0] > 0.1);
	for (size_t i = 0; i < N; i++) {
		s1 += tpot[i] / 1e3;
		s2 += (tpot[i] / 1e3) * (tpot[i] / 1e3);
	}
	near(sum.tpot.mean, s1 / N, 1e-9);
	near(sum.tpot.std, sqrt(s2 / N - (s1 / N) * (s1 / N)), 1e-6);
	near(sum.tpot.median, sum.tpot.q[0], 0);
	assert_int_equal(sum.ttft.count, N);
	load_summary_free(&sum);
	loadstats_free(&st);
}

static void test_pcts_parse(void **state)
{
	struct load_pcts p;
	const char *err;
	char name[16];

	(void)state;
	assert_int_equal(load_pcts_parse("25,75", &p, &err), 0);
	assert_int_equal(p.n, 2);
	assert_int_equal(load_pcts_parse("90,50", &p, &err), -1);
	assert_int_equal(load_pcts_parse("0,50", &p, &err), -1);
	assert_int_equal(load_pcts_parse("50,101", &p, &err), -1);
	assert_int_equal(load_pcts_parse("50,", &p, &err), -1);
	assert_int_equal(load_pcts_parse("", &p, &err), -1);
	load_pcts_name(99.9, name, sizeof name);
	assert_string_equal(name, "p99.9");
	load_pcts_name(50, name, sizeof name);
	assert_string_equal(name, "p50");
	near(load_quantile((double[]){1, 2, 3, 4}, 4, 50), 2.5, 0);
	assert_true(isnan(load_quantile(NULL, 0, 50)));
}

/* Throughput is the work inside the window: a request's 10 tokens spread
 * over its 900 µs token span, half of it in the window; the completions
 * in the window; the warm-up's requests in no latency figure. */
static void test_window_and_counts(void **state)
{
	struct loadstats st;
	struct load_pcts p;
	struct load_summary sum;
	struct load_sum_in in;
	struct load_sample s;
	uint32_t gaps[] = {100, 200, 300};

	(void)state;
	load_pcts_default(&p);
	loadstats_init(&st);
	s = ok_at(0, 50000, 100);             /* warm-up: tokens 50.0 .. 50.9 ms */
	s.warmup = 1;
	loadstats_record(&st, &s, gaps, 3);
	s = ok_at(99550, 0, 200);             /* tokens 99.55 .. 100.45 ms: half in */
	loadstats_record(&st, &s, gaps, 3);
	s = ok_at(60000, 1000, 300);
	s.outcome = OUTCOME_TIMEOUT;
	s.output_tokens = 0;
	s.first_token_us = s.last_token_us = -1;
	loadstats_record(&st, &s, NULL, 0);
	memset(&in, 0, sizeof(in));
	in.st = &st;
	in.pcts = &p;
	in.window_start_us = 50450;          /* half of the warm-up one's tokens too */
	in.window_end_us = 100000;
	assert_int_equal(load_summary(&in, &sum), 0);
	assert_int_equal(sum.requests, 2);
	assert_int_equal(sum.ok, 1);
	assert_int_equal(sum.outcomes[OUTCOME_TIMEOUT], 1);
	near(sum.error_rate, 0.5, 0);
	assert_int_equal(sum.ttft.count, 1);         /* the warm-up one is out */
	assert_int_equal(sum.itl.count, 3);
	near(sum.window_s, 0.04955, 1e-12);
	near(sum.output_tokens_per_s, 10 / 0.04955, 1e-6);
	/* completed in the window: the warm-up one (51 ms) and the timeout
	 * (62 ms); the last ends after it */
	assert_int_equal(sum.completed, 2);
	near(sum.itl.median, 0.2, 1e-12);
	load_summary_free(&sum);
	loadstats_free(&st);
}

/* req/s counts each request by the share of its span (intended send to
 * end) inside the window, not whole completions; a level of several
 * runs is measured over the runs' own windows, the gap in none. */
static void test_request_shares_and_windows(void **state)
{
	struct loadstats st;
	struct load_pcts p;
	struct load_summary sum;
	struct load_sum_in in;
	struct load_sample s;
	uint64_t win[2][2] = {{0, 1000000}, {3000000, 4000000}};

	(void)state;
	load_pcts_default(&p);
	loadstats_init(&st);
	s = ok_at(0, 1000, 100);
	s.duration_us = 2000000;              /* 0 .. 2 s: half in [0, 1 s) */
	s.last_token_us = 1999000;
	loadstats_record(&st, &s, NULL, 0);
	memset(&in, 0, sizeof(in));
	in.st = &st;
	in.pcts = &p;
	in.window_end_us = 1000000;
	assert_int_equal(load_summary(&in, &sum), 0);
	assert_int_equal(sum.completed, 0);
	near(sum.requests_per_s, 0.5, 1e-12);
	load_summary_free(&sum);
	s = ok_at(3500000, 1000, 100);
	s.duration_us = 1000000;              /* 3.5 .. 4.5 s: half in [3, 4 s) */
	s.last_token_us = 4499000;
	loadstats_record(&st, &s, NULL, 0);
	in.windows = (const uint64_t (*)[2])win;
	in.nwindows = 2;
	in.window_end_us = 4000000;           /* one window would span the gap */
	assert_int_equal(load_summary(&in, &sum), 0);
	near(sum.window_s, 2, 1e-12);
	near(sum.requests_per_s, (0.5 + 0.5) / 2, 1e-12);
	load_summary_free(&sum);
	loadstats_free(&st);
}

/* Goodput: ok and within every per-request target; a pace that is
 * undefined meets its target; an error is bad. */
static void test_goodput(void **state)
{
	struct loadstats st;
	struct load_pcts p;
	struct load_summary sum;
	struct load_sum_in in;
	struct goodput_targets g = { { 500000, 30000, 0 } };
	struct load_sample s;

	(void)state;
	load_pcts_default(&p);
	loadstats_init(&st);
	s = ok_at(0, 400000, 20000);
	loadstats_record(&st, &s, NULL, 0);     /* good */
	s = ok_at(0, 600000, 20000);
	loadstats_record(&st, &s, NULL, 0);     /* TTFT over */
	s = ok_at(0, 100000, -1);
	loadstats_record(&st, &s, NULL, 0);     /* one token: good */
	s = ok_at(0, 100000, 30000.4);
	loadstats_record(&st, &s, NULL, 0);     /* TPOT a hair over */
	s = ok_at(0, 100000, 10000);
	s.outcome = OUTCOME_UPSTREAM_ERROR;
	loadstats_record(&st, &s, NULL, 0);     /* an error */
	memset(&in, 0, sizeof(in));
	in.st = &st;
	in.pcts = &p;
	in.goodput = &g;
	in.window_end_us = 2000000;
	assert_int_equal(load_summary(&in, &sum), 0);
	assert_int_equal(sum.good, 2);
	assert_int_equal(sum.judged, 5);
	near(sum.attainment, 0.4, 1e-12);
	near(sum.goodput_per_s, 1.0, 1e-12);
	load_summary_free(&sum);
	in.goodput = NULL;
	assert_int_equal(load_summary(&in, &sum), 0);
	assert_int_equal(sum.judged, 0);
	assert_true(isnan(sum.attainment));
	load_summary_free(&sum);
	loadstats_free(&st);
}

/* Slices by the intended send time, tokens where emitted; TTFT growing
 * 60 ms a minute is a drift of 60; TTFT = 20 ms + 50 ms per 1k input
 * tokens is fitted back exactly. */
static void test_slices_drift_fit(void **state)
{
	struct loadstats st;
	struct load_pcts p;
	struct load_summary sum;
	struct load_sum_in in;

	(void)state;
	load_pcts_default(&p);
	loadstats_init(&st);
	for (int i = 0; i < 300; i++) {
		uint64_t start = (uint64_t)i * 100000;          /* every 100 ms, 30 s */
		int64_t ttft = 10000 + (int64_t)start / 1000;   /* +1 ms a second */
		struct load_sample s = ok_at(start, ttft, 5000 + (i % 10) * 100);
		s.input_tokens = 1000 + 100 * (i % 7);
		if (i % 50 == 49)
			s.outcome = OUTCOME_UPSTREAM_ABORT;
		loadstats_record(&st, &s, NULL, 0);
	}
	memset(&in, 0, sizeof(in));
	in.st = &st;
	in.pcts = &p;
	in.window_end_us = 30000000;
	in.slice_us = 10000000;
	assert_int_equal(load_summary(&in, &sum), 0);
	assert_int_equal(sum.nslices, 3);
	for (size_t k = 0; k < 3; k++) {
		assert_int_equal(sum.slices[k].requests, 100);
		assert_int_equal(sum.slices[k].errors, 2);
		near(sum.slices[k].start_s, 10.0 * (double)k, 1e-12);
		/* ttft of the ok ones in [10k, 10k + 10) s: 10 ms + start */
		assert_true(sum.slices[k].ttft_p50 > 10.0 + 10000.0 * (double)k / 1000 &&
		    sum.slices[k].ttft_p50 < 20.0 + 10000.0 * (double)k / 1000);
		near(sum.slices[k].output_tokens_per_s, 100, 1.5);
	}
	near(sum.drift.slope, 60.0, 1e-6);
	near(sum.drift.r2, 1.0, 1e-9);
	load_summary_free(&sum);
	loadstats_free(&st);

	loadstats_init(&st);
	for (int i = 0; i < 50; i++) {
		struct load_sample s = ok_at(0, 20000 + 50 * (100 * i), 1000);
		s.input_tokens = 100 * i;
		loadstats_record(&st, &s, NULL, 0);
	}
	in.st = &st;
	assert_int_equal(load_summary(&in, &sum), 0);
	near(sum.input_fit.slope, 50.0, 1e-9);
	near(sum.input_fit.intercept, 20.0, 1e-9);
	near(sum.input_fit.r2, 1.0, 1e-12);
	load_summary_free(&sum);
	loadstats_free(&st);

	/* every input 134 tokens: 0.134 does not sum back exactly, and a
	 * constant input must still have no fit */
	loadstats_init(&st);
	for (int i = 0; i < 97; i++) {
		struct load_sample s = ok_at(0, 20000 + 37 * i, 1000);
		s.input_tokens = 134;
		loadstats_record(&st, &s, NULL, 0);
	}
	in.st = &st;
	assert_int_equal(load_summary(&in, &sum), 0);
	assert_int_equal(sum.input_fit.n, 97);
	assert_true(isnan(sum.input_fit.slope) && isnan(sum.input_fit.r2));
	load_summary_free(&sum);
	loadstats_free(&st);
}

/* A level run twice (independent replications, the second 20 s after the
 * first on the level's timeline): slices are each run's, none across the
 * seam or the gap, a run's last slice cut at its window's end (the
 * cool-down's tokens after it in none), and the drift is the slope within
 * the runs. TTFT 10
 * ms + 1 ms a second in the first, 50 ms + 1 ms a second in the second:
 * 60 ms a minute, not the jump between them over the gap. */
static void test_slices_drift_per_run(void **state)
{
	static const uint64_t win[2][2] = {{0, 10000000}, {20000000, 30000000}};
	struct loadstats st;
	struct load_pcts p;
	struct load_summary sum;
	struct load_sum_in in;

	(void)state;
	load_pcts_default(&p);
	loadstats_init(&st);
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 100; i++) {
			uint64_t t = (uint64_t)i * 100000;               /* in the run */
			struct load_sample s = ok_at(win[r][0] + t, (r ? 50000 : 10000) +
			    (int64_t)t / 1000, 5000);
			loadstats_record(&st, &s, NULL, 0);
			/* the cool-down keeps the load on past the window: its
			 * tokens are in no slice */
			if (i < 10) {
				s = ok_at(win[r][1] + t, 10000, 5000);
				s.cooldown = 1;
				loadstats_record(&st, &s, NULL, 0);
			}
		}
	memset(&in, 0, sizeof(in));
	in.st = &st;
	in.pcts = &p;
	in.window_start_us = win[0][0];
	in.window_end_us = win[1][1];
	in.windows = win;
	in.nwindows = 2;
	in.slice_us = 4000000;
	assert_int_equal(load_summary(&in, &sum), 0);
	/* 0-4, 4-8, 8-10 and 20-24, 24-28, 28-30: nothing in the gap */
	assert_int_equal(sum.nslices, 6);
	for (size_t k = 0; k < 6; k++) {
		const struct load_slice *x = &sum.slices[k];
		assert_int_equal(x->run, k / 3);
		near(x->start_s, (k / 3) * 20.0 + (double)(k % 3) * 4, 1e-9);
		near(x->end_s, (k / 3) * 20.0 + (k % 3 == 2 ? 10 : (double)(k % 3) * 4 + 4), 1e-9);
		assert_int_equal(x->requests, k % 3 == 2 ? 20 : 40);
		assert_true(x->ttft_p50 >= (k / 3 ? 50.0 : 10.0) &&
		    x->ttft_p50 < (k / 3 ? 60.0 : 20.0));
		/* 10 tokens every 100 ms, the last (short) slice too */
		near(x->output_tokens_per_s, 100, 1.5);
	}
	near(sum.drift.slope, 60.0, 1e-6);
	near(sum.drift.r2, 1.0, 1e-9);
	load_summary_free(&sum);
	loadstats_free(&st);
}

/* Chunks, the generator, and figures by name. */
static void test_chunks_and_names(void **state)
{
	struct loadstats st;
	struct load_pcts p;
	struct load_summary sum;
	struct load_sum_in in;
	struct load_sample s = ok_at(0, 1000, 2000);
	double v;

	(void)state;
	load_pcts_default(&p);
	loadstats_init(&st);
	s.output_tokens = 40;
	s.token_chunks = 5;
	s.first_chunk_tokens = 8;
	s.lag_us = 3000;
	loadstats_record(&st, &s, NULL, 0);
	memset(&in, 0, sizeof(in));
	in.st = &st;
	in.pcts = &p;
	in.window_end_us = 1000000;
	in.cpu_s = 0.95;
	in.wall_s = 1.0;
	in.queued = 2;
	assert_int_equal(load_summary(&in, &sum), 0);
	near(sum.tokens_per_chunk.mean, 8, 0);
	near(sum.first_chunk_tokens.mean, 8, 0);
	assert_true(sum.gen.cpu_bound && sum.gen.lag_bound && sum.gen.conn_bound);
	assert_int_equal(load_summary_value(&sum, &p, "ttft_p95", &v), 0);
	near(v, 1.0, 1e-12);
	assert_int_equal(load_summary_value(&sum, &p, "tpot_max", &v), 0);
	near(v, 2.0, 1e-12);
	assert_int_equal(load_summary_value(&sum, &p, "error_rate", &v), 0);
	assert_int_equal(load_summary_value(&sum, &p, "ttft_p97", &v), -1);
	assert_int_equal(load_summary_value(&sum, &p, "nope_p50", &v), -1);
	load_summary_free(&sum);
	loadstats_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_percentiles),
		cmocka_unit_test(test_pcts_parse),
		cmocka_unit_test(test_window_and_counts),
		cmocka_unit_test(test_request_shares_and_windows),
		cmocka_unit_test(test_goodput),
		cmocka_unit_test(test_slices_drift_fit),
		cmocka_unit_test(test_slices_drift_per_run),
		cmocka_unit_test(test_chunks_and_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
