/* SPDX-License-Identifier: Apache-2.0 */
#include "load_slo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_summary.h"
#include "util.h"


static const char *const metric_names[] = {
	[LOAD_SLO_TTFT] = "ttft", [LOAD_SLO_TTFO] = "ttfo", [LOAD_SLO_TPOT] = "tpot",
	[LOAD_SLO_ITL] = "itl", [LOAD_SLO_E2E] = "e2e",
};

static int bad(char *errbuf, size_t errlen, const char *tgt, size_t tlen,
    const char *why)
{
	snprintf(errbuf, errlen, "'%.*s': %s", (int)(tlen > 64 ? 64 : tlen), tgt, why);
	return -1;
}

/* "ttft_p95", "tpot_mean", "error_rate" into t. */
static int name_of(const char *s, size_t n, struct load_slo_target *t)
{
	if (n >= sizeof(t->name))
		return -1;
	memcpy(t->name, s, n);
	t->name[n] = '\0';
	if (strcmp(t->name, "error_rate") == 0) {
		t->metric = LOAD_SLO_ERROR_RATE;
		t->stat = LOAD_SLO_RATE;
		return 0;
	}
	for (int m = LOAD_SLO_TTFT; m <= LOAD_SLO_E2E; m++) {
		size_t k = strlen(metric_names[m]);
		const char *st = t->name + k + 1;
		char *end;

		if (strncmp(t->name, metric_names[m], k) != 0 || t->name[k] != '_')
			continue;
		t->metric = (enum load_slo_metric)m;
		if (strcmp(st, "mean") == 0) {
			t->stat = LOAD_SLO_MEAN;
			return 0;
		}
		if (strcmp(st, "max") == 0) {
			t->stat = LOAD_SLO_MAX_STAT;
			return 0;
		}
		if (st[0] != 'p' || st[1] < '0' || st[1] > '9')
			return -1;
		errno = 0;
		t->pct = strtod(st + 1, &end);
		if (*end != '\0' || errno != 0 || !(t->pct > 0 && t->pct <= 100))
			return -2;
		t->stat = LOAD_SLO_PCT;
		return 0;
	}
	return -1;
}

/* A fraction: "0.01" or "1%". */
static int fraction(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (end == s || errno != 0 || !isfinite(*out))
		return -1;
	if (*end == '%') {
		*out /= 100;
		end++;
	}
	return *end == '\0' ? 0 : -1;
}

static int one(struct load_slo *slo, const char *s, size_t n, char *errbuf,
    size_t errlen)
{
	struct load_slo_target t;
	const char *op = NULL;
	char lim[64];
	uint64_t us;
	int rc;

	for (size_t i = 0; i + 1 < n; i++)
		if (s[i] == '<' && s[i + 1] == '=') {
			op = s + i;
			break;
		}
	if (op == NULL)
		return bad(errbuf, errlen, s, n, "expected METRIC_STAT<=LIMIT (ttft_p95<=1s, "
		    "tpot_mean<=40ms, error_rate<=1%)");
	memset(&t, 0, sizeof(t));
	rc = name_of(s, (size_t)(op - s), &t);
	if (rc == -2)
		return bad(errbuf, errlen, s, n, "a percentile above 0 and at most 100");
	if (rc < 0)
		return bad(errbuf, errlen, s, n, "unknown target (ttft, ttfo, tpot, itl or e2e "
		    "with _pNN, _mean or _max; error_rate)");
	n -= (size_t)(op + 2 - s);
	if (n == 0 || n >= sizeof(lim))
		return bad(errbuf, errlen, s, (size_t)(op - s) + 2 + n, "a limit after <=");
	memcpy(lim, op + 2, n);
	lim[n] = '\0';
	if (t.stat == LOAD_SLO_RATE) {
		if (fraction(lim, &t.limit) < 0 || t.limit < 0 || t.limit >= 1)
			return bad(errbuf, errlen, s, (size_t)(op - s) + 2 + n, "an error rate "
			    "from 0 to below 100 % (1% or 0.01): at 100 % every level meets it");
	} else {
		/* a bare number would be seconds: too easy to misread here */
		if ((lim[n - 1] >= '0' && lim[n - 1] <= '9') ||
		    util_parse_duration_us(lim, &us) < 0)
			return bad(errbuf, errlen, s, (size_t)(op - s) + 2 + n, "a duration with "
			    "its unit (500ms, 1s)");
		if (us == 0)
			return bad(errbuf, errlen, s, (size_t)(op - s) + 2 + n, "no request can "
			    "take 0: a limit above 0");
		t.limit = (double)us / 1e3;
	}
	for (size_t i = 0; i < slo->n; i++)
		if (strcmp(slo->v[i].name, t.name) == 0)
			return bad(errbuf, errlen, s, (size_t)(op - s), "given twice");
	if (slo->n == LOAD_SLO_MAX)
		return bad(errbuf, errlen, s, (size_t)(op - s) + 2 + n, "too many targets "
		    "(at most 16)");
	slo->v[slo->n++] = t;
	return 0;
}

