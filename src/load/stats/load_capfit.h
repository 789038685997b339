/* SPDX-License-Identifier: Apache-2.0 */
/* A capacity's estimate and its confidence interval from independent
 * replications: each run of each level near the capacity is a point
 * (x the level's load, y = log(figure / limit) of the binding target
 * over that run alone); a least-squares line through them crosses y = 0
 * at the estimate, and the interval is the inverse regression's
 * (Fieller's): every x whose line value is within t (n - 2 degrees of
 * freedom) standard errors of 0. The spread between runs, not a model of
 * it, sets the width: a queue's requests are not independent of each
 * other, its runs are. Pure. */
#ifndef TOKENTAP_LOAD_CAPFIT_H
#define TOKENTAP_LOAD_CAPFIT_H

#include <stddef.h>

/* Student's t quantile: P(T <= t) = p with df degrees of freedom. */
double load_t_quantile(double p, double df);

/* Fits x[0..n), y[0..n). Returns 0 with *est and [*lo, *hi] (an end NaN:
 * unbounded, the slope not significant enough), or -1: fewer than 3
 * points, fewer than 2 loads, or a line that does not rise. */
int load_capfit(const double *x, const double *y, size_t n, double conf,
    double *est, double *lo, double *hi);

#endif
