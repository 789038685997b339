/* SPDX-License-Identifier: Apache-2.0 */
#include "load_shard.h"

#include <errno.h>
#include <stdlib.h>

int load_shard_parse(const char *s, uint32_t *index, uint32_t *count,
    const char **err)
{
	unsigned long long i, n;
	char *end;

	*err = "I/N expected: the shard's number from 0 and the shard count "
	    "(0/3, 1/3, 2/3)";
	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	i = strtoull(s, &end, 10);
	if (errno != 0 || *end != '/' || end[1] < '0' || end[1] > '9')
		return -1;
	n = strtoull(end + 1, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	if (n == 0 || n > LOAD_SHARD_MAX) {
		*err = "N from 1 to 4096 shards";
		return -1;
	}
	if (i >= n) {
		*err = "I from 0 to N - 1 (the shards of 3 are 0/3, 1/3 and 2/3)";
		return -1;
	}
	*index = (uint32_t)i;
	*count = (uint32_t)n;
	return 0;
}

uint64_t load_shard_seq(uint64_t k, uint32_t i, uint32_t n)
{
	return n == 0 ? k : k * n + i;
}

int load_shard_mine(uint64_t seq, uint32_t i, uint32_t n)
{
	return n == 0 || seq % n == i;
}

uint64_t load_shard_share(uint64_t from, uint64_t count, uint32_t i, uint32_t n)
{
	uint64_t first, end = from + count;

	if (n == 0)
		return count;
	/* the first seq >= from that is i modulo n */
	first = from + (i + n - from % n) % n;
	return first >= end ? 0 : (end - 1 - first) / n + 1;
}

uint64_t load_shard_rng(uint64_t seed, uint64_t seq)
{
	/* salted: the open loop's arrivals draw from the seed itself, and
	 * splitmix64's stream from it passes through seed + k x its increment */
	uint64_t z = (seed ^ 0xD1B54A32D192ED03ull) + (seq + 1) * 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}