int load_slo_parse(struct load_slo *slo, const char *s, char *errbuf, size_t errlen)
{
	const char *p = s;

	memset(slo, 0, sizeof(*slo));
	slo->confidence = 0.95;
	for (;;) {
		size_t n;
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		n = strcspn(p, " ,\t");
		if (one(slo, p, n, errbuf, errlen) < 0)
			return -1;
		p += n;
	}
	if (slo->n == 0) {
		snprintf(errbuf, errlen, "no targets (e.g. 'ttft_p95<=1s tpot_p95<=50ms "
		    "error_rate<=1%%')");
		return -1;
	}
	return 0;
}

const char *load_slo_unit(const struct load_slo_target *t)
{
	return t->metric == LOAD_SLO_ERROR_RATE ? "fraction" : "ms";
}

void load_slo_goodput(const struct load_slo *slo, struct goodput_targets *g)
{
	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < slo->n; i++) {
		const struct load_slo_target *t = &slo->v[i];
		int k = t->metric == LOAD_SLO_TTFT ? GOODPUT_TTFT :
		    t->metric == LOAD_SLO_TPOT ? GOODPUT_TPOT :
		    t->metric == LOAD_SLO_TTFO ? GOODPUT_TTFO : -1;
		uint64_t us = (uint64_t)llround(t->limit * 1e3);
		if (k >= 0 && us > g->us[k])
			g->us[k] = us;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The percentile of v[0..n) without disturbing it. */
static double load_quantile_unsorted(const double *v, size_t n, double pct)
{
	double *c = malloc(n * sizeof(*c)), q;

	if (c == NULL)
		return NAN;
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_double);
	q = load_quantile(c, n, pct);
	free(c);
	return q;
}

/* The metric's values (ms) over the measured ok samples; t[] (may be
 * NULL) each one's intended send time (µs), or -1 for a gap. */
static size_t values(const struct loadstats *st, enum load_slo_metric m, double *v,
    double *t)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		double x = -1;

		if (!loadstats_counted(s) || s->outcome != OUTCOME_OK)
			continue;
		if (m == LOAD_SLO_ITL) {
			for (uint32_t k = 0; k < s->itl_n; k++) {
				if (t != NULL)
					t[n] = -1;
				v[n++] = (double)st->itl[s->itl_off + k] / 1e3;
			}
			continue;
		}
		switch (m) {
		case LOAD_SLO_TTFT:
			x = s->ttft_us < 0 ? -1 : (double)s->ttft_us / 1e3;
			break;
		case LOAD_SLO_TTFO:
			x = s->ttfo_us < 0 ? -1 : (double)s->ttfo_us / 1e3;
			break;
		case LOAD_SLO_TPOT:
			x = s->tpot_us < 0 ? -1 : s->tpot_us / 1e3;
			break;
		default:
			x = s->duration_us < 0 ? -1 : (double)s->duration_us / 1e3;
			break;
		}
		if (x >= 0) {
			if (t != NULL)
				t[n] = (double)s->start_us;
			v[n++] = x;
		}
	}
	return n;
}

struct timed {
	double t, v;
};

static int cmp_timed(const void *a, const void *b)
{
	double x = ((const struct timed *)a)->t, y = ((const struct timed *)b)->t;

	return x < y ? -1 : x > y;
}

/* How much the requests' dependence widens a percentile's interval: the
 * variance of the share of values at most q in batches of consecutive
 * requests (by intended send time), over the binomial's. A queue's
 * requests come in runs (a burst delays the ones after it), so a count
 * of n of them holds n / inflation independent ones. 1 when they are
 * independent, or too few to tell. */
