/* SPDX-License-Identifier: Apache-2.0 */
#include "hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The index math below relies on these; a layout change that breaks them
 * must fail the build, not skew the quantiles. */
_Static_assert(HIST_SUB_BITS >= 1 && HIST_SUB_BITS < HIST_TOP_BITS, "bad layout");
/* hist_count_le multiplies a 32-bit bucket count by a bucket width. */
_Static_assert(HIST_TOP_BITS - HIST_SUB_BITS - 1 <= 32, "top bucket too wide");
_Static_assert(HIST_MAX_US < (1ull << HIST_TOP_BITS), "1 h must not be clamped");
_Static_assert(HIST_BUCKETS == HIST_SUB * (HIST_TOP_BITS - HIST_SUB_BITS + 1),
    "HIST_BUCKETS does not match the layout");

#define HIST_TOP (1ull << HIST_TOP_BITS)

/*
 * Bucket i, band b = i >> HIST_SUB_BITS:
 *   b 0 and 1: the single value i (0 .. 2*HIST_SUB-1);
 *   b >= 2:    HIST_SUB buckets of width w = 2^(b-1) covering
 *              [HIST_SUB * w, 2 * HIST_SUB * w),
 * so value v lands in (s << HIST_SUB_BITS) + (v >> s), where
 * s = msb(v) - HIST_SUB_BITS is log2 of its bucket's width.
 * OR-ing HIST_SUB in keeps clz defined for 0 and makes s 0 for the exact
 * range, so one formula covers every value without a branch: hist_bucket
 * (hist.h, inline for the callers that count by bucket themselves).
 */

/* Lowest value of bucket i; *shift gets log2 of its width. */
static uint64_t hist_bucket_lo(unsigned i, unsigned *shift)
{
	unsigned band = i >> HIST_SUB_BITS;

	if (band == 0) {
		*shift = 0;
		return i;
	}
	*shift = band - 1;
	return (uint64_t)(HIST_SUB + (i & (HIST_SUB - 1))) << *shift;
}

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

/* Hot path: called once per token. An all-zero struct is a valid empty
 * histogram, hence min is taken from the first value rather than from a
 * UINT64_MAX sentinel. */
void hist_record(struct hist *h, uint64_t us)
{
	h->buckets[hist_bucket(us)]++;
	h->sum += us;
	if (us > h->max)
		h->max = us;
	if (us < h->min || h->count == 0)
		h->min = us;
	h->count++;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	size_t i;

	if (src->count == 0)
		return;
	if (dst->count == 0 || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
	dst->sum += src->sum;
	for (i = 0; i < HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
}

/*
 * Rank ceil(q * count), 1-based. q * count is computed in binary floating
 * point, so 0.07 * 100 comes out as 7.000000000000001 and a plain ceil
 * would skip to rank 8; shaving a relative 1e-12 off absorbs that rounding
 * without moving any rank a real fraction would give.
 */
static uint64_t hist_rank(double q, uint64_t count)
{
	double x = q * (double)count;
	double r = ceil(x - x * 1e-12);

	if (r < 1)
		return 1;
	if (r >= (double)count)
		return count;
	return (uint64_t)r;
}

/*
 * The midpoint of the bucket holding the value of rank ceil(q * count),
 * clamped into [min, max]: for a value v >= 2*HIST_SUB in a bucket of width
 * w, v >= HIST_SUB * w, so the midpoint is within (w-1)/2 / (HIST_SUB*w)
 * < 1/(2*HIST_SUB) of v, and clamping only moves it closer. q <= 0 (and
 * NaN) gives min, q >= 1 gives max, both exact.
 */
/* What a quantile of bucket i reads as: its midpoint within [min, max]. */
static double bucket_value(unsigned i, uint64_t min, uint64_t max)
{
	unsigned shift;
	double mid = (double)hist_bucket_lo(i, &shift) + (double)((1ull << shift) - 1) / 2;

	if (mid < (double)min)
		return (double)min;
	if (mid > (double)max)
		return (double)max;
	return mid;
}

double hist_quantile(const struct hist *h, double q)
{
	uint64_t rank, seen = 0;
	unsigned i;

	if (h->count == 0)
		return 0;
	if (!(q > 0))
		return (double)h->min;
	if (q >= 1)
		return (double)h->max;
	rank = hist_rank(q, h->count);
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank)
			break;
	}
	/* Only a wrapped 32-bit bucket counter can leave rank unreached. */
	if (i == HIST_BUCKETS)
		return (double)h->max;
	return bucket_value(i, h->min, h->max);
}

double hist_mean(const struct hist *h)
{
	if (h->count == 0)
		return 0;
	return (double)h->sum / (double)h->count;
}

/*
 * Every value of the buckets lying wholly at or below us, plus the share of
 * the bucket containing us that its integer values lo..us make up, assuming
 * the bucket's values are spread evenly: floor(n * (us - lo + 1) / width).
 * So it is exact for us below 2*HIST_SUB and at every bucket's upper edge
 * (lo + width - 1), never off by more than the one bucket's count elsewhere,
 * and monotone in us. us < min gives 0 and us >= max gives count, both
 * exact. Values clamped into the top bucket count as <= 2^HIST_TOP_BITS - 1.
 */
uint64_t hist_count_le(const struct hist *h, uint64_t us)
{
	uint64_t total = 0, lo;
	unsigned i, last, shift;

	if (h->count == 0 || us < h->min)
		return 0;
	if (us >= h->max)
		return h->count;
	last = hist_bucket(us);
	for (i = 0; i < last; i++)
		total += h->buckets[i];
	lo = hist_bucket_lo(last, &shift);
	if (us >= HIST_TOP)
		return total + h->buckets[last];
	/* Fits in 64 bits: see the static assertion on the top width. */
	return total + (((uint64_t)h->buckets[last] * (us - lo + 1)) >> shift);
}

