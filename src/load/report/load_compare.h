/* SPDX-License-Identifier: Apache-2.0 */
/* A/B: two saved runs side by side (tokentap-load compare A.json B.json).
 * Levels are matched by what they set (concurrency 16 with concurrency
 * 16; a single run with a single run); a level in one document only is
 * listed, not compared. Per matched level and figure: A's value, B's,
 * the change (B / A - 1; for error_rate B - A, in points) and its
 * bootstrap interval over each level's measured requests (load_boot.h;
 * warm-up and cool-down ones are in no figure, so in no resample), and
 * whether it is significant. Throughput is a figure of the level, not of
 * a request: its change has no interval.
 *
 * Rules (--fail-on) say which changes fail a CI job:
 *   tpot_p50>+10%     B's TPOT p50 more than 10 % above A's
 *   output_tokens_per_s<-5%   B's throughput more than 5 % below A's
 *   ttft_p95>+20ms    B's TTFT p95 more than 20 ms above A's
 *   error_rate>+1%    B's error rate more than 1 point above A's
 * A rule fails at a level when the change is beyond its limit, in its
 * direction, and significant there (its interval excludes 0); for a
 * figure without an interval (throughput, a document saved without its
 * samples, ITL without its gaps), beyond its limit. */
#ifndef TOKENTAP_LOAD_COMPARE_H
#define TOKENTAP_LOAD_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "load_result.h"

#define LOAD_CMP_MAX_RULES 16
#define LOAD_CMP_MAX_METRICS 32

struct load_cmp_rule {
	char text[64];               /* as given, for the verdict */
	char metric[32];             /* a figure's name (load_summary_value's) */
	int up;                      /* > (a rise fails), else < (a fall fails) */
	double limit;                /* > 0: a fraction (relative), ms, or points */
	int relative;                /* limit is a share of A's value */
};

struct load_cmp_opts {
	struct load_cmp_rule rules[LOAD_CMP_MAX_RULES];
	size_t nrules;
	char metrics[LOAD_CMP_MAX_METRICS][32];   /* the rows, in order */
	size_t nmetrics;
	double alpha;                /* 0.05: 95 % intervals */
	size_t resamples;            /* 2000 */
	uint64_t seed;
	int allow_different;         /* compare unlike workloads anyway */
};

/* load_compare's answer when the workloads differ (not allowed). */
#define LOAD_CMP_DIFFERENT 2

/* The default rows, alpha, resamples and seed. */
void load_cmp_opts_init(struct load_cmp_opts *o);
/* A figure's canonical name ("e2el_p95" and "output_throughput" are read
 * as e2e_p95 and output_tokens_per_s), checked against what compare
 * knows; NULL when unknown (err says why). */
const char *load_cmp_metric(const char *name, char *buf, size_t len, const char **err);
/* --metrics: a comma-separated list, replacing the rows. */
int load_cmp_parse_metrics(struct load_cmp_opts *o, const char *s, char *err,
    size_t errlen);
/* --fail-on: rules separated by blanks or commas, added to o. Returns 0,
 * or -1 with err naming the rule and what is wrong. */
int load_cmp_parse_rules(struct load_cmp_opts *o, const char *s, char *err,
    size_t errlen);

/* The samples of a level's first run: st.v[0 .. this). A level that ran
 * again within noise pooled its runs, and repeats of one seed draw the
 * same prompts, sizes and arrivals: they are not independent draws, and
 * resampling the pool as if they were makes its intervals too narrow. */
size_t load_cmp_first_run(const struct load_level *lv);

/* Prints the comparison of a (the base) and b to out. Each matched
 * level's workload (mode, concurrency or rate, arrivals, seed, prompt and
 * output lengths; the target, dialect and model) is checked first, and
 * each difference printed; unless o->allow_different, a difference
 * refuses the comparison (LOAD_CMP_DIFFERENT). Returns 0 when no rule
 * failed, 1 when one did, -1 when no level of a matches one of b or
 * memory ran out (said on out). names: how to call them ("A.json"). */
int load_compare(FILE *out, const struct load_result *a, const char *aname,
    const struct load_result *b, const char *bname, const struct load_cmp_opts *o);

#endif
