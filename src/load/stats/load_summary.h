/* SPDX-License-Identifier: Apache-2.0 */
/* The figures of one level, computed exactly from its samples
 * (loadstats.h): each distribution's count, mean, standard deviation,
 * min, max and the configured percentiles; throughput over the level's
 * measurement window; errors by cause; goodput; chunks; time slices with
 * a drift figure; TTFT against input length. Pure: no I/O, no clock.
 *
 * Percentiles are numpy's default ("linear", Hyndman and Fan type 7):
 * the value at rank q/100 x (n - 1) of the sorted samples, interpolated
 * between its two neighbours, as vLLM's benchmark computes them. The
 * standard deviation is the population one (numpy's std, ddof 0).
 *
 * Which requests count: the measured ones (not warm-up). Latency figures
 * (TTFT, TTFO, TPOT, ITL, end to end, output speed) are over the ok ones;
 * counts and errors over all. Throughput is the work done inside the
 * measurement window [window_start, window_end] (load_run.h), divided by
 * its length: requests completed in it, and tokens emitted in it, each
 * request's tokens spread evenly from its first to its last token; so a
 * level's throughput is its steady state, not diluted by the requests
 * still draining at its end. */
#ifndef TOKENTAP_LOAD_SUMMARY_H
#define TOKENTAP_LOAD_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "goodput.h"
#include "load_psize.h"
#include "loadstats.h"

#define LOAD_MAX_PCTS 16
#define LOAD_MAX_SLICES 4096
/* The ITL's quantile function at every whole percent, 0 to 100: the
 * CDF a report draws, without every gap. */
#define LOAD_CDF_POINTS 101

/* The percentiles reported, in ascending order (50, 90, 95, 99). */
struct load_pcts {
	size_t n;
	double p[LOAD_MAX_PCTS];
};

/* One distribution, in the unit of its samples (ms for durations). */
struct load_dist {
	size_t count;               /* 0: every other field is NaN */
	double mean, std, min, max;
	double median;              /* whatever the list, for the rules */
	double q[LOAD_MAX_PCTS];    /* at load_pcts.p[i] */
};

/* y = slope x + intercept by least squares; n < 2 or x constant: NaN. */
struct load_fit {
	size_t n;
	double slope, intercept, r2;
};

/* A stretch of the run, by the requests' intended send time. */
struct load_slice {
	unsigned run;               /* the level's run (replication) it is of, from 0 */
	double start_s, end_s;      /* from the level's start */
	uint64_t requests, ok, errors;
	uint64_t output_tokens;     /* emitted in the slice (spread) */
	double output_tokens_per_s;
	double ttft_p50, ttft_p95, tpot_p50, tpot_p95;   /* ms; NaN: none */
};

/* The generator's own account of the level. */
struct load_gen {
	double cpu_s;               /* user + system CPU over the level */
	double cpu_share;           /* of one CPU, over the level's wall time */
	double cpu_us_per_event;    /* per event read (all requests) */
	uint64_t events;
	uint64_t queued;            /* open loop: requests that waited for a connection */
	int cpu_bound;              /* warnings: see load_summary.c */
	int lag_bound;
	int conn_bound;
};

