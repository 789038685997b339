/* SPDX-License-Identifier: Apache-2.0 */
/* Conversations in a level's report (--turns, --sessions, --sharegpt):
 * the figures of each turn index over the measured requests, so that
 * turn 1 (a cold prompt) stands beside turn K (the history a prefix
 * cache may hold): requests, ok, the prompt asked for (its mean, the
 * history's growth), TTFT and TPOT of the ok requests. Pure. */
#ifndef TOKENTAP_LOAD_TURNS_H
#define TOKENTAP_LOAD_TURNS_H

#include <stddef.h>
#include <stdint.h>

#include "load_result.h"
#include "load_summary.h"

struct load_turns_row {
	uint32_t turn;               /* from 1 */
	uint64_t requests, ok;
	double prompt_tokens;        /* mean asked for; NaN: none */
	struct load_dist ttft, tpot; /* ms */
};

struct load_turns {
	struct load_turns_row *v;    /* by turn, 1 to n; n 0: no conversation */
	size_t n;
	uint64_t sessions;           /* sessions with a measured turn */
};

/* Fills t for lv at the percentiles p. Returns 0, or -1 (out of memory). */
int load_turns_of(const struct load_level *lv, const struct load_pcts *p,
    struct load_turns *t);
void load_turns_free(struct load_turns *t);

#endif
