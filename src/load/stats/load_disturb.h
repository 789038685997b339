/* SPDX-License-Identifier: Apache-2.0 */
/* Whether a run of a capacity search's level is evidence about the target
 * or about the generator. Every figure the client measures holds its own
 * lateness: a request sent late (dispatch lag) or a read the loop came to
 * late (its timer's slip, or tokentap-mock's stamps with --lag) adds to a
 * TTFT what the target never did. On a host shared with other work a
 * stall of the generator (seen: dispatch lag to 210 ms beside a load
 * average of 16 on two CPUs) made a level at 96 % of the slots' rate read
 * a p95 of 165 ms against a model's 85, and miss.
 *
 * A run is disturbed when the generator's lateness over it, at p95 (the
 * larger of the measured requests' dispatch lag and the read lateness),
 * is over LOAD_DISTURB_SHARE of the tightest latency target's limit (at
 * that share a percentile read near its limit can be pushed across it by
 * the generator alone) and the run missed its targets by no more than
 * that lateness: each target it missed is a latency one whose figure,
 * less the lateness, is within its limit. Lateness only ever adds to a
 * latency (a request sent late is timed from when it was due, and a
 * stall's catch-up sends in a burst), so a run met is met still, and a
 * run missed by more than the generator's lateness is missed by the
 * target. A run with no latency target is never disturbed. Pure. */
#ifndef TOKENTAP_LOAD_DISTURB_H
#define TOKENTAP_LOAD_DISTURB_H

#include "load_slo.h"
#include "loadstats.h"

#define LOAD_DISTURB_SHARE 0.10

/* The lateness (ms) over which a run is disturbed; NaN: no latency
 * target. */
double load_disturb_bound(const struct load_slo *slo);
/* The generator's lateness (ms) over a run at p95: the larger of its
 * measured requests' dispatch lag and read_late_p95_ms (NaN: unknown). */
double load_disturb_late(const struct loadstats *st, double read_late_p95_ms);
/* Whether a run whose own figures are one, the generator late by late
 * ms over it, is disturbed (the rule above). */
int load_disturb_run(const struct load_slo *slo, const struct load_slo_result *one,
    double late);

#endif
