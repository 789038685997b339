/* SPDX-License-Identifier: Apache-2.0 */
/* Statistics per (route, tenant, model), on the main thread.
 *
 * The workers' records (ring.h) are drained every 50 ms and before
 * answering /stats or /metrics; the aggregates are kept here alone:
 * cumulative Prometheus counters and histograms (metrics.c), and for each
 * configured window a ring of sub-interval slices (current window + the
 * previous one, for `trend`). Readers are on the main thread too, so
 * nothing is shared. */
#ifndef TOKENTAP_STATS_H
#define TOKENTAP_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "sample.h"

struct evbuffer;

/* ---- main thread ---------------------------------------------------------- */

/* The clock the windows slide on (tests replace it). */
extern uint64_t (*stats_clock)(void);

/* Sets windows, cardinality limits and histogram bounds from c; a reload
 * with new windows or bounds starts those series anew (logged). */
void stats_configure(const struct conf *c);
/* Pulls every ring. */
void stats_drain(void);
void stats_free(void);

/* Every finished request as the reader applies it (the SLOs count them),
 * on the main thread; fn NULL: none. */
void stats_on_request(void (*fn)(void *arg, const struct sample_key *k,
    const struct sample *s), void *arg);

/* The history (history.h) that drained records go to as well, and that
 * /stats takes trend and R² from where it keeps the window twice over
 * (historyd.c sets it); NULL: none. */
struct history;
void stats_set_history(struct history *h);

/* Index of a configured window by its text ("1m"), or -1. */
int stats_window_index(const char *text);

enum { BY_ROUTE = 1, BY_TENANT = 2, BY_MODEL = 4, BY_UPSTREAM = 8 };

/* {count, mean, p50, p90, p95, p99, max} of h, in µs / scale: a /stats
 * distribution (GET /stats/history's too). */
struct hist;
void stats_json_dist(struct evbuffer *out, const struct hist *h, double scale);
/* /stats JSON for window wi grouped by the BY_* bits: the rows from
 * offset, at most limit of them (sorted by key), with how many there are
 * and whether more follow ("total_groups", "truncated"). */
#define STATS_ROWS_DEFAULT 1000
#define STATS_ROWS_MAX     10000
void stats_json(struct evbuffer *out, int wi, unsigned by, size_t offset, size_t limit);
/* Members every /stats document gets after "groups", each with its
 * leading comma (the replica pools', set by main: poold_json); NULL: none. */
extern void (*stats_json_more)(struct evbuffer *out);
/* /metrics, without the alert series. */
struct promout;
void stats_prometheus(struct promout *out);

/* For alert rules: the window figures of one route (and tenant, or all
 * tenants when tenant is NULL) over the window closest to window_us.
 * Quantiles in µs; -1 when there is no sample. TTFT and TTFO are the
 * server side's (sample.h: from the request's last byte). */
struct stats_view {
	uint64_t requests;
	uint64_t errors;
	uint64_t by_client;        /* of the errors, the client's: client_abort,
	                            * client_timeout */
	uint64_t ttft_count;
	uint64_t tpot_count;
	double ttft_q;
	double tpot_q;
	uint64_t ttfo_count;
	double ttfo_q;
	uint64_t ttft_stamped, ttft_uncertain;  /* sample.h */
};
/* The streams of a route stalled now (every tenant and model). */
uint64_t stats_route_stalled(const char *route);
void stats_route_view(const char *route, const char *tenant, uint64_t window_us,
    double quantile, struct stats_view *out);
/* The server side's TTFT quantile q (µs) of one route's replica over the
 * window closest to window_us, and its sample count (*value -1 without samples). */
void stats_upstream_ttft(const char *route, const char *upstream, uint64_t window_us,
    double q, uint64_t *count, double *value);
/* Calls fn for each (route, tenant) pair seen in the window. */
void stats_each_route_tenant(uint64_t window_us,
    void (*fn)(void *arg, const char *route, const char *tenant), void *arg);

#endif
