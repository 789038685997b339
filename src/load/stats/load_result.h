/* SPDX-License-Identifier: Apache-2.0 */
/* The results of one tokentap-load invocation, in memory: what every
 * report (the table, the JSON document of docs/load-schema.md, the CSV,
 * the HTML page) is written from. One invocation runs levels: a single
 * run is one level; a sweep one per load level; a capacity search the
 * levels it probed. Each level keeps its parameters, its every request
 * (loadstats.h), the figures computed from them (load_summary.h), its
 * SLO verdict (load_slo.h) and, with --tokentap, the proxy's own figures
 * for the same window. */
#ifndef TOKENTAP_LOAD_RESULT_H
#define TOKENTAP_LOAD_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include "load_conf.h"
#include "load_psize.h"
#include "load_slo.h"
#include "load_summary.h"
#include "loadstats.h"

/* The JSON document's schema version (docs/load-schema.md). A reader
 * refuses a major version it does not know. */
#define LOAD_SCHEMA_VERSION 1

/* A level's runs at most (--repeats 10 and the first). */
#define LOAD_MAX_RUNS 11

enum load_kind { LOAD_KIND_RUN, LOAD_KIND_SWEEP, LOAD_KIND_CAPACITY };

/* What a sweep varies, or a capacity search looks for. */
enum load_key { LOAD_KEY_NONE, LOAD_KEY_CONCURRENCY, LOAD_KEY_RATE,
	LOAD_KEY_PROMPT_TOKENS };

/* What one run of a level reports about itself (load_run.h fills it). */
struct load_run_info {
	uint64_t start_us;          /* CLOCK_MONOTONIC µs: the level's origin */
	uint64_t elapsed_us;        /* start to the end of the last request */
	uint64_t window_start_us;   /* from start */
	uint64_t window_end_us;
	uint64_t max_in_flight;
	uint64_t connections;       /* connections opened */
	uint64_t queued;            /* open loop: requests that waited for a connection */
	uint64_t warmup_requests;
	uint64_t cooldown_requests;
	double cpu_s;               /* the generator's user + system CPU */
	int interrupted;
	/* how late the generator read (ms): each stamped event's trip from
	 * tokentap-mock's send (--lag), else its own loop's timer slip (a
	 * read ready at t is read when the loop comes to it); NaN: none */
	double read_late_p95_ms, read_late_p99_ms, read_late_max_ms;
	int read_late_stamps;       /* from the stamps, not the timer */
};

/* tokentap's /stats over a level's window (--tokentap). */
struct load_tt {
	int asked;
	int ok;                      /* read; else error says why */
	char error[160];
	char window[24];             /* the /stats window read */
	char group[96];              /* the route (group) whose figures these are */
	uint64_t requests, errors;
	/* mean, p50, p90, p95, p99, max (ms); NaN: null */
	double ttft[6], tpot[6], itl[6];
	uint64_t ttft_count, tpot_count;
	double output_tokens_per_s;
	int window_short;            /* the level ran longer than the window */
};

enum { LOAD_TT_MEAN, LOAD_TT_P50, LOAD_TT_P90, LOAD_TT_P95, LOAD_TT_P99, LOAD_TT_MAX };

/* --tokentap-log: each measured request paired with tokentap's access-log
 * record of it by X-Request-Id (load_tt.h), and the client's figure
 * minus tokentap's per request. */
struct load_tt_pairs {
	int asked;
	uint64_t paired;             /* measured requests found in the log */
	uint64_t missing;            /* measured requests not found */
	/* client - tokentap per ok request: p50, p95, max (ms); NaN: none */
	double ttft[3], tpot[3];
	uint64_t ttft_n, tpot_n;
};

struct load_level {
	size_t index;                /* in the document, from 0 */
	enum load_key key;           /* what this level set: concurrency, ... */
	double value;                /* its value */
	enum load_key search;        /* capacity: the search it belongs to */
	const char *phase;           /* capacity: "bracket", "bisect", "settle",
	                              * "close"; else NULL */
	char label[80];              /* "concurrency 16" */
	struct load_conf conf;       /* the run's parameters (a copy) */
	struct loadstats st;         /* every request of every run of the level */
	struct load_run_info info;   /* of its last run; window and CPU summed */
	unsigned runs;               /* > 1: repeated while undecided, samples pooled */
	/* each run's own window (from the level's start, as its samples are
	 * shifted): a repeated level's throughput is theirs, not diluted by
	 * the gaps between them; the first LOAD_LEVEL_WINDOWS runs */
#define LOAD_LEVEL_WINDOWS 16
	uint64_t windows[LOAD_LEVEL_WINDOWS][2];
	size_t nwindows;
	/* each run's own figure of each SLO target (an independent
	 * replication's: the capacity's interval is fitted on them) */
	double run_value[LOAD_MAX_RUNS][LOAD_SLO_MAX];
	double started_s;            /* its start, from the invocation's origin */
	struct load_summary sum;
	int has_slo;
	struct load_slo_result slo;
	/* a rate search's: why the level cannot count as met whatever its
	 * figures (load_settle.h), or NULL */
	const char *unsustained;
	/* a search's runs set aside because the generator itself ran late
	 * (load_levels.h: disturbed), the worst one's lateness (ms, NaN:
	 * none), and whether the level's figures are still a disturbed
	 * run's (none ran clean within its runs): undecided */
	unsigned disturbed_runs;
	double disturbed_late_ms;
	int disturbed;
	unsigned attempts;           /* runs started, set aside or not */
	struct load_tt tt;
	struct load_tt_pairs pairs;
};

