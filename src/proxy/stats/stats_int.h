/* SPDX-License-Identifier: Apache-2.0 */
/* The reader's state of stats.c, shared with stats_out.c only. */
#ifndef TOKENTAP_STATS_INT_H
#define TOKENTAP_STATS_INT_H

#include "hist.h"
#include "meter.h"
#include "stats.h"

#define SLICES        6       /* sub-intervals per window */
#define MAX_WINDOWS   8
#define STATS_UPSTREAMS_MAX 1024  /* replica names kept; more are "_other" */

/* Running sums for R² of TTFT (ms) against concurrency. */
struct r2_sums {
	double n, sx, sy, sxy, sxx, syy;
};

/* The wire report (meter.h's meter_wire) summed over streams: what the
 * backends of a group sent, counted. */
enum {
	W_STREAMS, W_LF, W_CRLF, W_CR, W_DATA_SPACE, W_DATA_BARE,
	W_GZIP, W_DEFLATE, W_BR, W_ZSTD, W_END_SEEN, W_END_MISSING,
	W_USAGE_NONE, W_USAGE_FINAL, W_USAGE_EVERY,
	W_COMMENTS, W_PINGS, W_EMPTY_DELTAS, W_KA_GAPS, W_KA_SPAN_MS,
	W_EVENTS, W_EVENT_READS, W_ERRORS_2XX, W_COUNT
};

struct slice {
	uint64_t index;           /* t / slice length */
	uint64_t requests, errors;
	uint64_t by_client;        /* client_abort, client_timeout: errors, but
	                            * not the route's */
	uint64_t output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;
	struct r2_sums r2;
	/* stream health: stalls begun, streams judged for clumping and those
	 * that looked buffered, requests without a token by outcome */
	uint64_t stalls, judged, buffered;
	/* TTFTs the kernel stamped, and those of them uncertain (sample.h) */
	uint64_t ttft_stamped, ttft_uncertain;
	uint64_t no_token[OUTCOME_COUNT];
	/* chunks are not tokens: the token events and output tokens of the
	 * streams that counted their tokens, the first events' tokens where
	 * told (and how many told), TPOTs over an estimated divisor */
	uint64_t counted_events, counted_tokens;
	uint64_t first_told, first_tokens;
	uint64_t tpot_estimated;
	uint32_t wire[W_COUNT];
	struct hist_sparse ttft, tpot, itl, ttfo, ovh_request, ovh_read;
	/* the server side's TTFT and TTFO (sample.h): what the alerts, the
	 * slow replicas and the headroom (r2) judge */
	struct hist_sparse ttft_server, ttfo_server;
};

/* A name groups are keyed by (a route, tenant, model or replica), kept
 * once and shared by the groups that have it; it goes with the last of
 * them, and with it its place under max_tenants or max_models. */
struct stats_name {
	struct stats_name *hnext;
	uint64_t hash;
	uint32_t refs;                    /* groups keyed by it */
	char text[];
};

/* The names of one kind, for the cardinality limits. */
struct name_set {
	struct stats_name **table;
	size_t n, buckets;                /* names, "_other" not counted */
	struct stats_name *other;         /* "_other", always there */
};

/* A statistics group: what one (route, tenant, model, replica, dialect,
 * operation) did. Its slices are allocated when a record falls in them,
 * so a group costs what its traffic touched (docs/alerts-and-metrics.md: a
 * group of one request about 2.5 KB, where every slice of every window was
 * allocated up front: 17 KB). */
struct group {
	struct group *hnext;
	struct group *newer, *older;      /* in state's list, by last record */
	const struct stats_name *route, *tenant, *model, *upstream;
	uint8_t dialect, op;
	uint8_t ms_folded;
	uint32_t streams;                 /* open streams the stream map ties to it */
	uint64_t hash;
	uint64_t last_us;                 /* the drain that last applied a record */
	long active, max_active;
	long stalled;                     /* streams stalled now */
	struct mset *ms;                  /* its /metrics label set (metrics.h);
	                                   * NULL: given back while idle */
	uint64_t ms_epoch;                /* metrics_epoch() when resolved */
	struct slice **slot;              /* n_windows * 2 * SLICES, NULL until used */
};

/* Slice i (0 .. 2 * SLICES - 1) of window w; NULL when none was used. */
static inline const struct slice *group_slice(const struct group *g, size_t w, int i)
{
	return g->slot != NULL ? g->slot[w * 2 * SLICES + (size_t)i] : NULL;
}

/* A route's ttft_warning: where its headroom is measured to. */
struct route_warning {
	char route[SAMPLE_ROUTE_MAX];
	uint64_t ttft_warning_us;
};

struct stats_state {
	int configured;
	size_t n_windows;             /* the windows kept: */
	size_t n_served;              /* stats.windows first, then the alerts' */
	uint64_t window_us[MAX_WINDOWS];
	uint64_t slice_us[MAX_WINDOWS];
	uint64_t since_ms;            /* wall time the windows began (the start,
	                               * or the reload that changed them) */
	uint64_t max_tenants, max_models;
	/* groups by key (the names' addresses), and by last record, newest
	 * first: the sweep walks from the oldest */
	struct group **table;
	size_t buckets;
	struct group *newest, *oldest;
	size_t n_groups;
	struct name_set routes, tenants, models, upstreams;
	uint64_t now_us;              /* the drain's clock */
	/* a group idle this long with nothing open goes (its windows hold
	 * nothing by then); its label set is given back after release_us
	 * (metrics.expiration; 0: never) */
	uint64_t idle_us, release_us, swept_us;
	uint64_t dropped;
	struct route_warning *warnings;   /* one per configured route */
	size_t n_warnings;
	struct history *history;          /* stats_set_history's; NULL: none */
};

/* The one state of the statistics (stats.c owns it), for stats_out.c. */
const struct stats_state *stats_state(void);

/* ---- the groups (stats_group.c) ---------------------------------------------- */

/* The group of a record's key; NULL when memory ran out. */
struct group *stats_group_get(struct stats_state *st, const struct sample_key *k);
/* The same for a record of an open stream's gauges: the group its +1
 * went to (active_delta > 0 ties the stream to it, < 0 unties). */
struct group *stats_group_of_stream(struct stats_state *st, const struct sample_key *k,
    int active_delta);
/* g's label set is to be resolved anew at its next use. */
int stats_group_stale(const struct group *g);
/* A record goes to g now: its label set resolved if need be, its idle
 * time restarted. */
void stats_group_use(struct stats_state *st, struct group *g);
/* Groups idle for st->idle_us go, label sets of groups idle for
 * st->release_us are given back; a few times a period at most. */
void stats_groups_sweep(struct stats_state *st);
/* The last key's group is not to be trusted (the limits may change). */
void stats_groups_forget(void);
void stats_group_windows_free(struct stats_state *st, struct group *g);
void stats_groups_free(struct stats_state *st);

#endif
