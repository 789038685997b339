/* SPDX-License-Identifier: Apache-2.0 */
#include "load_settle.h"

#include <math.h>

double load_settle_ca2(const struct load_conf *c)
{
	switch (c->arrivals) {
	case LOAD_ARR_CONSTANT:
		return 0;
	case LOAD_ARR_GAMMA:
		return c->burstiness > 0 ? 1 / c->burstiness : 1;
	default:
		return 1;
	}
}

double load_settle_s(double r, double mu, double ca2)
{
	if (isnan(mu) || !(r > 0))
		return NAN;
	if (r >= mu)
		return INFINITY;
	return LOAD_SETTLE_SCALES * ca2 * r / ((mu - r) * (mu - r));
}
