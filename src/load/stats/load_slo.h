/* SPDX-License-Identifier: Apache-2.0 */
/* Service-level targets of a sweep or a capacity search, as in
 *   --slo 'ttft_p95<=1s tpot_p95<=50ms error_rate<=1%'
 * each METRIC_STAT<=LIMIT: METRIC ttft, ttfo, tpot, itl, e2e with STAT a
 * percentile (p50, p99.9), mean or max and LIMIT a duration with its unit;
 * or error_rate<=FRACTION ("1%" or "0.01"). A level meets them when every
 * figure, computed exactly from its samples, is at most its limit.
 *
 * Each figure comes with a confidence interval at the SLO's confidence
 * (default 95 %): a percentile's distribution-free, from the order
 * statistics (the ranks l, u that the binomial law of the count below
 * the true percentile puts 1 - confidence outside of, half each side;
 * never clamped to the sample: with too few samples to bound it the
 * bound is infinite), a mean's normal, the error rate's Wilson; none for
 * a max. A target is *decided* when its interval lies on one side of its
 * limit; a level is decided when a decided target missed, or every one
 * was met decided. An undecided level runs on (a capacity search runs it
 * again, with a seed of its own, pooling the samples) before it counts.
 * Pure. */
#ifndef TOKENTAP_LOAD_SLO_H
#define TOKENTAP_LOAD_SLO_H

#include <stddef.h>

#include "goodput.h"
#include "loadstats.h"

#define LOAD_SLO_MAX 16

enum load_slo_metric { LOAD_SLO_TTFT, LOAD_SLO_TTFO, LOAD_SLO_TPOT, LOAD_SLO_ITL,
	LOAD_SLO_E2E, LOAD_SLO_ERROR_RATE };
enum load_slo_stat { LOAD_SLO_PCT, LOAD_SLO_MEAN, LOAD_SLO_MAX_STAT, LOAD_SLO_RATE };

struct load_slo_target {
	char name[24];               /* "ttft_p95", "error_rate" */
	enum load_slo_metric metric;
	enum load_slo_stat stat;
	double pct;                  /* LOAD_SLO_PCT: 0 < pct <= 100 */
	double limit;                /* ms, or a fraction for error_rate */
};

struct load_slo {
	struct load_slo_target v[LOAD_SLO_MAX];
	size_t n;
	double confidence;           /* of every interval: 0.95 (--confidence) */
};

/* One target at one level. */
struct load_slo_eval {
	double value;                /* NaN: no sample to tell */
	double lo, hi;               /* its interval (lo = hi = value for a max);
	                              * -/+INFINITY: too few samples to bound it */
	int met;                     /* value <= limit */
	int decided;                 /* hi <= limit (met) or lo > limit (missed) */
	int noisy;                   /* !decided: the limit lies inside [lo, hi] */
	size_t n;                    /* samples behind it */
	double inflation;            /* a percentile's: the requests' dependence
	                              * (batch means by send time): its interval is
	                              * the binomial's of n / inflation; else 1 */
};

struct load_slo_result {
	struct load_slo_eval v[LOAD_SLO_MAX];
	int met;                     /* all met (no value: not met) */
	int decided;                 /* a decided target missed, or all met decided */
	int noisy;                   /* !decided */
	int binding;                 /* the target nearest to, or furthest over,
	                              * its limit (value / limit largest); -1 */
};

/* Parses s; returns 0, or -1 with *err (static text or in errbuf) naming
 * the target. */
int load_slo_parse(struct load_slo *slo, const char *s, char *errbuf, size_t errlen);
/* "ms" or "fraction". */
const char *load_slo_unit(const struct load_slo_target *t);
/* The per-request targets that goodput judges by: for TTFT, TTFO and TPOT
 * the largest limit among the targets of that metric. */
void load_slo_goodput(const struct load_slo *slo, struct goodput_targets *g);
/* The distribution-free interval of the percentile pct of n samples at
 * confidence conf: the 1-based ranks *l and *u of the order statistics
 * that bound it (P(l <= B < u) >= conf, B ~ Bin(n, pct / 100) the samples
 * below it, half of the rest each side); *l = 0: no lower bound, *u =
 * n + 1: no upper bound (too few samples). */
void load_slo_ranks(size_t n, double pct, double conf, size_t *l, size_t *u);
/* The fewest samples whose interval for pct has an upper bound. */
size_t load_slo_min_n(double pct, double conf);
/* Evaluates every target over the measured samples of st. Returns 0 or
 * -1 (out of memory). */
int load_slo_eval(const struct load_slo *slo, const struct loadstats *st,
    struct load_slo_result *out);

#endif
