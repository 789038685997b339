/* The reader's state of stats.c, shared with stats_out.c only. */
#ifndef TOKENTAP_STATS_INT_H
#define TOKENTAP_STATS_INT_H

#include "hist.h"
#include "meter.h"
#include "stats.h"

#define SLICES        6       /* sub-intervals per window */
#define MAX_WINDOWS   8
#define GROUP_BUCKETS 4096
#define STATS_UPSTREAMS_MAX 1024  /* replica names kept; more are "_other" */

/* Running sums for R² of TTFT (ms) against concurrency. */
struct r2_sums {
	double n, sx, sy, sxy, sxx, syy;
};

struct slice {
	uint64_t index;           /* t / slice length */
	uint64_t requests, errors;
	uint64_t aborts;          /* client_abort: errors, but not the route's */
	uint64_t output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;
	struct r2_sums r2;
	/* stream health: stalls begun, streams judged for clumping and those
	 * that looked buffered, requests without a token by outcome */
	uint64_t stalls, judged, buffered;
	uint64_t no_token[OUTCOME_COUNT];
	struct hist_sparse ttft, tpot, itl, ttfo, ovh_request, ovh_read;
};

struct group {
	struct group *hnext, *next;
	struct stats_key key;
	uint64_t hash;
	long active, max_active;
	struct mset *ms;                  /* its /metrics label set (metrics.h) */
	int ms_folded;
	long stalled;                     /* streams stalled now */
	struct slice *win[MAX_WINDOWS];   /* 2 * SLICES each */
};

struct name_set {
	char **names;
	size_t n, cap;
};

/* A route's ttft_warning: where its headroom is measured to. */
struct route_warning {
	char route[STATS_ROUTE_MAX];
	uint64_t ttft_warning_us;
};

struct stats_state {
	int configured;
	size_t n_windows;             /* the windows kept: */
	size_t n_served;              /* stats.windows first, then the alerts' */
	uint64_t window_us[MAX_WINDOWS];
	uint64_t slice_us[MAX_WINDOWS];
	uint64_t max_tenants, max_models;
	struct group *table[GROUP_BUCKETS];
	struct group *groups;
	size_t n_groups;
	struct name_set tenants, models, upstreams;
	uint64_t dropped;
	struct route_warning *warnings;   /* one per configured route */
	size_t n_warnings;
	struct history *history;          /* stats_set_history's; NULL: none */
};

/* The one state of the statistics (stats.c owns it), for stats_out.c. */
const struct stats_state *stats_state(void);

#endif
