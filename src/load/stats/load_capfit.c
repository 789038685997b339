/* SPDX-License-Identifier: Apache-2.0 */
#include "load_capfit.h"

#include <math.h>

/* The continued fraction of the regularized incomplete beta (Lentz). */
static double betacf(double a, double b, double x)
{
	double c = 1, d = 1 - (a + b) * x / (a + 1), h;

	if (fabs(d) < 1e-300)
		d = 1e-300;
	d = 1 / d;
	h = d;
	for (int m = 1; m <= 300; m++) {
		double m2 = 2.0 * m, aa, del;

		aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
		d = 1 + aa * d;
		c = 1 + aa / c;
		d = fabs(d) < 1e-300 ? 1e300 : 1 / d;
		c = fabs(c) < 1e-300 ? 1e-300 : c;
		h *= d * c;
		aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
		d = 1 + aa * d;
		c = 1 + aa / c;
		d = fabs(d) < 1e-300 ? 1e300 : 1 / d;
		c = fabs(c) < 1e-300 ? 1e-300 : c;
		del = d * c;
		h *= del;
		if (fabs(del - 1) < 1e-15)
			break;
	}
	return h;
}

static double ibeta(double a, double b, double x)
{
	double bt;

	if (x <= 0)
		return 0;
	if (x >= 1)
		return 1;
	bt = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
	if (x < (a + 1) / (a + b + 2))
		return bt * betacf(a, b, x) / a;
	return 1 - bt * betacf(b, a, 1 - x) / b;
}

static double t_cdf(double t, double df)
{
	double tail = 0.5 * ibeta(df / 2, 0.5, df / (df + t * t));

	return t >= 0 ? 1 - tail : tail;
}

double load_t_quantile(double p, double df)
{
	double lo = 0, hi = 1e7;

	if (p == 0.5)
		return 0;
	if (p < 0.5)
		return -load_t_quantile(1 - p, df);
	for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
		double mid = (lo + hi) / 2;
		if (t_cdf(mid, df) < p)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

int load_capfit(const double *x, const double *y, size_t n, double conf,
    double *est, double *lo, double *hi)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0, ss = 0, b, a, s2, t, A, B, C, disc, r1, r2;

	*est = *lo = *hi = NAN;
	if (n < 3)
		return -1;
	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
	}
	mx /= (double)n;
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		sxy += (x[i] - mx) * (y[i] - my);
	}
	if (!(sxx > 0))
		return -1;
	b = sxy / sxx;
	a = my - b * mx;
	if (!(b > 0))
		return -1;
	for (size_t i = 0; i < n; i++) {
		double r = y[i] - a - b * x[i];
		ss += r * r;
	}
	s2 = ss / (double)(n - 2);
	t = load_t_quantile(1 - (1 - conf) / 2, (double)(n - 2));
	*est = mx - my / b;
	/* (my + b u)^2 <= t^2 s2 (1/n + u^2 / sxx), u = x0 - mx */
	A = b * b - t * t * s2 / sxx;
	B = 2 * my * b;
	C = my * my - t * t * s2 / (double)n;
	if (!(A > 0))
		return 0;                /* unbounded: the slope is within noise of 0 */
	disc = B * B - 4 * A * C;
	if (disc < 0)
		disc = 0;
	r1 = (-B - sqrt(disc)) / (2 * A);
	r2 = (-B + sqrt(disc)) / (2 * A);
	*lo = mx + r1;
	*hi = mx + r2;
	return 0;
}
