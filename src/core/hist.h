/* SPDX-License-Identifier: Apache-2.0 */
/* A log-linear (HDR-style) histogram of microsecond values: fixed memory,
 * O(1) record, mergeable, quantiles within 1 % relative error from 1 µs to
 * 1 h (larger values are clamped into the top bucket; max stays exact).
 * Public so it can be embedded without allocation. Not thread-safe: each
 * writer owns its histograms, readers merge copies. */
#ifndef TOKENTAP_HIST_H
#define TOKENTAP_HIST_H

#include <stddef.h>
#include <stdint.h>

/* 64 linear sub-buckets per power of two: the bucket midpoint is within
 * 1/128 of any value in it (< 0.8 %). Values below 64 µs are exact. */
#define HIST_SUB_BITS 6
#define HIST_SUB      (1u << HIST_SUB_BITS)
#define HIST_MAX_US   3600000000ull          /* 1 h */
#define HIST_TOP_BITS 32                     /* 2^32 µs > 1 h */
/* Values below 2*HIST_SUB take one bucket each, then HIST_SUB buckets per
 * power of two from 2^(HIST_SUB_BITS+1) up to 2^HIST_TOP_BITS. */
#define HIST_BUCKETS  (HIST_SUB * (HIST_TOP_BITS - HIST_SUB_BITS + 1))

struct hist {
	uint64_t count;
	uint64_t sum;       /* µs */
	uint64_t min;
	uint64_t max;
	uint32_t buckets[HIST_BUCKETS];
};

/* Same as zeroing: an all-zero struct hist is a valid empty histogram. */
void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t us);
/* dst += src */
void hist_merge(struct hist *dst, const struct hist *src);
/* The value of rank ceil(q * count) in µs, as its bucket's midpoint clamped
 * into [min, max]; q <= 0 gives min, q >= 1 max; 0 for an empty histogram. */
double hist_quantile(const struct hist *h, double q);
double hist_mean(const struct hist *h);
/* Number of recorded values <= us: exact at bucket upper edges, below
 * 2*HIST_SUB, below min and from max up; inside a bucket, that bucket's
 * count is shared in proportion to the part of its width <= us. */
uint64_t hist_count_le(const struct hist *h, uint64_t us);

/* A sparse histogram with the same buckets: only the buckets that hold
 * values, sorted, grown on demand. For the window slices kept per group,
 * where a dense one per slice would cost megabytes. Recording is O(log n)
 * plus an insertion; not for the per-event hot path. */
struct hist_sparse_entry {
	uint16_t idx;
	uint32_t count;
};

/* The first bucket is kept in place of the pointer (cap 0): a slice of a
 * group with one request holds one bucket a histogram, and 100,000 such
 * groups took 3 x 4 allocations each. */
struct hist_sparse {
	uint64_t count;
	uint64_t sum;
	uint64_t min;
	uint64_t max;
	uint32_t n, cap;           /* cap 0: room for the one entry in place */
	union {
		struct hist_sparse_entry *e;
		struct hist_sparse_entry one;
	} u;
};

/* Its n entries, sorted by bucket (const as h is, as strchr's). */
static inline struct hist_sparse_entry *hist_sparse_entries(const struct hist_sparse *h)
{
	return h->cap ? h->u.e : (struct hist_sparse_entry *)&h->u.one;
}

/* Returns 0, or -1 when memory ran out (the value is then not recorded). */
int hist_sparse_record(struct hist_sparse *h, uint64_t us);
/* The same value n times (a coarse histogram's bucket, merged). */
int hist_sparse_record_n(struct hist_sparse *h, uint64_t us, uint32_t n);
/* The bucket of us (0 .. HIST_BUCKETS - 1); the layout is told in hist.c. */
static inline unsigned hist_bucket(uint64_t us)
{
	uint64_t top = (uint64_t)1 << HIST_TOP_BITS;
	uint64_t v = us < top ? us : top - 1;
	unsigned s = 63u - (unsigned)__builtin_clzll(v | HIST_SUB) - HIST_SUB_BITS;

	return (s << HIST_SUB_BITS) + (unsigned)(v >> s);
}
/* Values counted elsewhere by bucket: counts[used[i]] values in bucket
 * used[i] (n_used buckets, each once), count of them in all, summing to
 * sum, from min to max. As many hist_sparse_record; one search a bucket. */
int hist_sparse_add_counts(struct hist_sparse *h, const uint32_t *counts,
    const uint16_t *used, unsigned n_used, uint64_t count, uint64_t sum,
    uint64_t min, uint64_t max);
/* dst += src */
void hist_sparse_merge_into(struct hist *dst, const struct hist_sparse *src);
/* dst += src (two sparse ones). Returns 0, or -1 when memory ran out
 * (dst is then unchanged). */
int hist_sparse_merge(struct hist_sparse *dst, const struct hist_sparse *src);
/* hist_quantile of the same values, from the sparse buckets: the same
 * result to the bit, without a dense copy. */
double hist_sparse_quantile(const struct hist_sparse *h, double q);
/* Empties h, keeping its memory for reuse. */
void hist_sparse_clear(struct hist_sparse *h);
void hist_sparse_free(struct hist_sparse *h);

#endif
