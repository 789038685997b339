/* SPDX-License-Identifier: Apache-2.0 */
#include "load_prefix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

int load_prefix_parse_dist(const char *s, double *zipf, const char **err)
{
	char *end;
	double v;

	if (strcmp(s, "uniform") == 0) {
		*zipf = 0;
		return 0;
	}
	if (strncmp(s, "zipf:", 5) != 0) {
		*err = "expected uniform or zipf:S";
		return -1;
	}
	v = strtod(s + 5, &end);
	if (end == s + 5 || *end != '\0' || !(v > 0) || v > 10) {
		*err = "zipf:S wants S above 0, up to 10";
		return -1;
	}
	*zipf = v;
	return 0;
}

void load_prefix_dist_name(double zipf, char *buf, size_t len)
{
	if (zipf > 0)
		snprintf(buf, len, "zipf:%g", zipf);
	else
		snprintf(buf, len, "uniform");
}

/* splitmix64's finaliser: a hash of x. */
static uint64_t mix(uint64_t x)
{
	uint64_t s = x;

	return rng_next(&s);
}

/* The level's load: what tells a sweep's levels apart. */
static uint64_t salt_of(const struct load_conf *c)
{
	uint64_t h = mix(c->seed ^ 0x70726566697865ull);

	h = mix(h ^ c->concurrency);
	/* the rate as a saved document has it (4 decimals), so a report
	 * read back from one recomputes the same draws */
	h = mix(h ^ (uint64_t)llround(c->rate * 1e4));
	h = mix(h ^ ((uint64_t)c->prompt_tokens.min << 32 | c->prompt_tokens.max));
	h = mix(h ^ ((uint64_t)c->max_tokens.min << 32 | c->max_tokens.max));
	h = mix(h ^ ((uint64_t)c->prefixes << 32 | c->prefix_tokens));
	return mix(h ^ (uint64_t)llround(c->prefix_zipf * 1e6));
}

int load_prefix_dist_init(struct load_prefix_dist *d, const struct load_conf *c)
{
	double sum = 0;

	memset(d, 0, sizeof *d);
	d->n = c->prefixes > 0 ? c->prefixes : 1;
	d->salt = salt_of(c);
	if (!(c->prefix_zipf > 0))
		return 0;
	d->cdf = malloc(d->n * sizeof *d->cdf);
	if (d->cdf == NULL)
		return -1;
	for (uint32_t k = 0; k < d->n; k++)
		d->cdf[k] = sum += pow((double)k + 1, -c->prefix_zipf);
	for (uint32_t k = 0; k < d->n; k++)
		d->cdf[k] /= sum;
	d->cdf[d->n - 1] = 1;
	return 0;
}

void load_prefix_dist_free(struct load_prefix_dist *d)
{
	free(d->cdf);
	d->cdf = NULL;
}

uint32_t load_prefix_pick(const struct load_prefix_dist *d, uint64_t seq)
{
	uint64_t s = d->salt ^ mix(seq ^ 0x9e3779b97f4a7c15ull);
	double u = rng_unit(&s);
	uint32_t lo = 0, hi;

	if (d->cdf == NULL) {
		uint32_t k = (uint32_t)(u * d->n);
		return k < d->n ? k : d->n - 1;
	}
	/* the first k whose cumulative weight is above u */
	hi = d->n - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (d->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

uint64_t load_prefix_text_seed(const struct load_prefix_dist *d, uint32_t k)
{
	return mix(d->salt ^ mix((uint64_t)k + 1));
}
