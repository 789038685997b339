/* SPDX-License-Identifier: Apache-2.0 */
#include "load_boot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load_summary.h"
#include "rng.h"

/* The value at 0-based position k of the resample, sorted. */
static double nth(const double *v, const uint32_t *c, size_t n, size_t k)
{
	size_t cum = 0;

	for (size_t i = 0; i < n; i++) {
		cum += c[i];
		if (cum > k)
			return v[i];
	}
	return n ? v[n - 1] : NAN;
}

double load_boot_stat(const double *v, const uint32_t *c, size_t n, size_t m,
    const struct load_stat *s)
{
	double rank, frac, lo;
	size_t k;

	if (m == 0)
		return NAN;
	if (s->mean) {
		double sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += (double)c[i] * v[i];
		return sum / (double)m;
	}
	rank = s->pct / 100.0 * (double)(m - 1);
	k = (size_t)rank;
	lo = nth(v, c, n, k);
	if (k >= m - 1)
		return lo;
	frac = rank - (double)k;
	return frac > 0 ? lo + (nth(v, c, n, k + 1) - lo) * frac : lo;
}

int load_boot_stats(const double *v, size_t n, const struct load_stat *st, size_t nst,
    size_t reps, uint64_t *seed, double *out)
{
	uint32_t *c;

	if (n == 0 || (c = malloc(n * sizeof(*c))) == NULL)
		return -1;
	for (size_t b = 0; b < reps; b++) {
		memset(c, 0, n * sizeof(*c));
		/* n draws with replacement, as counts; the multiply keeps the
		 * draw unbiased where a modulo would not */
		for (size_t i = 0; i < n; i++)
			c[(size_t)(((unsigned __int128)rng_next(seed) * n) >> 64)]++;
		for (size_t k = 0; k < nst; k++)
			out[k * reps + b] = load_boot_stat(v, c, n, n, &st[k]);
	}
	free(c);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double stat_of(const double *v, size_t n, const struct load_stat *s)
{
	double sum = 0;

	if (n == 0)
		return NAN;
	if (!s->mean)
		return load_quantile(v, n, s->pct);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	return sum / (double)n;
}

static double change(double a, double b, int relative)
{
	if (!relative)
		return b - a;
	return a != 0 ? b / a - 1 : (b == 0 ? 0 : NAN);
}

int load_boot_change(const double *a, size_t na, const double *b, size_t nb,
    const struct load_stat *st, size_t nst, int relative, size_t reps, double alpha,
    uint64_t seed, struct load_boot_ci *out)
{
	double *ra = NULL, *rb = NULL, *d = NULL;
	int rc = 0;

	for (size_t k = 0; k < nst; k++) {
		out[k].a = stat_of(a, na, &st[k]);
		out[k].b = stat_of(b, nb, &st[k]);
		out[k].change = change(out[k].a, out[k].b, relative);
		out[k].lo = out[k].hi = NAN;
		out[k].significant = 0;
	}
	if (na < 2 || nb < 2 || reps < 2)
		return 0;
	ra = malloc(nst * reps * sizeof(double));
	rb = malloc(nst * reps * sizeof(double));
	d = malloc(reps * sizeof(double));
	if (ra == NULL || rb == NULL || d == NULL ||
	    load_boot_stats(a, na, st, nst, reps, &seed, ra) < 0 ||
	    load_boot_stats(b, nb, st, nst, reps, &seed, rb) < 0) {
		rc = -1;
		goto done;
	}
	for (size_t k = 0; k < nst; k++) {
		size_t m = 0;
		for (size_t i = 0; i < reps; i++) {
			double x = change(ra[k * reps + i], rb[k * reps + i], relative);
			if (!isnan(x))
				d[m++] = x;
		}
		/* a change undefined in most resamples (a zero in A) has no interval */
		if (m < reps / 2 + 1)
			continue;
		qsort(d, m, sizeof(double), cmp_double);
		out[k].lo = load_quantile(d, m, 100 * alpha / 2);
		out[k].hi = load_quantile(d, m, 100 * (1 - alpha / 2));
		out[k].significant = out[k].lo > 0 || out[k].hi < 0;
	}
done:
	free(ra);
	free(rb);
	free(d);
	return rc;
}
