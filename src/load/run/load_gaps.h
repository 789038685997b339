/* SPDX-License-Identifier: Apache-2.0 */
/* A request's gaps between token chunks, as its connection collects them
 * for the ITL figures: every one up to LOAD_GAPS_MAX, exact; past that a
 * uniform sample of LOAD_GAPS_MAX of them (Vitter's algorithm R), so that
 * a stream of 16 M one-token events takes 256 KiB, not 96 MB. Such a
 * request weighs LOAD_GAPS_MAX gaps in its level's ITL distribution; its
 * itl_max (the meter's) stays exact. Pure: no I/O, no clock. */
#ifndef TOKENTAP_LOAD_GAPS_H
#define TOKENTAP_LOAD_GAPS_H

#include <stddef.h>
#include <stdint.h>

#define LOAD_GAPS_MAX 65536

struct load_gaps {
	uint32_t *v;                 /* the gaps kept (µs), n of them */
	size_t n, cap;
	uint64_t seen;               /* every gap offered */
	uint64_t rng;
};

void load_gaps_init(struct load_gaps *g, uint64_t seed);
/* Empty, for the next request (the memory is kept). */
void load_gaps_reset(struct load_gaps *g);
/* One gap: kept, or in the sample's place of another, or not (memory ran
 * out: a gap less in the figures, not a failure). */
void load_gaps_add(struct load_gaps *g, uint64_t gap_us);
void load_gaps_free(struct load_gaps *g);

#endif
