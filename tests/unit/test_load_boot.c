/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_boot.c against values known in closed form: a
 * resample's statistic from its counts equals the statistic of the
 * resample written out and sorted; the bootstrap distribution of the
 * median of 1..n is the binomial one (P(median* <= x_(j)) = P(Bin(n, j/n)
 * >= (n+1)/2), the exact bootstrap of an order statistic); the bootstrap
 * standard error of a mean is the population's sd / sqrt(n); a 20 %
 * shift is found and its interval holds it, an A/A comparison is not
 * significant, and the same seed gives the same interval. */
#include <math.h>

#include "load_boot.h"
#include "load_summary.h"
#include "rng.h"

#include "unit.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void near(double got, double want, double tol)
{
	if (!(fabs(got - want) <= tol))
		fail_msg("got %.9f, want %.9f (within %g)", got, want, tol);
}

/* The statistic from counts is the statistic of the expanded resample. */
static void stat_of_counts(void **state)
{
	static const double pcts[] = {0.5, 10, 25, 50, 90, 95, 99, 100};
	uint64_t seed = 7;

	(void)state;
	for (size_t n = 1; n < 60; n += 7) {
		double v[64], e[64 * 4];
		uint32_t c[64], ones[64];
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			v[i] = floor(rng_unit(&seed) * 1000) / 8;
			ones[i] = 1;
		}
		qsort(v, n, sizeof(double), cmp);
		for (size_t i = 0; i < n; i++) {
			c[i] = (uint32_t)(rng_next(&seed) % 4);
			for (uint32_t k = 0; k < c[i]; k++)
				e[m++] = v[i];
		}
		if (m == 0) {
			c[0] = 1;
			e[m++] = v[0];
		}
		for (size_t p = 0; p < sizeof pcts / sizeof pcts[0]; p++) {
			struct load_stat st = {0, pcts[p]};
			/* every count 1: the sample itself, by load_quantile's rule */
			near(load_boot_stat(v, ones, n, n, &st), load_quantile(v, n, pcts[p]), 1e-12);
			near(load_boot_stat(v, c, n, m, &st), load_quantile(e, m, pcts[p]), 1e-12);
		}
		{
			struct load_stat mean = {1, 0};
			double sum = 0;
			for (size_t i = 0; i < m; i++)
				sum += e[i];
			near(load_boot_stat(v, c, n, m, &mean), sum / (double)m, 1e-9);
		}
	}
}

/* P(X >= k) for X ~ Bin(n, p). */
static double binom_tail(int n, double p, int k)
{
	double s = 0;

	if (p >= 1)
		return 1;
	for (int i = k; i <= n; i++)
		s += exp(lgamma(n + 1) - lgamma(i + 1) - lgamma(n - i + 1) +
		    i * log(p) + (n - i) * log1p(-p));
	return s;
}

static void median_is_binomial(void **state)
{
	enum { N = 21, REPS = 40000 };
	double v[N], *out = malloc(REPS * sizeof(double));
	struct load_stat med = {0, 50};
	uint64_t seed = 12345;

	(void)state;
	assert_non_null(out);
	for (int i = 0; i < N; i++)
		v[i] = i + 1;
	assert_int_equal(load_boot_stats(v, N, &med, 1, REPS, &seed, out), 0);
	for (int j = 1; j <= N; j++) {
		size_t at_or_below = 0;
		for (size_t b = 0; b < REPS; b++)
			at_or_below += out[b] <= j;
		/* 4 standard errors of a share of 40000 draws: 0.01 */
		near((double)at_or_below / REPS, binom_tail(N, (double)j / N, (N + 1) / 2), 0.01);
	}
	free(out);
}

static void mean_standard_error(void **state)
{
	enum { N = 100, REPS = 20000 };
	double v[N], *out = malloc(REPS * sizeof(double)), s = 0, ss = 0;
	struct load_stat mean = {1, 0};
	uint64_t seed = 99;

	(void)state;
	assert_non_null(out);
	for (int i = 0; i < N; i++)
		v[i] = i + 1;
	assert_int_equal(load_boot_stats(v, N, &mean, 1, REPS, &seed, out), 0);
	for (size_t b = 0; b < REPS; b++) {
		s += out[b];
		ss += out[b] * out[b];
	}
	s /= REPS;
	/* 1..100: population sd sqrt((N^2 - 1) / 12) = 28.866, over sqrt(100) */
	near(s, 50.5, 0.1);
	near(sqrt(ss / REPS - s * s), sqrt((N * N - 1) / 12.0) / 10, 0.05);
	free(out);
}

