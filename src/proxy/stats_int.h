/* The reader's state of stats.c, shared with stats_out.c only. */
#ifndef TOKENTAP_STATS_INT_H
#define TOKENTAP_STATS_INT_H

#include "hist.h"
#include "meter.h"
#include "stats.h"

#define SLICES        6       /* sub-intervals per window */
#define MAX_WINDOWS   8
#define GROUP_BUCKETS 4096
#define BOUNDS_MAX    40
#define STATS_UPSTREAMS_MAX 1024  /* replica names kept; more are "_other" */

enum { PROM_TTFT, PROM_TPOT, PROM_ITL, PROM_DURATION, PROM_CONNECT, PROM_COUNT };

struct bounds {
	size_t n;
	uint64_t us[BOUNDS_MAX];
};

/* A cumulative Prometheus histogram: counts[i] for bound i, counts[n] for
 * +Inf (not cumulative here; summed when written). */
struct prom_hist {
	uint64_t *counts;
	uint64_t sum_us;
	uint64_t count;
};

/* Running sums for R² of TTFT (ms) against concurrency. */
struct r2_sums {
	double n, sx, sy, sxy, sxx, syy;
};

struct slice {
	uint64_t index;           /* t / slice length */
	uint64_t requests, errors;
	uint64_t output_tokens, input_tokens;
	uint64_t speed_tokens, speed_us;
	struct r2_sums r2;
	struct hist_sparse ttft, tpot, itl;
};

struct group {
	struct group *hnext, *next;
	struct stats_key key;
	uint64_t hash;
	long active, max_active;
	uint64_t requests[OUTCOME_COUNT];
	uint64_t output_tokens, input_tokens;
	uint64_t exceeded[4];
	struct prom_hist prom[PROM_COUNT];
	struct slice *win[MAX_WINDOWS];   /* 2 * SLICES each */
};

struct name_set {
	char **names;
	size_t n, cap;
};

struct stats_state {
	int configured;
	size_t n_windows;             /* the windows kept: */
	size_t n_served;              /* stats.windows first, then the alerts' */
	uint64_t window_us[MAX_WINDOWS];
	uint64_t slice_us[MAX_WINDOWS];
	uint64_t max_tenants, max_models;
	struct bounds bounds[PROM_COUNT];
	struct group *table[GROUP_BUCKETS];
	struct group *groups;
	size_t n_groups;
	struct name_set tenants, models, upstreams;
	uint64_t dropped;
};

/* The one state of the statistics (stats.c owns it), for stats_out.c. */
const struct stats_state *stats_state(void);

#endif