static double inflation(const double *v, const double *t, size_t n, double q)
{
	struct timed *x;
	size_t m, nb;
	double p = 0, ss = 0, f;

	if (n < 100 || t == NULL || t[0] < 0)
		return 1;
	x = malloc(n * sizeof(*x));
	if (x == NULL)
		return 1;
	for (size_t i = 0; i < n; i++) {
		x[i].t = t[i];
		x[i].v = v[i];
		p += v[i] <= q;
	}
	p /= (double)n;
	qsort(x, n, sizeof(*x), cmp_timed);
	if (x[n - 1].t == x[0].t) {          /* no timeline to tell by */
		free(x);
		return 1;
	}
	m = (size_t)sqrt((double)n);
	nb = n / m;
	for (size_t b = 0; b < nb; b++) {
		double k = 0;
		for (size_t i = b * m; i < (b + 1) * m; i++)
			k += x[i].v <= q;
		ss += (k / (double)m - p) * (k / (double)m - p);
	}
	free(x);
	if (nb < 2 || !(p > 0 && p < 1))
		return 1;
	f = (double)m * ss / (double)(nb - 1) / (p * (1 - p));
	return f > 1 ? f : 1;
}

/* The standard normal's quantile, by Acklam's rational approximation
 * (relative error below 1.2e-9): z of a two-sided interval. */
static double normal_quantile(double p)
{
	static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
		-2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01,
		2.506628277459239e+00};
	static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
		-1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01};
	static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
		-2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00,
		2.938163982698783e+00};
	static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
		2.445134137142996e+00, 3.754408661907416e+00};
	double q, r;

	if (p < 0.02425) {
		q = sqrt(-2 * log(p));
		return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	}
	if (p > 1 - 0.02425)
		return -normal_quantile(1 - p);
	q = p - 0.5;
	r = q * q;
	return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
	    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

void load_slo_ranks(size_t n, double pct, double conf, size_t *l, size_t *u)
{
	double p = pct / 100, tail = (1 - conf) / 2, sd, f = 0, pmf, k0;
	size_t k;

	*l = 0;
	*u = n + 1;
	if (n == 0 || !(p > 0 && p < 1))
		return;
	/* F below 12 standard deviations under the mean is under 1e-30 */
	sd = sqrt((double)n * p * (1 - p));
	k0 = floor((double)n * p - 12 * sd - 1);
	k = k0 > 0 ? (size_t)k0 : 0;
	pmf = exp(lgamma((double)n + 1) - lgamma((double)k + 1) -
	    lgamma((double)(n - k) + 1) + (double)k * log(p) +
	    (double)(n - k) * log1p(-p));
	for (; k <= n; k++) {
		f += pmf;                        /* F(k) = P(B <= k) */
		if (f <= tail)
			*l = k + 1;
		if (f >= 1 - tail) {
			*u = k + 1;
			return;
		}
		pmf *= (double)(n - k) / (double)(k + 1) * p / (1 - p);
	}
}

size_t load_slo_min_n(double pct, double conf)
{
	double p = pct / 100;

	if (!(p > 0 && p < 1))
		return 1;
	/* the top rank n bounds it when P(B <= n - 1) = 1 - p^n >= 1 - tail */
	return (size_t)ceil(log((1 - conf) / 2) / log(p) - 1e-9);
}

static void eval_error_rate(const struct loadstats *st, double conf,
    struct load_slo_eval *e)
{
	double n = 0, k = 0, p, d, c, h, z = normal_quantile(1 - (1 - conf) / 2);

	for (size_t i = 0; i < st->n; i++) {
		if (!loadstats_counted(&st->v[i]))
			continue;
		n++;
		k += st->v[i].outcome != OUTCOME_OK;
	}
	e->n = (size_t)n;
	if (n == 0) {
		e->value = e->lo = e->hi = NAN;
		return;
	}
	p = k / n;
	d = 1 + z * z / n;
	c = (p + z * z / (2 * n)) / d;
	h = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d;
	e->value = p;
	e->lo = fmax(0, c - h);
	e->hi = fmin(1, c + h);
}

