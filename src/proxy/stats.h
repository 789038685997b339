/* Statistics per (route, tenant, model).
 *
 * Workers never lock: each finished request (and every 32 token gaps of a
 * running one) becomes a fixed-size record pushed into the worker's own
 * single-producer ring. The main thread drains the rings every 50 ms and
 * before answering /stats or /metrics, and keeps all aggregates itself:
 * cumulative Prometheus counters and histograms, and for each configured
 * window a ring of sub-interval slices (current window + the previous one,
 * for `trend`). Readers are on the main thread too, so nothing is shared. */
#ifndef TOKENTAP_STATS_H
#define TOKENTAP_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "config.h"

struct worker;
struct accesslog_entry;
struct evbuffer;

#define STATS_ROUTE_MAX  64
#define STATS_TENANT_MAX 64
#define STATS_MODEL_MAX  128
#define STATS_UPSTREAM_MAX 200   /* a replica's name (pool.h) */
#define STATS_ITL_BATCH  32

/* The group key a worker sends with each record. */
struct stats_key {
	char route[STATS_ROUTE_MAX];
	char tenant[STATS_TENANT_MAX];
	char model[STATS_MODEL_MAX];
	uint8_t dialect;           /* the stream's, and the operation of its */
	uint8_t op;                /* path (metrics_operation): for OTel labels */
	/* not part of the key: the request proved nothing about its tenant or
	 * model (answered 401 or 403, or refused by tokentap itself), so a
	 * tenant or model not seen yet is counted as "_other", never minted */
	uint8_t unverified;
	char upstream[STATS_UPSTREAM_MAX];   /* the replica; "-": none */
};

/* Process-wide gauges, shared by all workers (atomics: one update per
 * connection or request, never per event). */
extern atomic_long tokentap_active_connections;
extern atomic_long tokentap_active_streams;
extern atomic_long tokentap_max_active_streams;
/* The most streams active at once since the history last took it (and
 * set it to 0): the instance's peak concurrency of each step. */
extern atomic_long tokentap_peak_active_streams;
/* Bytes waiting in client output buffers, all connections together (only
 * clients that lag have any), against limits.client_backlog. */
extern atomic_long tokentap_client_backlog;

/* ---- worker side ---------------------------------------------------------- */

struct stats_ring;

/* A worker's ring, registered with the reader; lives until exit. */
struct stats_ring *stats_ring_new(void);
void stats_key_set(struct stats_key *k, const char *route, const char *tenant,
    const char *model, size_t model_len);
/* A stream of this group started (+1) or ended (-1): the `active` gauges. */
void stats_active(struct stats_ring *r, const struct stats_key *k, int delta);
/* A stream of this group stalled (+1), or its stall ended (-1): the
 * stalled-now gauges; a +1 counts a stall. */
void stats_stall(struct stats_ring *r, const struct stats_key *k, int delta);
/* Token gaps of a running stream. */
void stats_itl(struct stats_ring *r, const struct stats_key *k,
    const uint32_t *gaps, unsigned n);
/* A finished request, with its last token gaps. */
void stats_request(struct stats_ring *r, const struct stats_key *k,
    const struct accesslog_entry *e, const uint32_t *gaps, unsigned n);

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
struct stats_done {
	const struct stats_key *key;
	int outcome;                  /* enum meter_outcome */
	int64_t ttft_us, tpot_us, ttfo_us, duration_us;   /* -1: undefined */
	uint64_t t_us;                /* when it ended (monotonic) */
};
void stats_on_request(void (*fn)(void *arg, const struct stats_done *d), void *arg);

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
/* /stats JSON for window wi grouped by the BY_* bits. */
void stats_json(struct evbuffer *out, int wi, unsigned by);
/* Members every /stats document gets after "groups", each with its
 * leading comma (the replica pools', set by main: poold_json); NULL: none. */
extern void (*stats_json_more)(struct evbuffer *out);
/* /metrics, without the alert series. */
struct promout;
void stats_prometheus(struct promout *out);

/* For alert rules: the window figures of one route (and tenant, or all
 * tenants when tenant is NULL) over the window closest to window_us.
 * Quantiles in µs; -1 when there is no sample. */
struct stats_view {
	uint64_t requests;
	uint64_t errors;
	uint64_t aborts;          /* of the errors, client_abort */
	uint64_t ttft_count;
	uint64_t tpot_count;
	double ttft_q;
	double tpot_q;
	uint64_t ttfo_count;
	double ttfo_q;
};
/* The streams of a route stalled now (every tenant and model). */
uint64_t stats_route_stalled(const char *route);
void stats_route_view(const char *route, const char *tenant, uint64_t window_us,
    double quantile, struct stats_view *out);
/* The TTFT quantile q (µs) of one route's replica over the window closest
 * to window_us, and its sample count (*value -1 without samples). */
void stats_upstream_ttft(const char *route, const char *upstream, uint64_t window_us,
    double q, uint64_t *count, double *value);
/* Calls fn for each (route, tenant) pair seen in the window. */
void stats_each_route_tenant(uint64_t window_us,
    void (*fn)(void *arg, const char *route, const char *tenant), void *arg);

#endif
