/* SPDX-License-Identifier: Apache-2.0 */
#include "headroom.h"

void headroom_fit(double n, double sx, double sy, double sxy, double sxx, double syy,
    struct headroom_fit *out)
{
	double cov = n * sxy - sx * sy;
	double vx = n * sxx - sx * sx;
	double vy = n * syy - sy * sy;

	out->ok = 0;
	out->slope = out->intercept = out->r2 = -1;
	if (n < 3 || vx <= 1e-12 || vy <= 1e-12)
		return;
	out->ok = 1;
	out->slope = cov / vx;
	out->intercept = (sy - out->slope * sx) / n;
	out->r2 = cov * cov / (vx * vy);
}

double headroom_streams(const struct headroom_fit *f, double target_ms)
{
	double c;

	if (!f->ok || f->r2 < HEADROOM_MIN_R2 || f->slope <= 0 || target_ms <= 0)
		return -1;
	c = (target_ms - f->intercept) / f->slope;
	return c > 0 ? c : 0;
}