/* The value and interval of a statistic of sorted v[0..n). */
static void eval_values(const struct load_slo_target *t, double conf, const double *v,
    size_t n, double infl, struct load_slo_eval *e)
{
	double sum = 0, ss = 0, mean, half, z = normal_quantile(1 - (1 - conf) / 2);
	size_t lo, hi, ne;

	e->n = n;
	if (n == 0) {
		e->value = e->lo = e->hi = NAN;
		return;
	}
	switch (t->stat) {
	case LOAD_SLO_MAX_STAT:
		e->value = e->lo = e->hi = v[n - 1];
		return;
	case LOAD_SLO_MEAN:
		for (size_t i = 0; i < n; i++)
			sum += v[i];
		mean = sum / (double)n;
		for (size_t i = 0; i < n; i++)
			ss += (v[i] - mean) * (v[i] - mean);
		half = n > 1 ? z * sqrt(ss / (double)(n - 1)) / sqrt((double)n) : 0;
		e->value = mean;
		e->lo = mean - half;
		e->hi = mean + half;
		return;
	default:
		break;
	}
	e->value = load_quantile(v, n, t->pct);
	if (t->pct >= 100) {                     /* the max */
		e->lo = e->hi = e->value;
		return;
	}
	/* ranks from 1, indices from 0; never clamped to the sample. The
	 * binomial's of the n / infl independent requests the n hold, each
	 * rank scaled back to the n outward */
	ne = (size_t)floor((double)n / infl);
	load_slo_ranks(ne, t->pct, conf, &lo, &hi);
	if (ne < n) {
		lo = (size_t)floor((double)lo * (double)n / (double)ne);
		hi = hi > ne ? n + 1 : (size_t)ceil((double)hi * (double)n / (double)ne);
		if (hi > n)
			hi = n + 1;
	}
	e->lo = lo >= 1 ? fmin(v[lo - 1], e->value) : -INFINITY;
	e->hi = hi <= n ? fmax(v[hi - 1], e->value) : INFINITY;
}

int load_slo_eval(const struct load_slo *slo, const struct loadstats *st,
    struct load_slo_result *out)
{
	double *v = NULL, *tm = NULL, worst = -INFINITY;
	size_t cap = st->nitl > st->n ? st->nitl : st->n;

	double conf = slo->confidence > 0 && slo->confidence < 1 ? slo->confidence : 0.95;
	int missed = 0, all_met = 1;

	memset(out, 0, sizeof(*out));
	out->met = 1;
	out->binding = -1;
	v = malloc((cap + 1) * sizeof(*v));
	tm = malloc((cap + 1) * sizeof(*tm));
	if (v == NULL || tm == NULL) {
		free(v);
		free(tm);
		return -1;
	}
	for (size_t i = 0; i < slo->n; i++) {
		const struct load_slo_target *t = &slo->v[i];
		struct load_slo_eval *e = &out->v[i];
		double ratio;

		if (t->metric == LOAD_SLO_ERROR_RATE) {
			eval_error_rate(st, conf, e);
		} else {
			size_t n = values(st, t->metric, v, tm);
			double infl = 1;
			if (t->stat == LOAD_SLO_PCT && t->pct < 100 && n > 0)
				infl = inflation(v, tm, n, load_quantile_unsorted(v, n, t->pct));
			qsort(v, n, sizeof(*v), cmp_double);
			eval_values(t, conf, v, n, infl, e);
			e->inflation = infl;
		}
		e->met = !isnan(e->value) && e->value <= t->limit;
		/* no sample decides nothing; an error rate's limit of 0 can
		 * never be shown met by an interval: its value decides */
		e->decided = !isnan(e->value) && (e->hi <= t->limit || e->lo > t->limit ||
		    (t->metric == LOAD_SLO_ERROR_RATE && t->limit <= 0));
		e->noisy = !e->decided;
		out->met &= e->met;
		missed |= e->decided && !e->met;
		all_met &= e->decided && e->met;
		/* the error rate's limit may be 0: compare it on its own scale */
		ratio = isnan(e->value) ? INFINITY : t->limit > 0 ? e->value / t->limit :
		    (e->value > 0 ? INFINITY : 0);
		if (ratio > worst) {
			worst = ratio;
			out->binding = (int)i;
		}
	}
	out->decided = missed || all_met;
	out->noisy = !out->decided;
	free(v);
	free(tm);
	return 0;
}
