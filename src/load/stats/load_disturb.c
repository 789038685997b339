/* SPDX-License-Identifier: Apache-2.0 */
#include "load_disturb.h"

#include <math.h>
#include <stdlib.h>

#include "load_summary.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A figure timed from a request's due time: the generator's lateness is
 * in it whole. TPOT and ITL are differences of a request's own times
 * (a late send moves both ends), which a late read moves by a share. */
static int whole_request(enum load_slo_metric m)
{
	return m == LOAD_SLO_TTFT || m == LOAD_SLO_TTFO || m == LOAD_SLO_E2E;
}

double load_disturb_bound(const struct load_slo *slo)
{
	double lim = NAN;

	for (size_t i = 0; i < slo->n; i++)
		if (whole_request(slo->v[i].metric) && !(slo->v[i].limit >= lim))
			lim = slo->v[i].limit;
	return LOAD_DISTURB_SHARE * lim;
}

double load_disturb_late(const struct loadstats *st, double read_late_p95_ms)
{
	double *v = st->n > 0 ? malloc(st->n * sizeof(*v)) : NULL, lag = NAN;
	size_t n = 0;

	for (size_t i = 0; v != NULL && i < st->n; i++)
		if (loadstats_counted(&st->v[i]) && st->v[i].lag_us >= 0)
			v[n++] = (double)st->v[i].lag_us / 1e3;
	if (n > 0) {
		qsort(v, n, sizeof(*v), cmp);
		lag = load_quantile(v, n, 95);
	}
	free(v);
	/* fmax: the one known if the other is NaN */
	return fmax(lag, read_late_p95_ms);
}

int load_disturb_run(const struct load_slo *slo, const struct load_slo_result *one,
    double late)
{
	if (!(late > load_disturb_bound(slo)))
		return 0;
	for (size_t i = 0; i < slo->n; i++) {
		const struct load_slo_eval *x = &one->v[i];
		if (x->met)
			continue;
		/* NaN (no figure), an error rate, a TPOT or ITL: not the
		 * generator's; a miss by more than its lateness: the target's */
		if (!whole_request(slo->v[i].metric) || !(x->value - late <= slo->v[i].limit))
			return 0;
	}
	/* met, or missed by no more than the lateness: its samples hold the
	 * generator's time either way, and setting aside only the misses
	 * would keep the best of the runs (a capacity biased up) */
	return 1;
}
