/* SPDX-License-Identifier: Apache-2.0 */
#include "nhist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define PER_OCTAVE (1 << NHIST_SCHEMA)

/* bounds[j] = 2^(j / 2^schema) / 2: the fraction frexp gives is compared
 * with them, so values that are powers of two land exactly on an upper
 * bound (as client_golang places them). */
static double bounds[PER_OCTAVE];
static int bounds_ready;

static void bounds_init(void)
{
	for (int j = 0; j < PER_OCTAVE; j++)
		bounds[j] = exp2((double)j / PER_OCTAVE) / 2;
	bounds_ready = 1;
}

int32_t nhist_index(double v)
{
	int e, lo = 0, hi = PER_OCTAVE;
	double frac = frexp(v, &e);          /* v = frac * 2^e, frac in [0.5, 1) */

	if (!bounds_ready)
		bounds_init();
	while (lo < hi) {                    /* the first bound >= frac */
		int mid = (lo + hi) / 2;
		if (bounds[mid] < frac)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int32_t)lo + (int32_t)(e - 1) * PER_OCTAVE;
}

/* ---- whole microseconds -------------------------------------------------- */

/* Cells: us itself below 2^8; from 2^k on (k >= 8), 2^(k-7) values each,
 * 128 to the octave, cell ((k - 7) << 7) + (us >> (k - 7)). A bucket spans
 * 2^(1/64) - 1 = 1.09 % of its values, a cell at most 1/128 = 0.78 %: a
 * cell holds at most one bound, the first value past it is `cut`. */
#define US_CELL_BITS NHIST_US_CELL_BITS
/* blocks of 128 cells: 0 and 1 below 2^8, then b for 2^(b+6), to 2^32 */
#define US_BLOCKS (32 - US_CELL_BITS + 1)
#define US_CELLS (US_BLOCKS << US_CELL_BITS)

struct nhist_us_cell nhist_us_cells[US_CELLS];
int nhist_us_ready;

/* The cell of us: nhist_index_us's math (nhist.h). */
static unsigned us_cell_of(uint64_t us)
{
	unsigned k, s;

	if (us < (1u << (US_CELL_BITS + 1)))
		return (unsigned)us;
	k = 63u - (unsigned)__builtin_clzll(us);
	s = k - US_CELL_BITS;
	return ((k - US_CELL_BITS) << US_CELL_BITS) + (unsigned)(us >> s);
}

static int32_t us_index_slow(uint64_t us)
{
	return nhist_index((double)us / 1e6);
}

/* The cells of block b; values are whole, and the index only grows with
 * them, so the cut is found by bisection between a cell's ends. */
static void us_block_build(unsigned b)
{
	for (unsigned c = b << US_CELL_BITS; c < (b + 1) << US_CELL_BITS; c++) {
		uint64_t lo, hi;
		int32_t a, z;

		if (c < (1u << (US_CELL_BITS + 1))) {
			lo = hi = c;
		} else {
			unsigned s = (c >> US_CELL_BITS) - 1;   /* k - 7 */
			lo = (uint64_t)(c - ((c >> US_CELL_BITS) << US_CELL_BITS) +
			    (1u << US_CELL_BITS)) << s;
			hi = lo + ((uint64_t)1 << s) - 1;
		}
		nhist_us_cells[c].idx = a = lo > 0 ? us_index_slow(lo) : 0;
		nhist_us_cells[c].cut = 0;
		if (lo == 0 || (z = us_index_slow(hi)) == a)
			continue;
		while (lo + 1 < hi) {         /* index(lo) == a, index(hi) > a */
			uint64_t mid = lo + (hi - lo) / 2;
			if (us_index_slow(mid) == a)
				lo = mid;
			else
				hi = mid;
		}
		/* two bounds in one cell cannot happen (see above); were it so,
		 * the cut would say a + 1 where it is more: take the slow way */
		nhist_us_cells[c].cut = z == a + 1 ? (uint32_t)hi : UINT32_MAX;
	}
}

void nhist_prepare(void)
{
	if (nhist_us_ready)
		return;
	for (unsigned b = 0; b < US_BLOCKS; b++)
		us_block_build(b);
	nhist_us_ready = 1;
}

int32_t nhist_index_us_slow(uint64_t us)
{
	const struct nhist_us_cell *cell;

	if (us >= ((uint64_t)1 << 32))
		return us_index_slow(us);
	if (!nhist_us_ready)
		nhist_prepare();
	cell = &nhist_us_cells[us_cell_of(us)];
	if (cell->cut == 0 || us < cell->cut)
		return cell->idx;
	return cell->cut != UINT32_MAX ? cell->idx + 1 : us_index_slow(us);
}

double nhist_upper(int32_t idx)
{
	return exp2((double)idx / PER_OCTAVE);
}

int nhist_record(struct nhist *h, double v)
{
	return nhist_record_n(h, v, 1);
}

/* The bucket idx, inserted if new; -1 when memory ran out. */
static int64_t bucket_slot(struct nhist *h, int32_t idx)
{
	uint32_t lo = 0, hi = h->n;
	struct nhist_bucket *nb;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (h->b[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < h->n && h->b[lo].idx == idx)
		return lo;
	nb = util_array_open(h->b, &h->n, &h->cap, sizeof *nb, lo, 8);
	if (nb == NULL)
		return -1;
	h->b = nb;
	h->b[lo].idx = idx;
	h->b[lo].count = 0;
	return lo;
}

int nhist_record_n(struct nhist *h, double v, uint64_t n)
{
	if (!(v > 0)) {
		h->zero_count += n;
		return 0;
	}
	return nhist_add_index(h, nhist_index(v), n);
}

int nhist_record_us_n(struct nhist *h, uint64_t us, uint64_t n)
{
	if (us == 0) {
		h->zero_count += n;
		return 0;
	}
	return nhist_add_index(h, nhist_index_us(us), n);
}

int nhist_add_index(struct nhist *h, int32_t idx, uint64_t n)
{
	int64_t at = bucket_slot(h, idx);

	if (at < 0)
		return -1;
	h->b[at].count += n;
	return 0;
}

void nhist_free(struct nhist *h)
{
	free(h->b);
	memset(h, 0, sizeof *h);
}
