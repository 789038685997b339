/* SPDX-License-Identifier: Apache-2.0 */
/* --calibrate N: before the first level, N requests (the first of them the
 * pre-flight) at the run's own prompt sizes and at most -c at once, each
 * asking for one output token (only the prompt's count is wanted), size
 * the synthetic prompts of every level in the target's own tokens: the
 * ratio of load_psize.h, from the bytes they sent at 4 a token over the
 * prompt tokens the target reported for them. A target that reports no
 * count leaves the sizes estimates at 4 bytes a token, and says so. */
#ifndef TOKENTAP_LOAD_CALIB_H
#define TOKENTAP_LOAD_CALIB_H

#include <stdint.h>

#include "load_conf.h"
#include "load_levels.h"
#include "load_psize.h"

/* Calibrates c (its bytes_per_token set when the target counted) with n
 * requests whose prompt sizes are drawn from sizes, or NULL for the
 * conf's (a trace's: its range). Fills out. Returns 0, or -1 when no
 * ratio came of it (the sizes stay estimates; a warning said why). */
int load_calib(struct load_env *e, struct load_conf *c, uint32_t n,
    const struct load_range *sizes, struct load_psize *out);

#endif
