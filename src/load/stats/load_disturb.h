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
 * is over LOAD_DISTURB_SHARE of the tightest whole-request latency
 * target's limit (TTFT, TTFO, E2E: timed from a request's due time, they
 * hold the lateness whole; at that share a percentile near its limit can
 * be pushed across it by the generator alone), unless the run missed a
 * target the lateness cannot explain: an error rate, a TPOT or ITL (a
 * request's own differences), or a latency missed by more than the
 * lateness (an overload: a p95 of 1,157 ms with the generator 197 ms
 * late). A run met while the generator was late is disturbed too: its
 * samples hold the generator's time, and setting aside only the misses
 * near the limit would keep the best of the runs and bias a capacity
 * up; this way a set-aside only ever biases it down. A run with no
 * whole-request latency target is never disturbed. Pure. */
#ifndef TOKENTAP_LOAD_DISTURB_H
#define TOKENTAP_LOAD_DISTURB_H

#include "load_slo.h"
#include "loadstats.h"

#define LOAD_DISTURB_SHARE 0.10
/* runs a level sets aside at most, whatever its repeats; past them a
 * disturbed run is kept and the level left undecided */
#define LOAD_DISTURB_MAX_ASIDE 3

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
