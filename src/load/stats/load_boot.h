/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap of a statistic's change between two sets of per-request
 * samples (tokentap-load compare): is B's TPOT p50 really 20 % above A's,
 * or is that noise? Each set is resampled with replacement, B times, the
 * statistic (a percentile by load_summary.h's rule, or the mean) taken of
 * every resample, and the change between them (B / A - 1, or B - A) read
 * at the alpha / 2 and 1 - alpha / 2 quantiles: Efron's percentile
 * interval. The change is significant when that interval excludes 0.
 *
 * Why a bootstrap: the question is about one statistic at a time (the
 * p95 a target names), and a latency distribution is skewed and often
 * multi-modal (queueing), so no normal approximation holds for a tail
 * percentile; the bootstrap assumes neither, and gives an interval in the
 * unit of the change itself.
 *
 * A resample of n sorted values is drawn as counts (how many times each
 * value was drawn), so a percentile of it is a walk along the counts,
 * never a sort: O(n) a resample. Deterministic from the seed. Pure. */
#ifndef TOKENTAP_LOAD_BOOT_H
#define TOKENTAP_LOAD_BOOT_H

#include <stddef.h>
#include <stdint.h>

/* A statistic: the mean, or a percentile (0 < pct <= 100). */
struct load_stat {
	int mean;
	double pct;
};

/* The statistic of the resample c[0..n) (counts summing to m > 0) of
 * sorted v[0..n): as if the resample were sorted and the statistic taken
 * of it (load_quantile's rule for a percentile). */
double load_boot_stat(const double *v, const uint32_t *c, size_t n, size_t m,
    const struct load_stat *s);

/* The statistics st[0..nst) of reps resamples of sorted v[0..n), into
 * out[k * reps + b] (statistic k, resample b). Returns 0, or -1 when n
 * is 0 or memory ran out. */
int load_boot_stats(const double *v, size_t n, const struct load_stat *st, size_t nst,
    size_t reps, uint64_t *seed, double *out);

struct load_boot_ci {
	double a, b;                 /* the statistic of each sample */
	double change;               /* b / a - 1 (relative), or b - a */
	double lo, hi;               /* its interval; NaN: too few samples */
	int significant;             /* the interval excludes 0 */
};

/* The change of each statistic st[k] from sorted a[0..na) to sorted
 * b[0..nb), with its (1 - alpha) interval from reps resamples of each
 * (both need 2 samples or more, else lo = hi = NaN). Returns 0 or -1
 * (out of memory). */
int load_boot_change(const double *a, size_t na, const double *b, size_t nb,
    const struct load_stat *st, size_t nst, int relative, size_t reps, double alpha,
    uint64_t seed, struct load_boot_ci *out);

#endif
