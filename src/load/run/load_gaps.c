/* SPDX-License-Identifier: Apache-2.0 */
#include "load_gaps.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h"

void load_gaps_init(struct load_gaps *g, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	g->rng = seed;
}

void load_gaps_reset(struct load_gaps *g)
{
	g->n = 0;
	g->seen = 0;
}

void load_gaps_add(struct load_gaps *g, uint64_t gap_us)
{
	uint32_t v = gap_us > UINT32_MAX ? UINT32_MAX : (uint32_t)gap_us;
	uint64_t k = g->seen++;

	if (k >= LOAD_GAPS_MAX) {
		/* the k-th gap (from 0) takes a place with chance MAX / (k + 1) */
		uint64_t j = rng_next(&g->rng) % (k + 1);
		if (j < LOAD_GAPS_MAX && j < g->n)
			g->v[j] = v;
		return;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 256;
		uint32_t *p = realloc(g->v, cap * sizeof(*p));
		if (p == NULL)
			return;
		g->v = p;
		g->cap = cap;
	}
	g->v[g->n++] = v;
}

void load_gaps_free(struct load_gaps *g)
{
	free(g->v);
	memset(g, 0, sizeof(*g));
}
