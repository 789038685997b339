/* SPDX-License-Identifier: Apache-2.0 */
/* Capacity headroom from the TTFT-vs-concurrency line the statistics
 * keep (least squares over each window's requests: TTFT in ms against the
 * streams active when each began). Pure. */
#ifndef TOKENTAP_HEADROOM_H
#define TOKENTAP_HEADROOM_H

/* R² at or above this before the line is trusted for headroom. */
#define HEADROOM_MIN_R2 0.5

struct headroom_fit {
	int ok;                 /* 0: under 3 points, or no spread in x or y */
	double slope;           /* ms of TTFT per concurrent stream */
	double intercept;       /* ms at no other stream */
	double r2;
};

/* The line of y on x from the running sums (n, Σx, Σy, Σxy, Σx², Σy²). */
void headroom_fit(double n, double sx, double sy, double sxy, double sxx, double syy,
    struct headroom_fit *out);
/* The concurrency at which the fitted TTFT reaches target_ms (0 when it
 * already does at none); -1 when the line is not trusted (R² under
 * HEADROOM_MIN_R2, slope not positive) or there is no target. */
double headroom_streams(const struct headroom_fit *f, double target_ms);

#endif
