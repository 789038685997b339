/* SPDX-License-Identifier: Apache-2.0 */
/* The gaps between open-loop arrivals, in µs, at a mean of 1/rate:
 * Poisson (exponential gaps), constant, or gamma with shape k = the
 * burstiness factor and scale mean / k, as vLLM's and AIPerf's benchmarks
 * define it: k = 1 is Poisson, k < 1 burstier, k > 1 more regular; the
 * gaps' coefficient of variation is 1 / sqrt(k). Pure, from rng.h. */
#ifndef TOKENTAP_LOAD_ARRIVE_H
#define TOKENTAP_LOAD_ARRIVE_H

#include <stdint.h>

#include "load_conf.h"

/* The next gap (µs) for c's arrivals and rate. */
double load_arrive_gap(const struct load_conf *c, uint64_t *rng);
/* A gamma variate of shape k > 0 and scale 1 (Marsaglia and Tsang). */
double load_arrive_gamma(double k, uint64_t *rng);

#endif
