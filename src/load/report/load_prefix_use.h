/* SPDX-License-Identifier: Apache-2.0 */
/* --prefixes in a level's report: each request's prefix (load_prefix.h's
 * draw, recomputed from the level's parameters and the request's number)
 * and whether it was the first of its level to use that prefix (the
 * smallest number, the first sent, warm-up requests included): a cold
 * prefix for a server with a prefix cache, every other a repeat that may
 * find it cached. TTFT is split by the two, over the measured requests
 * with a first token. A level run again (a capacity level within noise)
 * draws the same prefixes: its later runs' first uses count as first
 * uses, though a server may hold them from the run before. Pure. */
#ifndef TOKENTAP_LOAD_PREFIX_USE_H
#define TOKENTAP_LOAD_PREFIX_USE_H

#include <stddef.h>
#include <stdint.h>

#include "load_result.h"
#include "load_summary.h"

struct load_prefix_use {
	size_t n;                    /* samples (lv->st.n); 0: no --prefixes */
	uint32_t *prefix;            /* by sample */
	uint8_t *first;              /* by sample: first use of its prefix */
	uint32_t used;               /* distinct prefixes used */
	struct load_dist ttft[2];    /* ms: [0] first uses, [1] repeats */
};

/* Fills u for lv at the percentiles p. Returns 0, or -1 (out of memory). */
int load_prefix_use_of(const struct load_level *lv, const struct load_pcts *p,
    struct load_prefix_use *u);
void load_prefix_use_free(struct load_prefix_use *u);

#endif
