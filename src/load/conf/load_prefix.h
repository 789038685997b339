/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-load --prefixes P --prefix-tokens L --prefix-dist DIST: the
 * shared-prefix workload prefix caches are built for (N system prompts
 * shared by M users; vLLM's automatic prefix caching, SGLang's radix
 * cache). Each request draws one of P prefixes of L tokens from DIST
 * (uniform, or zipf:S: prefix k, from 0, with weight 1 / (k + 1)^S),
 * put before its own prompt. The draw is a pure function of the seed,
 * the level and the request's number in it, so a report can tell each
 * request's prefix from its sample, and which request used a prefix
 * first in its level. Each level has prefixes of its own (their text
 * seeded by the level's load), so no level finds the one before it in
 * a server's cache. Pure. */
#ifndef TOKENTAP_LOAD_PREFIX_H
#define TOKENTAP_LOAD_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#include "load_conf.h"

#define LOAD_PREFIX_MAX 1000000u

/* "uniform" (*zipf = 0) or "zipf:S", S a number above 0 up to 10.
 * Returns 0, or -1 with *err naming the problem. */
int load_prefix_parse_dist(const char *s, double *zipf, const char **err);
/* The distribution's name for people and the JSON: "uniform", "zipf:1.1". */
void load_prefix_dist_name(double zipf, char *buf, size_t len);

/* The cumulative weights of c's P prefixes. */
struct load_prefix_dist {
	double *cdf;                 /* P, the last 1; NULL: uniform */
	uint32_t n;
	uint64_t salt;               /* the level's: its load's hash and the seed */
};

/* For c (c->prefixes > 0). Returns 0 or -1 (out of memory). */
int load_prefix_dist_init(struct load_prefix_dist *d, const struct load_conf *c);
void load_prefix_dist_free(struct load_prefix_dist *d);
/* The prefix of request seq, in [0, P). */
uint32_t load_prefix_pick(const struct load_prefix_dist *d, uint64_t seq);
/* The seed of prefix k's text (plain words, 4 characters a token). */
uint64_t load_prefix_text_seed(const struct load_prefix_dist *d, uint32_t k);

#endif
