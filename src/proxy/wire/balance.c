/* SPDX-License-Identifier: Apache-2.0 */
#include "balance.h"

#include <math.h>

#include "rng.h"
#include "util.h"

uint64_t balance_key(const char *s, size_t len)
{
	/* FNV's low bits are weak for short keys: one splitmix64 step mixes */
	uint64_t st = util_fnv(UTIL_FNV_INIT, s, len);
	return rng_next(&st);
}

/* The candidate whose cumulative weight range holds pos (< total). */
static size_t by_weight(const struct balance_cand *c, size_t n, uint64_t pos)
{
	size_t i = 0;
	for (; i + 1 < n; i++) {
		if (pos < c[i].weight)
			break;
		pos -= c[i].weight;
	}
	return i;
}

static uint64_t total_weight(const struct balance_cand *c, size_t n)
{
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++)
		t += c[i].weight;
	return t;
}

long balance_least(const struct balance_cand *c, size_t n, uint64_t *rng)
{
	uint64_t t = total_weight(c, n), rest, pos;
	size_t a, b;

	if (n == 0)
		return -1;
	if (n == 1 || t == 0)
		return 0;
	a = by_weight(c, n, rng_next(rng) % t);
	/* the second draw among the others, by their weights */
	rest = t - c[a].weight;
	if (rest == 0)
		return (long)a;
	pos = rng_next(rng) % rest;
	for (b = 0; b < n; b++) {
		if (b == a)
			continue;
		if (pos < c[b].weight)
			break;
		pos -= c[b].weight;
	}
	if (b == n)
		b = (a + 1) % n;
	/* fewer open streams per unit of weight: load_b / w_b < load_a / w_a;
	 * on a tie, the heavier one */
	if (c[b].load * c[a].weight < c[a].load * c[b].weight)
		return (long)b;
	if (c[b].load * c[a].weight == c[a].load * c[b].weight && c[b].weight > c[a].weight)
		return (long)b;
	return (long)a;
}

long balance_round_robin(const struct balance_cand *c, size_t n, uint64_t ticket)
{
	uint64_t t = total_weight(c, n);

	if (n == 0)
		return -1;
	if (t == 0)
		return (long)(ticket % n);
	return (long)by_weight(c, n, ticket % t);
}

/* Weighted rendezvous hashing (Schindelhauer and Schomaker): each
 * candidate scores -w / ln(u), u uniform in (0, 1) from hash(key, id); the
 * highest wins. Equal weights make it plain highest-random-weight. */
long balance_hash(const struct balance_cand *c, size_t n, uint64_t key)
{
	long best = -1;
	double best_score = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t st = key ^ c[i].id;
		double u = rng_unit_open(&st);
		double score = -(double)(c[i].weight ? c[i].weight : 1) / log(u);
		if (best < 0 || score > best_score) {
			best = (long)i;
			best_score = score;
		}
	}
	return best;
}
