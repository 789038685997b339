/* SPDX-License-Identifier: Apache-2.0 */
#include "lhist.h"

uint64_t lhist_lo(unsigned i)
{
	unsigned e;

	if (i < 4)
		return i;
	e = i / 4 + 1;
	return (1ull << e) + (uint64_t)(i % 4) * (1ull << (e - 2));
}

uint64_t lhist_hi(unsigned i)
{
	return lhist_lo(i + 1);
}

double lhist_mid(unsigned i)
{
	if (i < 4)
		return i;
	return ((double)lhist_lo(i) + (double)lhist_hi(i)) / 2;
}

uint64_t lhist_count(const uint16_t *h, unsigned n)
{
	uint64_t c = 0;

	for (unsigned i = 0; i < n; i++)
		c += h[i];
	return c;
}

int64_t lhist_median(const uint16_t *h, unsigned n)
{
	uint64_t total = lhist_count(h, n), seen = 0;

	if (total == 0)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		seen += h[i];
		if (2 * seen >= total)
			return (int64_t)lhist_mid(i);
	}
	return -1;
}
