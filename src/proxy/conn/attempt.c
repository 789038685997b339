/* SPDX-License-Identifier: Apache-2.0 */
#include "attempt.h"

#include "gauge.h"
#include "log.h"
#include "util.h"

/* Every replica tried so far, the one in flight last. */
static size_t tried(const struct attempt *a, struct replica **out)
{
	size_t n = 0;
	for (unsigned i = 0; i < a->n_left; i++)
		out[n++] = a->left[i];
	if (a->rep != NULL)
		out[n++] = a->rep;
	return n;
}

int attempt_pick(struct attempt *a, struct loop *l, struct exchange *x)
{
	struct replica *t[CONF_RETRIES_MAX + 2];
	size_t n = tried(a, t);
	int trial;
	struct replica *rep = pool_pick(&l->pool_views, x->route, x->affinity, t, n,
	    &l->rng, util_now_us(), &trial);

	if (rep == NULL)
		return -1;
	a->rep = rep;
	a->trial = trial != 0;
	a->judged = 0;
	a->t0 = util_now_us();
	x->upstream = rep->name;
	return 0;
}

void attempt_judge(struct attempt *a, const struct exchange *x, int ok)
{
	const struct conf_route *r = x->route;
	uint64_t us = 0;

	if (a->rep == NULL || a->judged)
		return;
	a->judged = 1;
	switch (pool_report(a->rep, &r->health, ok, a->trial, util_now_us(), &us)) {
	case POOL_EJECTED:
		log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_EJECTION], LOG_LVL_WARN,
		    "route %s: upstream %s ejected for %llu ms (request %s)", r->name,
		    a->rep->name, (unsigned long long)(us / 1000), x->request_id);
		break;
	case POOL_BACK:
		log_limited(&gauge_log[GAUGE_LOG_UPSTREAM_EJECTION], LOG_LVL_INFO,
		    "route %s: upstream %s is back (request %s)", r->name, a->rep->name,
		    x->request_id);
		break;
	case POOL_SAME:
		break;
	}
	a->trial = 0;     /* a trial's verdict is in */
}

int attempt_more(const struct attempt *a, const struct exchange *x,
    enum failover_reason why)
{
	size_t size = pool_size(x->route);
	return a->n_left < x->route->retries && a->n_left + 1 < size &&
	    a->n_left < CONF_RETRIES_MAX && failover_resend_ok(why, x->idempotent);
}

/* No longer open there; the reference stays, for the log's names. */
static void let_go(struct attempt *a)
{
	pool_leave(a->rep, a->trial);
	a->trial = 0;
	if (a->n_left < CONF_RETRIES_MAX + 1)
		a->left[a->n_left++] = a->rep;
	else
		pool_replica_unref(a->rep);
	a->rep = NULL;
}

void attempt_leave(struct attempt *a, struct exchange *x, enum failover_reason why,
    unsigned status)
{
	if (a->rep == NULL)
		return;
	exchange_attempt(x, a->rep->name, failover_reason_name(why), status,
	    util_now_us() - a->t0);
	let_go(a);
}

void attempt_end(struct attempt *a)
{
	if (a->rep != NULL)
		let_go(a);
	for (unsigned i = 0; i < a->n_left; i++)
		pool_replica_unref(a->left[i]);
	a->n_left = 0;
}
