/* SPDX-License-Identifier: Apache-2.0 */
#include "load_arrive.h"

#include <math.h>

#include "rng.h"

/* A standard normal variate (Box-Muller; one of the pair is enough). */
static double normal(uint64_t *rng)
{
	return sqrt(-2 * log(rng_unit_open(rng))) * cos(2 * M_PI * rng_unit_open(rng));
}

double load_arrive_gamma(double k, uint64_t *rng)
{
	double d, c;

	/* below 1: G(k) = G(k + 1) U^(1/k) */
	if (k < 1)
		return load_arrive_gamma(k + 1, rng) * pow(rng_unit_open(rng), 1 / k);
	d = k - 1.0 / 3;
	c = 1 / sqrt(9 * d);
	for (;;) {
		double x, v, u;
		do {
			x = normal(rng);
			v = 1 + c * x;
		} while (v <= 0);
		v = v * v * v;
		u = rng_unit_open(rng);
		if (u < 1 - 0.0331 * x * x * x * x ||
		    log(u) < 0.5 * x * x + d * (1 - v + log(v)))
			return d * v;
	}
}

double load_arrive_gap(const struct load_conf *c, uint64_t *rng)
{
	double mean = 1e6 / c->rate;

	switch (c->arrivals) {
	case LOAD_ARR_CONSTANT:
		return mean;
	case LOAD_ARR_GAMMA:
		return load_arrive_gamma(c->burstiness, rng) * mean / c->burstiness;
	default:
		return -log(rng_unit_open(rng)) * mean;
	}
}
