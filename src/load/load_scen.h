/* SPDX-License-Identifier: Apache-2.0 */
/* Scenario files of tokentap-load: a YAML list of runs, each with targets
 * (a quantile of TTFT / TPOT / ITL under a duration, the error rate under
 * a fraction, TTFT or TPOT at most so much worse than a baseline scenario's)
 * that decide whether it passed. Read with libyaml; every problem found is
 * reported as FILE:LINE:COL: message (LINE and COL from 1). */
#ifndef TOKENTAP_LOAD_SCEN_H
#define TOKENTAP_LOAD_SCEN_H

#include <stdio.h>

#include "load_conf.h"
#include "loadstats.h"

#define LOAD_SCEN_MAX_TARGETS 32

enum load_metric { LOAD_M_TTFT, LOAD_M_TPOT, LOAD_M_ITL, LOAD_M_ERROR_RATE };

enum load_stat {
	LOAD_S_P50, LOAD_S_P90, LOAD_S_P95, LOAD_S_P99, LOAD_S_MEAN, LOAD_S_MAX,
	LOAD_S_RATE,          /* error_rate */
	LOAD_S_DEGRADATION    /* relative to the baseline: TTFT p95, TPOT p50 */
};

struct load_target {
	char name[24];        /* as written: "ttft_p95" */
	enum load_metric metric;
	enum load_stat stat;
	double limit;         /* µs for quantiles, mean and max; else a fraction */
};

struct load_scenario {
	char *name;
	int baseline;         /* index of an earlier scenario, or -1 */
	struct load_conf conf;
	struct load_target targets[LOAD_SCEN_MAX_TARGETS];
	size_t ntargets;
};

struct load_scen_file {
	struct load_scenario *v;
	size_t n;
};

/* Reads the scenarios of path. Each starts from base (the command line's
 * settings), then the file's top-level keys, then its own; but when
 * url_fixed the command line's URL wins over any "target". Problems go to
 * err. Returns 0, or -1 (f left empty). */
int load_scen_read(const char *path, const struct load_conf *base, int url_fixed,
    struct load_scen_file *f, FILE *err);
void load_scen_free(struct load_scen_file *f);
/* The index of the scenario called name, or -1. */
int load_scen_find(const struct load_scen_file *f, const char *name);

/* The figure target t compares, from a run's statistics and (for
 * degradation targets) its baseline's: µs, or a fraction. Returns 0, or -1
 * when it is undefined (no samples, no baseline). */
int load_scen_value(const struct load_target *t, const struct loadstats *st,
    const struct loadstats *baseline, double *value);
/* The per-request targets of goodput (a request counts when it is ok and
 * within them, as vLLM's --goodput): for TTFT and TPOT, the largest limit
 * of the scenario's targets of that metric (quantiles, mean, max); none
 * where it has none. */
void load_scen_goodput(const struct load_scenario *sc, struct goodput_targets *out);
/* 1 when value meets t (is at most its limit). */
int load_scen_met(const struct load_target *t, double value);
/* Formats a target's limit or a value of it for people ("500.0 ms", "20.0 %"). */
void load_scen_format(const struct load_target *t, double v, char *out,
    size_t len);

#endif
