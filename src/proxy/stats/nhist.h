/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus native histograms (sparse exponential buckets) kept beside
 * the classic buckets of /metrics: bucket i of schema s holds the values in
 * (2^((i-1)/2^s), 2^(i/2^s)], values of 0 go to the zero bucket. Only the
 * buckets that hold values are kept, sorted. Main thread only; never on the
 * per-event path (a record is O(log n) plus an insertion). */
#ifndef TOKENTAP_NHIST_H
#define TOKENTAP_NHIST_H

#include <stddef.h>
#include <stdint.h>

/* Schema 6: adjacent bounds 2^(1/64) = 1.011 apart, so histogram_quantile
 * (linear inside a bucket) is within 1.1 % of the value whose bucket holds
 * the rank; with the /stats histogram's own 0.8 %, within 2 % of /stats.
 * Schema 5 would leave 3.0 % in the worst case, the whole margin. */
#define NHIST_SCHEMA 6
/* What the zero bucket holds besides exact zeros: client_golang's default.
 * Every value here is a whole number of microseconds (or tokens) >= 1. */
#define NHIST_ZERO_THRESHOLD 2.938735877055719e-39   /* 2^-128 */

struct nhist_bucket {
	int32_t idx;
	uint64_t count;
};

struct nhist {
	uint64_t zero_count;
	uint32_t n, cap;
	struct nhist_bucket *b;       /* sorted by idx */
};

/* The bucket index of v > 0 at NHIST_SCHEMA. */
int32_t nhist_index(double v);
/* The table of nhist_index_us: cells of 1/128 of a power of two (of us
 * itself below 2^8), each the bucket of its first value and, from `cut`
 * on, the next (0: none; UINT32_MAX: the slow way). */
#define NHIST_US_CELL_BITS 7
struct nhist_us_cell {
	int32_t idx;
	uint32_t cut;
};
extern struct nhist_us_cell nhist_us_cells[];
extern int nhist_us_ready;
/* nhist_index_us without the table: past it, or before it is built. */
int32_t nhist_index_us_slow(uint64_t us);

/* nhist_index((double)us / 1e6), the same, for a whole number of µs >= 1:
 * O(1) from a table (a cell per 1/128 of a power of two, narrower than a
 * bucket, so at most one bound falls in a cell), built at the first use.
 * Inline: the statistics thread takes it for every token gap. */
static inline int32_t nhist_index_us(uint64_t us)
{
	const struct nhist_us_cell *cell;
	unsigned k, c;

	if (us >= ((uint64_t)1 << 32) || !nhist_us_ready)
		return nhist_index_us_slow(us);
	if (us < (1u << (NHIST_US_CELL_BITS + 1))) {
		c = (unsigned)us;
	} else {
		k = 63u - (unsigned)__builtin_clzll(us) - NHIST_US_CELL_BITS;
		c = (k << NHIST_US_CELL_BITS) + (unsigned)(us >> k);
	}
	cell = &nhist_us_cells[c];
	if (cell->cut == 0 || us < cell->cut)
		return cell->idx;
	return cell->cut != UINT32_MAX ? cell->idx + 1 : nhist_index_us_slow(us);
}
/* Builds that table now (at start: about a millisecond), not at the first
 * value. */
void nhist_prepare(void);
/* The upper bound of bucket idx. */
double nhist_upper(int32_t idx);
/* Returns 0, or -1 when memory ran out (the value is then not recorded). */
int nhist_record(struct nhist *h, double v);
/* n values of v at once. */
int nhist_record_n(struct nhist *h, double v, uint64_t n);
/* n values of us µs at once: nhist_record_n(h, us / 1e6, n), by the
 * table (nhist_index_us) and not by frexp and a search. */
int nhist_record_us_n(struct nhist *h, uint64_t us, uint64_t n);
/* n values in bucket idx (of nhist_index), counted elsewhere. */
int nhist_add_index(struct nhist *h, int32_t idx, uint64_t n);
void nhist_free(struct nhist *h);

#endif