/* Lognormal-ish latencies: a skewed sample of n, scaled by k. */
static void latencies(double *v, size_t n, double k, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		v[i] = k * 20 * exp(0.1 * sqrt(-2 * log(rng_unit_open(&seed))) *
		    cos(2 * M_PI * rng_unit(&seed)));
	qsort(v, n, sizeof(double), cmp);
}

static void shift_found_aa_not(void **state)
{
	enum { N = 400 };
	static const struct load_stat st[] = {{0, 50}, {0, 95}, {1, 0}};
	double a[N], a2[N], b[N];
	struct load_boot_ci ci[3], again[3];

	(void)state;
	latencies(a, N, 1.0, 1);
	latencies(a2, N, 1.0, 2);
	for (size_t i = 0; i < N; i++)
		b[i] = a2[i] * 1.2;
	assert_int_equal(load_boot_change(a, N, b, N, st, 3, 1, 2000, 0.05, 1, ci), 0);
	for (int k = 0; k < 3; k++) {
		assert_true(ci[k].significant);
		assert_true(ci[k].lo > 0.1 && ci[k].lo <= ci[k].change);
		assert_true(ci[k].hi >= ci[k].change && ci[k].hi < 0.3);
		assert_true(ci[k].lo <= 0.2 && 0.2 <= ci[k].hi);
	}
	/* the point estimate is the samples' own statistics */
	near(ci[0].a, load_quantile(a, N, 50), 1e-12);
	near(ci[0].b, load_quantile(b, N, 50), 1e-12);
	near(ci[0].change, ci[0].b / ci[0].a - 1, 1e-12);
	/* A/A: two draws of the same distribution */
	assert_int_equal(load_boot_change(a, N, a2, N, st, 3, 1, 2000, 0.05, 1, ci), 0);
	for (int k = 0; k < 3; k++) {
		assert_false(ci[k].significant);
		assert_true(ci[k].lo < 0 && ci[k].hi > 0);
	}
	/* the same seed, the same interval */
	assert_int_equal(load_boot_change(a, N, a2, N, st, 3, 1, 2000, 0.05, 1, again), 0);
	for (int k = 0; k < 3; k++) {
		near(again[k].lo, ci[k].lo, 0);
		near(again[k].hi, ci[k].hi, 0);
	}
}

/* For a difference of means the percentile interval approaches the
 * normal one: d +- 1.96 sqrt(var_a / n_a + var_b / n_b). */
static void mean_difference_is_normal(void **state)
{
	enum { N = 2000 };
	static const struct load_stat mean = {1, 0};
	double a[N], b[N], ma = 0, mb = 0, va = 0, vb = 0, half;
	struct load_boot_ci ci;

	(void)state;
	latencies(a, N, 1.0, 3);
	latencies(b, N, 1.05, 4);
	for (size_t i = 0; i < N; i++) {
		ma += a[i] / N;
		mb += b[i] / N;
	}
	for (size_t i = 0; i < N; i++) {
		va += (a[i] - ma) * (a[i] - ma) / N;
		vb += (b[i] - mb) * (b[i] - mb) / N;
	}
	half = 1.959964 * sqrt(va / N + vb / N);
	assert_int_equal(load_boot_change(a, N, b, N, &mean, 1, 0, 4000, 0.05, 5, &ci), 0);
	near(ci.change, mb - ma, 1e-9);
	near(ci.lo, mb - ma - half, 0.1 * half);
	near(ci.hi, mb - ma + half, 0.1 * half);
}

static void too_few_samples(void **state)
{
	static const struct load_stat med = {0, 50};
	double a[] = {10}, b[] = {12, 13};
	struct load_boot_ci ci;

	(void)state;
	assert_int_equal(load_boot_change(a, 1, b, 2, &med, 1, 1, 1000, 0.05, 1, &ci), 0);
	near(ci.change, 12.5 / 10 - 1, 1e-12);
	assert_true(isnan(ci.lo) && isnan(ci.hi));
	assert_false(ci.significant);
	/* a zero in A: no relative change; the absolute one stands */
	{
		double z[] = {0, 0, 0}, o[] = {0, 1, 0};
		struct load_stat mean = {1, 0};
		assert_int_equal(load_boot_change(z, 3, o, 3, &mean, 1, 1, 1000, 0.05, 1, &ci), 0);
		assert_true(isnan(ci.change));
		assert_int_equal(load_boot_change(z, 3, o, 3, &mean, 1, 0, 1000, 0.05, 1, &ci), 0);
		near(ci.change, 1.0 / 3, 1e-12);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stat_of_counts),
		cmocka_unit_test(median_is_binomial),
		cmocka_unit_test(mean_standard_error),
		cmocka_unit_test(shift_found_aa_not),
		cmocka_unit_test(mean_difference_is_normal),
		cmocka_unit_test(too_few_samples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