struct load_summary {
	/* the measured requests */
	uint64_t requests, ok, errors;
	uint64_t outcomes[OUTCOME_COUNT];
	uint64_t output_tokens, input_tokens;
	struct load_psize_check prompt;   /* tokens asked beside the target's count */
	double error_rate;          /* errors / requests; 0 without requests */
	/* throughput inside the window */
	double window_s;
	uint64_t completed;         /* requests that ended in the window, any outcome */
	double requests_per_s;
	double output_tokens_per_s;
	double input_tokens_per_s;  /* of the requests completed in the window */
	double total_tokens_per_s;
	/* latency (ms), speed (tokens/s), over the ok measured requests */
	struct load_dist ttft, ttfo, tpot, itl, e2e, speed;
	double itl_cdf[LOAD_CDF_POINTS];   /* ITL (ms) at 0, 1, ..., 100 %; NaN: none */
	struct load_dist lag;       /* dispatch lag (ms), every measured request */
	struct load_dist event_lag; /* --lag trips (ms) */
	/* chunks are not tokens */
	struct load_dist events, token_chunks, tokens_per_chunk, first_chunk_tokens;
	/* goodput against per-request targets; judged 0: none set */
	struct goodput_targets goodput;
	uint64_t good, judged;
	double goodput_per_s, attainment;
	/* time slices of slice_s, and TTFT's drift over the level */
	struct load_slice *slices;
	size_t nslices;
	double slice_s;
	struct load_fit drift;      /* TTFT (ms) against start (minutes), within
	                             * each run (load_fit_runs) */
	struct load_fit input_fit;  /* TTFT (ms) against input tokens (thousands) */
	struct load_gen gen;
};

/* What summarising needs besides the samples. */
struct load_sum_in {
	const struct loadstats *st;
	const struct load_pcts *pcts;
	const struct goodput_targets *goodput;   /* NULL: none */
	uint64_t window_start_us;   /* from the level's start */
	uint64_t window_end_us;
	/* nwindows > 0: the throughput of these windows instead (a level's
	 * runs, each its own [start, end), from the level's start); with
	 * more than one, the slices and the drift are each run's */
	const uint64_t (*windows)[2];
	size_t nwindows;
	uint64_t slice_us;          /* 0: no slices */
	double cpu_s;               /* the generator's CPU over the level */
	double wall_s;              /* the level's wall time, warm-up included */
	uint64_t queued;
};

/* The default list: 50, 90, 95, 99. */
void load_pcts_default(struct load_pcts *p);
/* "50,90,95,99,99.9": each in (0, 100], ascending, at most LOAD_MAX_PCTS.
 * Returns 0, or -1 with *err. */
int load_pcts_parse(const char *s, struct load_pcts *p, const char **err);
/* "p50", "p99.9": a percentile's name in the JSON and the CSV. */
void load_pcts_name(double p, char *buf, size_t len);

/* The exact distribution of v[0..n) (sorted in place). */
void load_dist_of(double *v, size_t n, const struct load_pcts *p,
    struct load_dist *d);
/* One percentile of sorted v[0..n) by the rule above; NaN when n is 0. */
double load_quantile(const double *v, size_t n, double pct);
/* Least squares over n points. */
void load_fit_of(const double *x, const double *y, size_t n, struct load_fit *f);
/* The runs of a level a sum takes apart at most (a level's repeats). */
#define LOAD_SUM_RUNS 16
/* Least squares with an intercept of each run's own (run[i] of point i,
 * from 0): the slope within the runs, what independent replications
 * share, not the jumps between them; r2 within them too. One run: as
 * load_fit_of. */
void load_fit_runs(const double *x, const double *y, const size_t *run, size_t n,
    struct load_fit *f);
/* TTFT against input: each ok measured request of st with a TTFT as a
 * point, x its input tokens (thousands; the prompt's size where the target
 * reported none), y its TTFT (ms). x and y hold st->n; returns how many. */
size_t load_input_points(const struct loadstats *st, double *x, double *y);

/* Summarises a level into *sum (freed by load_summary_free). Returns 0, or
 * -1 when memory ran out. */
int load_summary(const struct load_sum_in *in, struct load_summary *sum);
void load_summary_free(struct load_summary *sum);

/* The value of one figure of a summary by name, as the SLO targets and
 * the CSV name them: "ttft_p95", "tpot_mean", "e2e_p99", "itl_max",
 * "error_rate", "output_tokens_per_s", ... Returns 0 with *v (ms for
 * durations; NaN where undefined), or -1 for an unknown name. */
int load_summary_value(const struct load_summary *sum,
    const struct load_pcts *pcts, const char *name, double *v);

#endif
