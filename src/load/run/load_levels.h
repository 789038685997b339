/* SPDX-License-Identifier: Apache-2.0 */
/* Runs the levels of an invocation into a load_result: one run, a sweep
 * (levels of concurrency, rate or prompt size, in order, stopped at
 * saturation or at an error-rate limit), or a capacity search (the
 * largest concurrency, then the largest rate, that meets the SLO:
 * bracket by doubling, then bisect).
 *
 * Saturation (--saturation G, default 10 %): a level saturates when the
 * load grew by a factor r over the level before it but its output
 * tokens/s grew by less than G x (r - 1), while its median end-to-end
 * latency rose by more than G x (r - 1): more load bought no throughput,
 * only waiting (Little's law: in a closed loop the two must go together).
 * The knee is the level before it. The rule, and the measurements behind
 * its 10 %, are in docs/load-testing.md ("Sweeps").
 *
 * An open loop (a rate sweep) offers its load whatever happens: a level
 * is saturated when it carried (requests completed in the window per s)
 * less than LOAD_CARRIED_SHARE of what it offered (requests sent in the
 * window per s), or when its TTFT grew over the window, significantly
 * (the least-squares slope's t statistic over LOAD_TREND_T) and by much
 * (over LOAD_TREND_RISE of its median): a queue that grows without end.
 * The knee is the last level before the first saturated one: the last
 * carried at its offered rate. */
#ifndef TOKENTAP_LOAD_LEVELS_H
#define TOKENTAP_LOAD_LEVELS_H

#include <stdio.h>

#include "load_result.h"
#include "load_run.h"
#include "load_tt.h"

#define LOAD_MAX_LEVELS 64
#define LOAD_CARRIED_SHARE 0.9
#define LOAD_TREND_T 5.0
#define LOAD_TREND_RISE 1.0

struct event_base;
struct evdns_base;
struct load_tls;

/* What every level shares. */
struct load_env {
	struct event_base *base;
	struct evdns_base *dns;
	struct load_tls *tls;
	int progress;                /* progress and a line per level on stderr */
	struct load_tt_conf *tt;     /* --tokentap, or NULL */
	uint64_t tt_ready_at;        /* no level before this (µs, monotonic) */
};

/* A sweep's or a search's plan. */
struct load_plan {
	enum load_key key;
	double levels[LOAD_MAX_LEVELS];   /* a list, ascending */
	size_t n;
	double from, to, factor;     /* geometric: from, from x factor, ... to */
	int geometric;
	int stop_on_saturation;      /* default on */
	double saturation;           /* G above */
	double stop_error_rate;      /* stop past this error rate (default 0.1) */
	/* capacity */
	enum load_key search[2];
	size_t nsearch;
	double cap_from[2];          /* [0] concurrency, [1] rate; 0: the default start */
	double cap_max[2];           /* the largest level tried, the same way */
	double resolution;           /* rate: stop when hi / lo - 1 <= this */
	unsigned repeats;            /* extra runs of a level within noise */
	size_t max_levels;
};

void load_plan_init(struct load_plan *p);
/* "concurrency", "rate", "prompt-tokens" (or prompt_tokens). Returns the
 * key, or LOAD_KEY_NONE with a did-you-mean in hint (may be NULL). */
enum load_key load_plan_key(const char *s, const char **hint);
/* "1,2,4,8" (ascending), "1..256" (doubling), "1..256x1.5" (by 1.5); an
 * open "4.." doubles until the sweep stops (or LOAD_MAX_LEVELS). Returns 0,
 * or -1 with *err. */
int load_plan_levels(struct load_plan *p, const char *s, const char **err);

/* The seed of a level's run (0: the level's own; each repeat one of its
 * own, an independent replication). */
uint64_t load_levels_seed(uint64_t seed, unsigned run);

/* The saturation rules above: a closed loop's, an open loop's. */
int load_levels_saturated(const struct load_summary *prev, double v_prev,
    const struct load_summary *cur, double v_cur, double gain);
int load_levels_open_saturated(const struct load_summary *s, double share);

/* Each returns 0, or -1 when a level could not run (r->failed). */
int load_levels_single(struct load_env *e, struct load_result *r);
int load_levels_sweep(struct load_env *e, const struct load_plan *p,
    struct load_result *r);
int load_levels_capacity(struct load_env *e, const struct load_plan *p,
    struct load_result *r);

#endif
