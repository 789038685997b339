/* SPDX-License-Identifier: Apache-2.0 */
#include "rng.h"

#include <sys/random.h>

#include "util.h"

/* Vigna's splitmix64.c: a Weyl sequence through a 64-bit mixer. */
uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double rng_unit(uint64_t *state)
{
	return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

double rng_unit_open(uint64_t *state)
{
	return ((double)(rng_next(state) >> 11) + 0.5) * 0x1.0p-53;
}

/* A seed from the kernel, else from the clock. */
uint64_t rng_seed(void)
{
	uint64_t s = 0;

	if (getrandom(&s, sizeof s, 0) != sizeof s)
		s = util_now_us();
	return s;
}