/* ---- sparse --------------------------------------------------------------- */

/* The entry of bucket idx, inserted if new; -1 when memory ran out. */
static int64_t sparse_slot(struct hist_sparse *h, unsigned idx)
{
	struct hist_sparse_entry *e = hist_sparse_entries(h);
	uint32_t lo = 0, hi = h->n;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (e[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < h->n && e[lo].idx == idx)
		return lo;
	if (h->cap == 0 && h->n == 1) {   /* the entry kept in place moves out */
		if ((e = malloc(4 * sizeof *e)) == NULL)
			return -1;
		e[0] = h->u.one;
		h->u.e = e;
		h->cap = 4;
	}
	if (h->cap == 0) {                /* the first: in place */
		h->n = 1;
	} else {
		if ((e = util_array_open(h->u.e, &h->n, &h->cap, sizeof *e, lo, 4)) == NULL)
			return -1;
		h->u.e = e;
	}
	e[lo].idx = (uint16_t)idx;
	e[lo].count = 0;
	return lo;
}

/* count values from min to max summing to sum were added to the buckets */
static void sparse_totals(struct hist_sparse *h, uint64_t count, uint64_t sum,
    uint64_t min, uint64_t max)
{
	if (h->count == 0 || min < h->min)
		h->min = min;
	if (max > h->max)
		h->max = max;
	h->count += count;
	h->sum += sum;
}

/* n values of us */
static int sparse_add(struct hist_sparse *h, uint64_t us, uint32_t n)
{
	int64_t at = sparse_slot(h, hist_bucket(us));

	if (at < 0)
		return -1;
	hist_sparse_entries(h)[at].count += n;
	sparse_totals(h, n, us * n, us, us);
	return 0;
}

int hist_sparse_record(struct hist_sparse *h, uint64_t us)
{
	return sparse_add(h, us, 1);
}

int hist_sparse_record_n(struct hist_sparse *h, uint64_t us, uint32_t n)
{
	return n == 0 ? 0 : sparse_add(h, us, n);
}

int hist_sparse_add_counts(struct hist_sparse *h, const uint32_t *counts,
    const uint16_t *used, unsigned n_used, uint64_t count, uint64_t sum,
    uint64_t min, uint64_t max)
{
	if (count == 0)
		return 0;
	for (unsigned i = 0; i < n_used; i++) {
		int64_t at = sparse_slot(h, used[i]);
		if (at < 0)
			return -1;
		hist_sparse_entries(h)[at].count += counts[used[i]];
	}
	sparse_totals(h, count, sum, min, max);
	return 0;
}

void hist_sparse_merge_into(struct hist *dst, const struct hist_sparse *src)
{
	const struct hist_sparse_entry *e;

	if (src->count == 0)
		return;
	e = hist_sparse_entries(src);
	for (uint32_t i = 0; i < src->n; i++)
		dst->buckets[e[i].idx] += e[i].count;
	if (dst->count == 0 || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
	dst->sum += src->sum;
}

int hist_sparse_merge(struct hist_sparse *dst, const struct hist_sparse *src)
{
	const struct hist_sparse_entry *se = hist_sparse_entries(src);
	struct hist_sparse_entry *de = hist_sparse_entries(dst), *e;
	uint32_t n, i, j, k;

	if (src->count == 0)
		return 0;
	/* the union of two sorted lists, built from the back in place */
	n = dst->n;
	for (i = 0, j = 0; i < src->n; i++) {
		while (j < dst->n && de[j].idx < se[i].idx)
			j++;
		if (j == dst->n || de[j].idx != se[i].idx)
			n++;
	}
	if (n > (dst->cap ? dst->cap : 1)) {
		if (dst->cap) {
			e = realloc(dst->u.e, n * sizeof *e);
		} else if ((e = malloc(n * sizeof *e)) != NULL && dst->n) {
			e[0] = dst->u.one;         /* the entry kept in place moves out */
		}
		if (e == NULL)
			return -1;
		dst->u.e = de = e;
		dst->cap = n;
	}
	i = dst->n;
	j = src->n;
	k = n;
	while (j > 0) {
		if (i > 0 && de[i - 1].idx > se[j - 1].idx) {
			de[--k] = de[--i];
		} else if (i > 0 && de[i - 1].idx == se[j - 1].idx) {
			de[--k] = de[--i];
			de[k].count += se[--j].count;
		} else {
			de[--k] = se[--j];
		}
	}
	dst->n = n;
	sparse_totals(dst, src->count, src->sum, src->min, src->max);
	return 0;
}

double hist_sparse_quantile(const struct hist_sparse *h, double q)
{
	const struct hist_sparse_entry *e = hist_sparse_entries(h);
	uint64_t rank, seen = 0;
	uint32_t i;

	if (h->count == 0)
		return 0;
	if (!(q > 0))
		return (double)h->min;
	if (q >= 1)
		return (double)h->max;
	rank = hist_rank(q, h->count);
	for (i = 0; i < h->n; i++) {
		seen += e[i].count;
		if (seen >= rank)
			return bucket_value(e[i].idx, h->min, h->max);
	}
	return (double)h->max;
}

void hist_sparse_clear(struct hist_sparse *h)
{
	h->count = h->sum = h->min = h->max = 0;
	h->n = 0;
}

void hist_sparse_free(struct hist_sparse *h)
{
	if (h->cap)
		free(h->u.e);
	memset(h, 0, sizeof *h);
}
