/* SPDX-License-Identifier: Apache-2.0 */
/* Coarse log histograms for summaries kept per request or per stream,
 * where a struct hist (16 KiB) would not fit: 4 buckets per octave of µs
 * (a bucket's middle is within 12 % of any value in it), 16-bit counts
 * that saturate. Recording is a few instructions and never allocates:
 * fit for the per-event and per-read paths. The caller owns the array
 * and its length n; values past the last bucket go into it. */
#ifndef TOKENTAP_LHIST_H
#define TOKENTAP_LHIST_H

#include <stdint.h>

/* Buckets up to 2^bits µs: 4 per octave from 4 µs, one each below. */
#define LHIST_LEN(bits) (4 * ((bits) - 1))

static inline unsigned lhist_index(uint64_t v, unsigned n)
{
	unsigned msb, i;

	if (v < 4)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	i = 4 * (msb - 1) + (unsigned)((v >> (msb - 2)) & 3);
	return i < n ? i : n - 1;
}

static inline void lhist_add(uint16_t *h, unsigned n, uint64_t v)
{
	uint16_t *b = &h[lhist_index(v, n)];

	*b += *b != UINT16_MAX;
}

/* The lowest value of bucket i, and the one past its highest. */
uint64_t lhist_lo(unsigned i);
uint64_t lhist_hi(unsigned i);
/* The middle of bucket i: what a value in it is taken for. */
double lhist_mid(unsigned i);
/* The values recorded. */
uint64_t lhist_count(const uint16_t *h, unsigned n);
/* The middle of the bucket holding the median, or -1 when empty. */
int64_t lhist_median(const uint16_t *h, unsigned n);

#endif
