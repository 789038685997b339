/* SPDX-License-Identifier: Apache-2.0 */
/* One load run (a level of a sweep): closed loop (N virtual users, each
 * sending its next request when the previous one ends, on its own
 * kept-alive connection) or open loop (arrivals at a rate, Poisson,
 * constant or gamma, or at a trace's offsets, each on a free or new
 * connection, at most -c of them), every request timed from its intended
 * send time, so that a wait for a connection or for the generator's own
 * timer counts as latency; that wait is also recorded per request as its
 * dispatch lag. A warm-up (a time or a count of requests) runs first and
 * is flagged, not counted. Stops issuing at the duration or count, lets
 * requests in flight end (each bounded by the timeout), and stops early on
 * SIGINT / SIGTERM (a second one drops what is in flight).
 *
 * The measurement window of a level: from the end of the warm-up (0
 * without one) for the duration; with a count instead of a duration,
 * until the last counted request ended. With a cool-down, requests go on
 * after the window (flagged, in no figure) until every counted request
 * has ended, so that the last ones see the level's load to their end,
 * not a draining server. */
#ifndef TOKENTAP_LOAD_RUN_H
#define TOKENTAP_LOAD_RUN_H

#include <stdint.h>

#include "load_conf.h"
#include "load_result.h"
#include "loadstats.h"

struct event_base;
struct evdns_base;
struct load_tls;

/* How a run shows itself and what it shares with the others. */
struct load_run_opts {
	int progress;               /* a line on stderr once a second */
	const char *label;          /* "level 3/8, concurrency 16", or NULL */
	struct load_tls *tls;       /* https targets, or NULL */
	const char *id_prefix;      /* X-Request-Id: <prefix>-<seq>; NULL: none */
};

/* Installs SIGINT / SIGTERM handling on base for every run on it (once).
 * Returns 0 or -1. */
int load_run_signals(struct event_base *base);
void load_run_signals_free(void);
/* Signals received so far (1: stop after this level, 2 or more: now);
 * a target that failed its pre-flight (below) counts as one: no level
 * runs after it. */
int load_run_interrupted(void);
/* The pre-flight (on: 1): until a request of the invocation has succeeded,
 * a refused connection, a TLS failure or an answer other than 2xx stops
 * the run at once (what is in flight drains), and every run after it. */
void load_run_preflight(int on);
/* Why the target failed its pre-flight, with the fix; NULL while it has
 * not. */
const char *load_run_target_failed(void);
/* Waits us on base, or until a signal. */
void load_run_wait(struct event_base *base, uint64_t us);

/* Resolves c's host (evdns for names) and runs the load on base, recording
 * into st, which the caller has initialised. Returns 0, or -1 when the run
 * could not start or ran out of memory. */
int load_run(struct event_base *base, struct evdns_base *dns,
    const struct load_conf *c, const struct load_run_opts *o,
    struct loadstats *st, struct load_run_info *info);

#endif
