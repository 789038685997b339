/* SPDX-License-Identifier: Apache-2.0 */
/* The attempts of one request: the replica each went to (pool.h), its
 * verdict on the replica's health, and the replicas left before the one
 * in flight, held until the request's books are closed (the access log
 * names them). proxy_upstream.c decides when an attempt ends (failover.h
 * says whether another may follow); this is the bookkeeping. */
#ifndef TOKENTAP_ATTEMPT_H
#define TOKENTAP_ATTEMPT_H

#include <stdint.h>

#include "exchange.h"
#include "failover.h"
#include "loop.h"
#include "pool.h"

struct attempt {
	struct replica *rep;          /* the attempt in flight; NULL: none yet */
	struct replica *left[CONF_RETRIES_MAX + 1];  /* held for the log */
	unsigned n_left;
	uint64_t t0;                  /* when the attempt in flight started */
	unsigned trial : 1;           /* rep's one trial request (pool.h) */
	unsigned judged : 1;          /* rep's health was reported */
};

/* Picks the replica of the next attempt, none tried before: a->rep, and
 * x->upstream names it. -1 when none is left. */
int attempt_pick(struct attempt *a, struct loop *l, struct exchange *x);
/* Reports rep's health once per attempt (ok: a response head that is not a
 * failure); an ejection or a return is logged. */
void attempt_judge(struct attempt *a, const struct exchange *x, int ok);
/* May the request try another replica after this? (Attempts left under
 * the route's retries, a replica not tried yet, a method this reason
 * allows; whether the request is still at hand is the caller's.) */
int attempt_more(const struct attempt *a, const struct exchange *x,
    enum failover_reason why);
/* The attempt in flight is left for another: in x's attempts with why
 * and status, no longer open on its replica. */
void attempt_leave(struct attempt *a, struct exchange *x, enum failover_reason why,
    unsigned status);
/* The request is over (its books closed): every replica let go. */
void attempt_end(struct attempt *a);

#endif