/* A capacity search's answer. */
struct load_capacity {
	enum load_key key;           /* concurrency or rate */
	int ran;
	int found;                   /* some level met the targets */
	double capacity;             /* the largest level that met them (= lo) */
	double lo, hi;               /* the bisection's bracket: lo met, hi missed;
	                              * hi NaN: never missed */
	double estimate;             /* rate: where the worst target's figure / limit
	                              * crosses 1 between lo and hi; concurrency: lo */
	double ci_lo, ci_hi;         /* its confidence interval: the largest level
	                              * decided met and the smallest decided missed
	                              * (NaN: none such) */
	double confidence;           /* of the levels' decisions (0.95) */
	size_t replications;         /* rate: the runs the estimate and its interval
	                              * were fitted on (load_capfit.h); 0: the
	                              * interval is the levels decided met and missed */
	int binding;                 /* the target missed at hi (index), -1 */
	size_t levels;               /* levels it ran */
	const char *stopped;         /* why it ended: "resolution", "max", "none_met",
	                              * "interrupted", "levels" */
	/* the throughput knee among the levels it tried, by a sweep's rule
	 * (load_levels.h): knee_past the lowest saturated, knee the highest
	 * not saturated below it; NaN: none such */
	double knee, knee_past;
};

struct load_result {
	enum load_kind kind;
	char run_id[24];             /* X-Request-Id: <run_id>-<level>-<seq> */
	uint64_t wall_start_ms;      /* when it started (RFC 3339 in the JSON) */
	uint64_t mono_start_us;      /* CLOCK_MONOTONIC origin of every time */
	int argc;
	char **argv;
	const struct load_conf *conf;   /* the base parameters */
	struct load_psize psize;     /* how synthetic prompts were sized */
	struct load_pcts pcts;
	struct load_slo slo;         /* n == 0: none */
	uint64_t slice_us;
	struct load_level *levels;
	size_t nlevels, cap;
	/* sweep */
	enum load_key sweep_key;
	const char *stop_reason;     /* "levels", "saturation", "error_rate",
	                              * "interrupted", "failed" */
	int knee;                    /* the level past which throughput stopped
	                              * growing, or -1 */
	int saturated_at;            /* the level that showed it, or -1 */
	struct load_fit input_fit;   /* prompt-tokens sweeps: TTFT against input */
	/* capacity */
	struct load_capacity capacity[2];
	size_t ncapacity;
	int interrupted;
	int failed;                  /* a level could not run */
	/* tokentap-load merge: the shards joined (0: not a merge), the plan
	 * they ran (its digest) and how far apart their levels started */
	unsigned merged;
	char plan[20];
	double merged_skew_s;
	/* tokentap's figures beside the client's: "access_log" (each request
	 * paired by id), "stats_window" (a /stats window a level), NULL
	 * (neither asked); and why --tokentap alone did not pair, or NULL
	 * (the caller's string, outliving r) */
	const char *tt_pairing;
	const char *tt_pairing_reason;
};

void load_result_init(struct load_result *r, enum load_kind kind,
    const struct load_conf *conf, int argc, char **argv);
/* A new level at the end (conf copied). NULL when memory ran out. */
struct load_level *load_result_add(struct load_result *r, enum load_key key,
    double value, const struct load_conf *conf);
void load_result_free(struct load_result *r);
/* A level's summary (load_summary.h) and its SLO's verdict from its
 * samples, its window(s) and r's targets. Returns 0 or -1 (memory). */
int load_result_summarise(const struct load_result *r, struct load_level *lv);
/* r->input_fit: TTFT against input over the ok measured requests of every
 * level (a prompt-tokens sweep's); left NaN when memory ran out. */
void load_result_input_fit(struct load_result *r);

/* The key's name: "concurrency", "rate", "prompt_tokens". */
const char *load_key_name(enum load_key k);

#endif
