/* SPDX-License-Identifier: Apache-2.0 */
/* The one rule that says whether a request met its latency targets (an
 * SLO's in tokentap, a scenario's in tokentap-load): goodput counts the
 * requests it calls good, DistServe's "requests that meet both the TTFT
 * and the TPOT target", as vLLM's --goodput does. Pure.
 *
 * A target is one more entry of enum goodput_target: a first-output kind
 * (TTFT, TTFO: the first token that is not reasoning) waits for something
 * to arrive, a pace kind (TPOT) only judges what did. */
#ifndef TOKENTAP_GOODPUT_H
#define TOKENTAP_GOODPUT_H

#include <stdint.h>

#include "meter.h"

enum goodput_target { GOODPUT_TTFT, GOODPUT_TPOT, GOODPUT_TTFO, GOODPUT_TARGETS };

enum goodput_verdict { GOODPUT_GOOD, GOODPUT_BAD, GOODPUT_UNCOUNTED };

/* Limits in µs; 0: no such target. */
struct goodput_targets {
	uint64_t us[GOODPUT_TARGETS];
};

/* What a finished request showed: each target's figure in µs, -1 where
 * undefined (no token yet, TPOT with fewer than two tokens). */
struct goodput_request {
	enum meter_outcome outcome;
	int64_t value_us[GOODPUT_TARGETS];
	int64_t duration_us;     /* t_end - the start the figures run from:
	                          * t0 (tokentap-load's send), t_req (tokentap's
	                          * SLOs: the server side's); 0: none */
};

/* "ttft", "tpot", "ttfo": the config key and the JSON name (with "_ms"). */
const char *goodput_target_name(enum goodput_target t);
/* 1 when any target is set. */
int goodput_any(const struct goodput_targets *t);

/* Good: outcome ok and every target met (a pace figure that is undefined
 * meets its target; an ok response with no first output, not a stream,
 * took its duration to give it). A client's outcome (client_abort,
 * client_timeout) is judged on what had happened when the client left or
 * was let go: bad when a target had already been missed (a first output
 * later than its target, or, for client_abort, none while the target
 * passed: they gave up waiting), else not counted (they left before we
 * could fail them; a client_timeout's wait was its own slowness). Any
 * other outcome is bad. */
enum goodput_verdict goodput_judge(const struct goodput_targets *t,
    const struct goodput_request *r);

#endif
