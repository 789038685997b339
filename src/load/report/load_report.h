/* SPDX-License-Identifier: Apache-2.0 */
/* What tokentap-load prints for people: a single run's figures in detail,
 * a sweep's or a capacity search's levels one a row, the capacity found,
 * the generator's warnings, and with --tokentap the client's TTFT and
 * TPOT beside tokentap's. The same figures as the JSON (load_json.h). */
#ifndef TOKENTAP_LOAD_REPORT_H
#define TOKENTAP_LOAD_REPORT_H

#include <stdio.h>

#include "load_result.h"

void load_report_table(FILE *f, const struct load_result *r);
/* One level in detail (a single run, a scenario). */
void load_report_level(FILE *f, const struct load_result *r,
    const struct load_level *lv);
/* A level's measured errors that had an answer, by its HTTP status. */
#define LOAD_REPORT_STATUSES 16
struct load_status_count {
	unsigned status;
	uint64_t n;
};
/* Fills v (ascending by status, at most LOAD_REPORT_STATUSES; rarer ones
 * beyond are left out) from the level's samples; returns how many. A
 * document read back without its samples has none. */
size_t load_report_error_statuses(const struct load_level *lv,
    struct load_status_count v[LOAD_REPORT_STATUSES]);
/* How late the generator may read before it warns (ms): 1 ms, or 5 % of
 * the tightest latency target of r's SLO when that is more (*target its
 * index, else -1). */
double load_report_read_late_limit(const struct load_result *r, int *target);
/* The level's reads ran later than that at p99. */
int load_report_read_late(const struct load_result *r, const struct load_level *lv);
/* Dispatch lag matters when its p99 is a share of the TTFT: over 1 ms,
 * and over 5 % of the tightest TTFT, TTFO or end-to-end target (*target
 * its index), or without one of the level's TTFT p50 (*target -1). */
#define LOAD_REPORT_LAG_MS 1.0
#define LOAD_REPORT_LAG_SHARE 0.05
double load_report_lag_limit(const struct load_result *r, const struct load_level *lv,
    int *target);
/* The level's dispatch lag at p99 (ms). */
double load_report_lag_p99(const struct load_result *r, const struct load_level *lv);
/* The level whose lag is over its limit by the most, or NULL: the one
 * warning of an invocation. */
const struct load_level *load_report_lag_worst(const struct load_result *r);
/* A TTFT drift whose fit explains less of TTFT's variance than this is
 * called no trend: a slope through a few seconds' noise. */
#define LOAD_REPORT_TREND_R2 0.25
/* A sweep ran every level it was given (no saturation, error or stop
 * ended it): where no level saturated, there is no knee to name. */
int load_report_sweep_all_ran(const struct load_result *r);
/* A sweep's SLO capacity: the last level met before the first missed,
 * or -1 (the first missed, or no SLO). */
int load_report_sweep_capacity(const struct load_result *r);
/* Goodput and attainment of a level: one line; nothing without targets. */
void load_report_goodput_line(FILE *f, const struct load_level *lv);

#endif
